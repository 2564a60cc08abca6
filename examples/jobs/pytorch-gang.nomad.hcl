# A 16-GPU PyTorch job on the 3-node dev cluster (`make dev ARGS="-clients
# 3"`): the planner runs it as a gang of two parts, one per node
# (docs/gangs.md), and each part starts torchrun through
# examples/pytorch/themis_ckpt.py from the environment the driver gives it
# (THEMIS_GANG_SIZE, THEMIS_GANG_RANK, MASTER_ADDR, MASTER_PORT): the two
# parts form one gloo process group and train train.py's model with
# DistributedDataParallel. Rank 0 checkpoints for the gang; preempted, the
# whole gang stops after the same step and resumes from that checkpoint.
#
#   themis job run examples/jobs/pytorch-gang.nomad.hcl
#   nomad job status pytorch-gang             # two allocations, one per node
#
# On CPU each part runs one process (--nproc-per-node 1); on GPUs leave it
# out and a part runs one process per GPU (THEMIS_GPUS_PER_NODE).

variable "pytorch_dir" {
  type    = string
  default = "examples/pytorch"
}

variable "python" {
  type    = string
  default = "/usr/bin/python3"
}

variable "steps" {
  type    = number
  default = 3000
}

job "pytorch-gang" {
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

    task "train" {
      driver = "themis"

      config {
        command = var.python
        args = ["${abspath(var.pytorch_dir)}/themis_ckpt.py", "torchrun", "--nproc-per-node", "1",
        "${abspath(var.pytorch_dir)}/train.py", "--steps", "${var.steps}"]

        themis {
          gpus         = 16
          class        = "be"
          grace_period = "30s"
          iterations   = var.steps
          # torchrun's agent takes SIGTERM as its own death (it exits 1 once
          # its workers stop); the launcher makes it ignore SIGUSR1, which
          # the workers take as the checkpoint request.
          checkpoint_signal = "SIGUSR1"
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
