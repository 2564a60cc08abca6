# Consul ACL policy of the themis planner (docs/acl.md). Every key it reads
# or writes is under themis/ (planner/lease, planner/consul); it writes
# through KV transactions (/v1/txn), whose every operation Consul checks
# against these rules.

# Leader lock (planner/consul/leader.go): a session, then acquire/monitor
# the lock key.
session_prefix "" {
  policy = "write"
}
key "themis/planner/leader" {
  policy = "write"
}
# Each planner's liveness: a service instance with a TTL check it passes
# every second; its session is bound to the check, so a killed leader's
# lock goes 3 s after its last heartbeat. Without this rule the planner
# still leads, but a standby takes over from a killed leader only after
# the session's TTL and Consul's lock delay (about 45 s).
service "themis-planner" {
  policy = "write"
}

# GPU and job leases: granted, revoked, renewed, released (CAS in txns).
key_prefix "themis/leases/" {
  policy = "write"
}
# The planner's job records (what it must remember across restarts).
key_prefix "themis/jobs/" {
  policy = "write"
}
# Job status records for operators (`themis status`, Consul UI).
key_prefix "themis/status/" {
  policy = "write"
}
# Policy state (fitgpp, themis, ...) and the last auction's report.
key_prefix "themis/policy/" {
  policy = "write"
}
key_prefix "themis/auction/" {
  policy = "write"
}
# Written by the driver; the planner reads them and deletes them with the
# job's record (checkpoints, progress) or its lease (gangs).
key_prefix "themis/checkpoints/" {
  policy = "write"
}
key_prefix "themis/progress/" {
  policy = "write"
}
key_prefix "themis/gangs/" {
  policy = "write"
}
