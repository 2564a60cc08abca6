# A 16-GPU training job on the 3-node dev cluster (`make dev ARGS="-clients 3"`:
# three 8-GPU nodes): the planner runs it as a gang of two parts, 8 GPUs on
# each of two nodes, and sets the group's count to 2 itself (leave count at
# 1). Each part starts only once both parts are placed, with its rank and
# the gang's rendezvous address in its environment (docs/gangs.md); a real
# job would start torchrun with them:
#
#   torchrun --nnodes=$THEMIS_GANG_SIZE --node_rank=$THEMIS_GANG_RANK \
#     --nproc_per_node=$THEMIS_GPUS_PER_NODE \
#     --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT train.py
#
#   themis job run examples/jobs/gang-16.nomad.hcl
#   themis status                      # granted on node-0,node-1
#   nomad job status gang-16           # two allocations, one per node

variable "hello_bin" {
  type        = string
  default     = "build/bin/hello"
  description = "path of the hello binary (make dev builds it there)"
}

job "gang-16" {
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
        # Rank 0 writes the gang's checkpoints; every rank resumes from them.
        args = ["-steps", "3000", "-step-time", "100ms", "-checkpoint-every", "50"]

        themis {
          gpus         = 16
          class        = "be"
          grace_period = "30s"
        }
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
