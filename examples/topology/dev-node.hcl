# The simulated GPU node that `make dev` brings up: an 8-GPU machine laid out
# like a DGX: 2 CPU sockets, each with 2 PCIe switches, each switch holding one
# NVLink pair of 2 GPUs. Jobs placed by the planner stay inside the smallest
# cell that holds them (a pair for 2 GPUs, a socket for 4).
#
# Mark a GPU unhealthy by adding `healthy = false` to its block; the device
# plugin re-reads this file on every fingerprint.

node "dev-node" {
  rack = "rack0"

  gpu {
    index      = 0
    model      = "SIM-A100-80GB"
    memory_mib = 81920
    path       = "socket0/switch0/pair0"
  }
  gpu {
    index      = 1
    model      = "SIM-A100-80GB"
    memory_mib = 81920
    path       = "socket0/switch0/pair0"
  }
  gpu {
    index      = 2
    model      = "SIM-A100-80GB"
    memory_mib = 81920
    path       = "socket0/switch1/pair1"
  }
  gpu {
    index      = 3
    model      = "SIM-A100-80GB"
    memory_mib = 81920
    path       = "socket0/switch1/pair1"
  }
  gpu {
    index      = 4
    model      = "SIM-A100-80GB"
    memory_mib = 81920
    path       = "socket1/switch2/pair2"
  }
  gpu {
    index      = 5
    model      = "SIM-A100-80GB"
    memory_mib = 81920
    path       = "socket1/switch2/pair2"
  }
  gpu {
    index      = 6
    model      = "SIM-A100-80GB"
    memory_mib = 81920
    path       = "socket1/switch3/pair3"
  }
  gpu {
    index      = 7
    model      = "SIM-A100-80GB"
    memory_mib = 81920
    path       = "socket1/switch3/pair3"
  }
}
