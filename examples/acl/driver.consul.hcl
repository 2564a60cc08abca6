# Consul ACL policy of the themis task driver on every Nomad client
# (plugin "themis-driver" { config { consul_token = "..." } }; docs/acl.md),
# and of the themis device plugin where it mounts checkpoint dirs (plugin
# "themis-device" { config { checkpoint_root = "..." consul_token = "..." } }).

# The lease check at task start: GPU and job leases, read only (the device
# plugin reads the GPU leases in Reserve).
key_prefix "themis/leases/" {
  policy = "read"
}
# A task's newest complete checkpoint (driver/lease.go ReportCheckpoint).
key_prefix "themis/checkpoints/" {
  policy = "write"
}
# A task's progress (driver/progress.go).
key_prefix "themis/progress/" {
  policy = "write"
}
# Multi-node gang rendezvous: each part writes its rank, lists the others
# (driver/gang.go).
key_prefix "themis/gangs/" {
  policy = "write"
}
