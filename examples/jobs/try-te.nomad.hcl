# A trial-and-error job ("does my model even train?"): 2 GPUs for 50 steps.
# Under FitGpp (`themis dev`'s default policy) it starts at once when GPUs
# are free, and otherwise preempts the best-effort job that Equation 2 picks.

variable "hello_bin" {
  type        = string
  default     = "build/bin/hello"
  description = "path of the hello binary (make dev builds it there)"
}

job "try-te" {
  type      = "batch"
  node_pool = "themis-pending"

  group "train" {
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
        args    = ["-steps", "50", "-step-time", "100ms"]

        themis {
          gpus         = 2
          class        = "te"
          grace_period = "10s"
        }
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
