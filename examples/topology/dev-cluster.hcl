# The simulated GPU cluster that `themis dev -clients 3` brings up: three
# 8-GPU machines in two racks (node-0 and node-1 in rack0, node-2 in rack1),
# each laid out as examples/topology/dev-node.hcl: 2 CPU sockets, each with 2
# PCIe switches, each switch holding one NVLink pair of 2 GPUs. Each Nomad
# client of the dev cluster is one node of this file (the device plugin's
# `node`), so the planner sees three nodes and two racks. GPU ids are
# SIM-<node>-<index>.
#
# `themis dev -clients N` takes the first N nodes; add node blocks for more.
# Mark a GPU unhealthy by adding `healthy = false` to its block; the device
# plugins re-read this file on every fingerprint.

node "node-0" {
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

node "node-1" {
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

node "node-2" {
  rack = "rack1"

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
