# Virtual clusters for the philly-256 simulated cluster
# (`themis sim --cluster philly-256`): 12 4-GPU nodes in rack0 and 26 8-GPU
# nodes in rack1-rack4, 256 GPUs.
#
# Cell types are named <level><GPUs>: "gpu", "pair2" (an NVLink pair),
# "socket4", "node4", "node8", and the racks "rack48" (12 node4), "rack64"
# (8 node8) and "rack16" (2 node8). Each VC owns cells; they are bound to
# physical cells of the same type only when its jobs need them, so the VC
# always finds them, whatever the other VCs and the opportunistic jobs do.
#
# Each VC names the Nomad namespaces that may use it (docs/hived.md, "Who
# may use a virtual cluster"): live, a VC no namespace block binds is
# closed, and namespace "*" {} would open it to every namespace.

vc "production" {
  # One whole rack: 64 GPUs with rack affinity, e.g. for 32-GPU gangs.
  cells {
    type  = "rack64"
    count = 1
  }
  namespace "production" {}
}

vc "research" {
  cells {
    type  = "node8"
    count = 8
  }
  cells {
    type  = "pair2"
    count = 8
  }
  namespace "research" {
    max_priority = 100
  }
  # Every other team may borrow idle research GPUs, opportunistically.
  namespace "*" {
    max_priority = -1
  }
}

vc "interns" {
  cells {
    type  = "node4"
    count = 6
  }
  # A node the team owns for good (its rack is rack0).
  pin = ["rack0-n11"]
  namespace "interns" {
    classes = ["be"]
  }
}
