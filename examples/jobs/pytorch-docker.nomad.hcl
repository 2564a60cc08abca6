# The PyTorch job of pytorch.nomad.hcl under Nomad's docker driver, with the
# themis stanza in the task's meta (docs/drivers.md): the image is built
# locally from examples/docker/pytorch with no registry pull, on the Docker
# daemon `themis dev` starts (its banner prints DOCKER_HOST):
#
#   DOCKER_HOST=unix://... examples/docker/build.sh pytorch    # themis-pytorch:dev
#   themis job run examples/jobs/pytorch-docker.nomad.hcl
#   themis job run examples/jobs/try-te.nomad.hcl      # preempts it
#
# The planner's pin mounts the checkpoint volume at /themis-checkpoints and
# sets THEMIS_CHECKPOINT_DIR in it, the kill signal and the grace period;
# with no THEMIS_RESUME_FROM under docker, themis_ckpt finds the newest
# complete checkpoint there itself.

variable "image" {
  type    = string
  default = "themis-pytorch:dev"
}

variable "steps" {
  type    = number
  default = 3000
}

job "pytorch-docker" {
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
      driver = "docker"

      config {
        image = var.image
        args  = ["--steps", "${var.steps}"]
        # the dev stack's dockerd has no bridge network; the job needs none
        network_mode = "none"
      }

      # A map attribute (meta = {...}): HCL does not take the dotted keys
      # as argument names in a meta block.
      meta = {
        "themis.gpus"              = "8"
        "themis.class"             = "be"
        "themis.grace_period"      = "30s"
        "themis.checkpoint_signal" = "SIGTERM"
        "themis.iterations"        = "${var.steps}"
      }

      resources {
        cpu    = 500
        memory = 1024
      }
    }
  }
}
