# Consul ACL policy of a read-only themis operator: `themis status` (its
# fallback reads themis/status/), `themis check` (leases, records, status),
# the Consul UI's Key/Value view of themis/. Nothing is written.

key_prefix "themis/" {
  policy = "read"
}
