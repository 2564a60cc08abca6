# Two nodes, mixed models, explicit ids, one unhealthy GPU.
node "node-a" {
  gpu {
    index      = 1
    model      = "V100-SXM2-16GB"
    memory_mib = 16384
    path       = "socket0/pair0"
    id         = "GPU-a1"
    pci_bus_id = "00000000:3B:00.0"
  }
  gpu {
    index      = 0
    model      = "V100-SXM2-16GB"
    memory_mib = 16384
    path       = "socket0/pair0"
    id         = "GPU-a0"
  }
  gpu {
    index      = 2
    model      = "T4"
    memory_mib = 15360
    path       = "socket1"
    id         = "GPU-a2"
    healthy    = false
  }
}

node "node-b" {
  rack = "rack2"
  gpu {
    index      = 0
    model      = "T4"
    memory_mib = 15360
    path       = ""
  }
}
