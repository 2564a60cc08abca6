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

namespace "*" {
  capabilities = ["list-jobs", "read-job", "submit-job"]
}

node {
  policy = "read"
}

node_pool "*" {
  policy = "read"
}

# -pending-pool (default themis-pending): created at start if missing.
node_pool "themis-pending" {
  policy = "write"
}
