# A themis training job: `hello` stands in for a training script. It "trains"
# for a number of steps, prints its progress and the GPUs it was given, and
# checkpoints when asked (its checkpoint_signal or the notice file on stop,
# SIGUSR1 on demand) and resumes from THEMIS_RESUME_FROM (docs/checkpoints.md).
#
#   themis job run examples/jobs/hello.nomad.hcl   # follows it: queued, granted, running
#   (nomad job run -detach examples/jobs/hello.nomad.hcl: the plain Nomad way)
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
          # sent to the task's process group on stop; Nomad's kill_signal
          # is not used by the themis driver
          checkpoint_signal = "SIGTERM"
        }
      }

      # Nomad gives the driver min(kill_timeout, the client's
      # max_kill_timeout) to stop the task; the driver waits the grace
      # period, cut to that. Keep it at least the grace period (the planner
      # sets it to the grace period when it pins the job).
      kill_timeout = "30s"

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
