# An 8-GPU node: 2 CPU sockets x 2 PCIe switches x 1 NVLink pair of 2 GPUs.
node "dgx-0" {
  rack = "rack1"

  gpu {
    index      = 0
    model      = "A100-SXM4-80GB"
    memory_mib = 81920
    path       = "socket0/switch0/pair0"
  }
  gpu {
    index      = 1
    model      = "A100-SXM4-80GB"
    memory_mib = 81920
    path       = "socket0/switch0/pair0"
  }
  gpu {
    index      = 2
    model      = "A100-SXM4-80GB"
    memory_mib = 81920
    path       = "socket0/switch1/pair0"
  }
  gpu {
    index      = 3
    model      = "A100-SXM4-80GB"
    memory_mib = 81920
    path       = "socket0/switch1/pair0"
  }
  gpu {
    index      = 4
    model      = "A100-SXM4-80GB"
    memory_mib = 81920
    path       = "socket1/switch0/pair0"
  }
  gpu {
    index      = 5
    model      = "A100-SXM4-80GB"
    memory_mib = 81920
    path       = "socket1/switch0/pair0"
  }
  gpu {
    index      = 6
    model      = "A100-SXM4-80GB"
    memory_mib = 81920
    path       = "socket1/switch1/pair0"
  }
  gpu {
    index      = 7
    model      = "A100-SXM4-80GB"
    memory_mib = 81920
    path       = "socket1/switch1/pair0"
  }
}
