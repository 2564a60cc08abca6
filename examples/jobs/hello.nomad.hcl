# A themis training job: `hello` stands in for a training script. It "trains"
# for a number of steps, prints its progress and the GPUs it was given, and
# checkpoints when asked (SIGINT/SIGTERM on stop, SIGUSR1 on demand).
#
#   nomad job run examples/jobs/hello.nomad.hcl
#   nomad job status hello
#   nomad alloc logs -job hello
#
# The job waits in node pool "themis-pending" (which has no nodes) until the
# themis planner grants it GPUs: then the planner writes the lease to Consul
# KV (themis/leases/...) and moves the job to its node's pool, pinned to that
# node and those GPUs.

variable "hello_bin" {
  type        = string
  default     = "build/bin/hello"
  description = "path of the hello binary (make dev builds it there)"
}

variable "steps" {
  type    = number
  default = 300
}

job "hello" {
  type      = "batch"
  node_pool = "themis-pending"

  group "train" {
    # A failed run is not retried on the same node: the planner re-queues it.
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "hello" {
      driver = "themis"

      config {
        command = abspath(var.hello_bin)
        args    = ["-steps", "${var.steps}", "-step-time", "100ms"]

        themis {
          gpus         = 2
          vc           = "default"
          class        = "be"
          grace_period = "30s"
        }
      }

      # Nomad gives the task this long to checkpoint after the stop signal;
      # keep it at least the grace period.
      kill_timeout = "30s"
      kill_signal  = "SIGINT"

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
