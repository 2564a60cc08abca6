# Nomad ACL policy of a read-only themis operator: `themis check` (jobs,
# allocations), `nomad job status`, `nomad node status`, the Nomad UI. It
# cannot submit or stop jobs; users who submit themis jobs need submit-job
# in their namespace and read on the themis-pending node pool.

namespace "*" {
  policy = "read"
}

node {
  policy = "read"
}

node_pool "*" {
  policy = "read"
}
