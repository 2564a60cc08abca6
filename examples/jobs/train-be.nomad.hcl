# A long best-effort training job on all 8 GPUs of the dev node: `hello`
# trains for 3000 steps of 100 ms, checkpoints every 50 steps, and when the
# planner preempts it (a trial-and-error job arrives) it checkpoints within
# its 30 s grace period (the checkpoint takes 2 s here) and later resumes
# from the step it reached.
#
#   themis job run examples/jobs/train-be.nomad.hcl
#   themis job run examples/jobs/try-te.nomad.hcl    # preempts it
#   themis status

variable "hello_bin" {
  type        = string
  default     = "build/bin/hello"
  description = "path of the hello binary (make dev builds it there)"
}

job "train-be" {
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
        args    = ["-steps", "3000", "-step-time", "100ms", "-checkpoint-every", "50", "-checkpoint-time", "2s"]

        themis {
          gpus              = 8
          class             = "be"
          grace_period      = "30s"
          checkpoint_signal = "SIGTERM"
        }
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
