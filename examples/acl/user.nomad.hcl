# Nomad ACL policy of a user (a team) who submits themis jobs (docs/acl.md,
# "Users"). Name the team's namespace below; give each team its own.
#
# The planner, not the user, moves a granted job into its GPUs' node pool,
# with its own token. Nomad CE does not check node pool rights when a job
# is registered (only Nomad Enterprise's namespace node_pool_config or a
# Sentinel policy could), so nothing in this policy keeps a user from
# registering straight into a GPU pool: the fence there is that the team's
# namespace allows only the themis driver, which refuses to start a task on
# any GPU not leased to its job. Create the namespace with
#
#   nomad namespace apply -description "team" team   # then, in its spec:
#   capabilities { enabled_task_drivers = ["themis"] }
#
# (examples/acl/team.namespace.hcl). The pending pool read below is what
# Nomad Enterprise's node pool checks would ask for.

# No read-fs (nor alloc-exec, alloc-node-exec): Nomad's `alloc fs` checks
# a path's symlinks as root and then opens it, and a task that swaps a dir
# for a symlink between the two has root read any file of the client for
# the caller (docs/hardening.md, "ACL rules for users"). `nomad alloc logs`
# (read-logs) reads the themis task's logs, whose dir the driver keeps
# root's.
namespace "team" {
  capabilities = ["submit-job", "read-job", "list-jobs", "read-logs"]
}

node_pool "themis-pending" {
  policy = "read"
}
