# The themis planner as a Nomad service job: two planners on two nodes, one
# leading (Consul lock themis/planner/leader), the other standing by to take
# over within seconds (docs/guide.md, "Install"). Each serves the API, the
# dashboard and the metrics on a port of its own; the standby answers 503
# naming the leader, so the service's check passes only on the leader.
#
# Put the themis binary at /usr/local/bin/themis on the nodes that run it
# (not GPU clients: this job has no themis stanza and runs in the default
# pool), and the planner's tokens in a Nomad variable this job can read:
#
#   nomad var put nomad/jobs/themis-planner \
#       nomad_token=<secret of a token with examples/acl/planner.nomad.hcl> \
#       consul_token=<secret of a token with examples/acl/planner.consul.hcl>
#   nomad job run examples/jobs/themis-planner.nomad.hcl

variable "policy" {
  type        = string
  default     = "fitgpp"
  description = "the queue policy (themis planner -policy)"
}

variable "max_kill_timeout" {
  type        = string
  default     = "30m"
  description = "the GPU clients' client.max_kill_timeout"
}

job "themis-planner" {
  type      = "service"
  node_pool = "default"

  group "planner" {
    count = 2

    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    network {
      port "api" {}
    }

    service {
      name     = "themis-api"
      port     = "api"
      provider = "consul"
      # Only the leader answers 200: the others are standbys.
      check {
        type     = "http"
        path     = "/v1/queue"
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "planner" {
      driver = "exec"

      config {
        command = "/usr/local/bin/themis"
        args = [
          "planner",
          "-id", "${NOMAD_ALLOC_ID}",
          "-policy", var.policy,
          "-max-kill-timeout", var.max_kill_timeout,
          "-nomad-addr", "http://${attr.unique.network.ip-address}:4646",
          "-consul-addr", "${attr.unique.network.ip-address}:8500",
          # The node's own address, not every interface: standbys and
          # the CLI reach it there; every caller names a Nomad ACL token
          # and sees only the namespaces it can read (-http-acl, the
          # default; docs/api.md, "Access").
          "-http-addr", "${NOMAD_IP_api}:${NOMAD_PORT_api}",
          "-http-advertise", "http://${NOMAD_ADDR_api}",
        ]
      }

      # The planner's tokens, from the job's Nomad variable: into the
      # environment, and the rendered file root's 0600 (Nomad's default is
      # 0644, readable by whatever else reaches the secrets dir).
      template {
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/themis-planner" }}
          NOMAD_TOKEN={{ .nomad_token }}
          CONSUL_HTTP_TOKEN={{ .consul_token }}
          {{ end }}
        EOT
        destination = "secrets/tokens.env"
        env         = true
        perms       = "0600"
      }

      # Nomad stops the leader gracefully on an update: it releases the
      # lock, and the standby leads.
      kill_timeout = "10s"

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
