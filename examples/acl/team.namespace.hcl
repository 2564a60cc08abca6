# A team's Nomad namespace (docs/acl.md, "Users"): its jobs may use the
# themis task driver only, which checks at every start that each GPU Nomad
# gave the task is leased to the job. Users get examples/acl/user.nomad.hcl
# for it.
#
#   nomad namespace apply examples/acl/team.namespace.hcl

name        = "team"
description = "a team that submits themis jobs"

capabilities {
  enabled_task_drivers = ["themis"]
}
