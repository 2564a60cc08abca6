# Two teams on the dev cluster (examples/topology/dev-cluster.hcl: 3 nodes x
# 8 GPUs), each with one node's worth of cells and a queue policy of its
# own; the third node is nobody's: opportunistic jobs (priority = -1) of
# either team run there, and on the teams' idle cells.
#
#   themis sim --workload fitgpp --cluster examples/topology/dev-cluster.hcl \
#     --vc-config examples/vcs/two-policies.hcl --policy fifo \
#     --set workload.vcs=trial,research --set workload.nodes=3 --set workload.jobs=400
#   themis dev -clients 3 -policy fifo -vc-config examples/vcs/two-policies.hcl
#
# The policy and knobs of a VC rank, preempt and make room among its own
# guaranteed jobs only (docs/hived.md); a VC without them runs the stack's
# policy (-policy / --policy) with the stack's knobs (-set / --set).
#
# Live, each VC is bound to its team's Nomad namespace (docs/hived.md, "Who
# may use a virtual cluster"): a job of another namespace that names the VC,
# or a priority or class its namespace may not use, is rejected naming the
# field, the namespace and the rule. Each team gets its namespace and a
# submit token for it (docs/acl.md, "Users"):
#
#   nomad namespace apply -description "team trial" team-trial
#   nomad namespace apply -description "team research" team-research
#
# The simulator does not look at namespaces.

vc "trial" {
  # Trial-and-error jobs (class = "te") preempt the VC's best-effort jobs,
  # one at a time, as FitGpp says.
  policy = "fitgpp"
  knobs  = { "fitgpp.max_preemptions" = 2 }
  cells {
    type  = "node8"
    count = 1
  }
  # Team trial's jobs, of any class and priority, guaranteed or
  # opportunistic.
  namespace "team-trial" {}
}

vc "research" {
  # Least attained service first: a job that has had 30 GPU-minutes drops
  # to the second queue and is preempted for newer jobs.
  policy = "tiresias-las"
  knobs  = { "tiresias.queues" = "30m" }
  cells {
    type  = "node8"
    count = 1
  }
  # Team research's: best-effort only (trial-and-error jobs belong in
  # trial), priorities up to 100.
  namespace "team-research" {
    max_priority = 100
    classes      = ["be"]
  }
}
