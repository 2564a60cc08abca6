# A real PyTorch training job (examples/pytorch/train.py, CPU): an MLP on
# seeded synthetic data with AdamW and a warm-up/cosine learning rate. It
# keeps the checkpoint protocol through examples/pytorch/themis_ckpt.py:
# resumes from THEMIS_RESUME_FROM, checkpoints (COMPLETE last) on its
# checkpoint signal or the notice file and exits 0, reports progress
# (iteration, total, loss) for `themis status` and Themis's auction.
#
#   themis job run examples/jobs/pytorch.nomad.hcl
#   nomad alloc logs -job pytorch train       # train: step N loss L lr X
#   themis status                             # progress: iterations, rate, loss
#   themis job run examples/jobs/try-te.nomad.hcl   # preempts it; it resumes later
#
# Needs Debian's python3-torch on /usr/bin/python3 (`make torch`); another
# python3 first on PATH may not see it, so the job names the interpreter.

variable "pytorch_dir" {
  type        = string
  default     = "examples/pytorch"
  description = "the folder with train.py and themis_ckpt.py"
}

variable "python" {
  type    = string
  default = "/usr/bin/python3"
}

variable "steps" {
  type    = number
  default = 3000
}

variable "gpus" {
  type        = number
  default     = 8
  description = "all of the dev node's GPUs, so that a te job (try-te.nomad.hcl) preempts it"
}

job "pytorch" {
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

    task "train" {
      driver = "themis"

      config {
        command = var.python
        args    = ["${abspath(var.pytorch_dir)}/train.py", "--steps", "${var.steps}"]

        themis {
          gpus         = var.gpus
          class        = "be"
          grace_period = "30s"
          # what the job plans to do: with its progress reports, the
          # planner estimates its remaining time
          iterations = var.steps
        }
      }

      env {
        PYTHONDONTWRITEBYTECODE = "1"
        PYTHONUNBUFFERED        = "1"
      }

      resources {
        cpu    = 500
        memory = 1024
      }
    }
  }
}
