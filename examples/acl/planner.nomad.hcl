# Nomad ACL policy of the themis planner (docs/acl.md). Exactly what
# planner/nomad calls:
#   GET  /v1/jobs?namespace=*            list-jobs      (snapshot)
#   GET  /v1/job/:id                     read-job       (snapshot, before a rewrite)
#   PUT  /v1/job/:id  (EnforceIndex)     submit-job     (pin a granted job, move a revoked one back)
#   GET  /v1/allocations?namespace=*     read-job       (snapshot)
#   GET  /v1/event/stream (Job, Allocation, Evaluation: read-job; Node: node read)
#   GET  /v1/nodes?resources=true        node read      (GPUs, pools)
#   PUT  /v1/node/pools                  node_pool write on the pending pool
# A job registered into a node pool needs read on that pool: the planner
# moves granted jobs into their node's pool, hence read on every pool.
# The planner re-registers a user's job as it is, so Nomad checks the
# job's other needs against the planner's token too (host volumes below).

namespace "*" {
  capabilities = ["list-jobs", "read-job", "submit-job"]
}

node {
  policy = "read"
}

node_pool "*" {
  policy = "read"
}

# The planner re-registers users' jobs as they are, and Nomad checks the
# registering token's host volume rights: add here the host volumes
# (host_volume "<name>" { capabilities = ["mount-readwrite"] }; CSI volumes:
# namespace capability csi-mount-volume) that themis jobs mount. Their
# checkpoint dirs need none: the themis device plugin mounts each exec or
# docker job's own (docs/drivers.md).

# -pending-pool (default themis-pending): created at start if missing.
node_pool "themis-pending" {
  policy = "write"
}
