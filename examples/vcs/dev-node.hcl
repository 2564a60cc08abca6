# Two virtual clusters on the dev node (`themis dev -policy fifo -vc-config
# examples/vcs/dev-node.hcl`): each team owns one CPU socket's worth of GPUs
# (a "socket4" cell: 2 NVLink pairs), bound to a physical socket only when
# its jobs need it. Guaranteed jobs (priority >= 0) run in their team's
# cell; opportunistic jobs (priority = -1) use idle GPUs anywhere and are
# preempted, with their grace period, when a team needs its cell back.
#
# `themis dev` runs every job in Nomad's "default" namespace, so both VCs
# bind it; on a shared cluster, bind each team's own namespace (a VC no
# namespace block binds is closed: docs/hived.md).

vc "vision" {
  cells {
    type  = "socket4"
    count = 1
  }
  namespace "default" {}
}

vc "speech" {
  cells {
    type  = "socket4"
    count = 1
  }
  namespace "default" {}
}
