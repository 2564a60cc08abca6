# A Nomad client for a shared GPU cluster running themis-nomad: complete
# and safe as it is (docs/hardening.md says why each line is here). Change
# the addresses, paths, rack and servers; keep the rest unless the
# hardening guide says what you give up.
#
# The node's real GPUs are fingerprinted through NVML (docs/nvml.md); the
# themis driver runs each allocation as a dynamic uid of its own, fenced
# to its own GPUs' device files, and checks the GPU leases in Consul.
#
# This file holds tokens (the agent's Consul token, the themis plugins'):
# install it root's, 0600 (`install -m 0600 -o root nomad-client-gpu.hcl
# /etc/nomad.d/client.hcl`), in a dir no task can list (docs/hardening.md,
# "Files that hold secrets").

datacenter = "dc1"
data_dir   = "/opt/nomad/data" # root's; make it 0711 so tasks reach their alloc dirs (Nomad makes it 0700)
plugin_dir = "/opt/nomad/plugins" # themis-device and themis-driver, root's 0755
log_level  = "INFO"

client {
  enabled = true
  servers = ["nomad-server-1:4647", "nomad-server-2:4647", "nomad-server-3:4647"]

  # Themis jobs wait in the pending pool until the planner pins them to a
  # node of this pool; users cannot place GPU jobs here themselves when
  # their ACL policy has no write on this pool (docs/hardening.md).
  node_pool = "gpu"

  # Long grace periods for checkpointing jobs: Nomad cuts a task's
  # kill_timeout to this (default 30s); the planner's -max-kill-timeout
  # must be the same.
  max_kill_timeout = "30m"

  options = {
    # Tasks of Nomad's own drivers never run as root, or as a name that is
    # root under another: raw_exec is checked too (Nomad checks exec, java
    # and qemu by default), so a raw_exec task naming root is refused here
    # as the planner refuses a raw_exec themis task that would run as root.
    # The themis driver applies its own allowed_users and allow_root_jobs.
    "user.denylist"        = "root,toor"
    "user.checked_drivers" = "exec,raw_exec,java,qemu"
    # Cloud fingerprinters hang on machines with AWS_CA_BUNDLE set.
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}

# Consul with ACLs on (examples/acl); the agent's own token.
consul {
  address = "127.0.0.1:8500"
  token   = "<the agent's Consul token>"
}

acl {
  enabled = true
}

# Mutual TLS between agents and on the HTTP API (`nomad tls ca create`,
# `nomad tls cert create -client`): without it anyone on the network
# speaks to the client's RPC and API unauthenticated.
tls {
  http                   = true
  rpc                    = true
  ca_file                = "/etc/nomad.d/tls/nomad-agent-ca.pem"
  cert_file              = "/etc/nomad.d/tls/global-client-nomad.pem"
  key_file               = "/etc/nomad.d/tls/global-client-nomad-key.pem"
  verify_server_hostname = true
  verify_https_client    = true
}

# raw_exec runs tasks on the host as the client's user (root) or a named
# user, with no filesystem isolation, every GPU device file openable and
# group 0 added by Nomad's executor: off (docs/hardening.md, "raw_exec").
plugin "raw_exec" {
  config {
    enabled = false
  }
}

# exec: a chroot, a PID namespace and a device cgroup; an exec themis job
# sees its own job's checkpoint dir only (the device plugin's mount). But
# Nomad gives an exec task that is not root its default capabilities as
# ambient ones (dac_override, chown, fowner, setuid, setgid, kill, ...:
# drivers/shared/executor, configureCapabilities): `nobody` then reads and
# writes every file it can see, whatever its mode. Allow none that a
# training job does not need.
plugin "exec" {
  config {
    allow_caps = ["audit_write", "net_bind_service"]
  }
}

# docker: a themis docker job gets its own GPUs' device files (--device,
# from the device plugin) and the NVIDIA runtime. These are Nomad's
# defaults, written out so that no one widens them here: no privileged
# container (it opens every /dev/nvidia*), no host paths as volumes or
# bind mounts (-v /dev:/dev, the Docker socket), runc and the NVIDIA
# runtime only (GPU jobs need "nvidia": Nomad checks the runtime it picks
# for them against this list too). A job's own runtime, devices,
# privileged and NVIDIA_VISIBLE_DEVICES are the planner's whole-job check's
# to refuse (docs/hardening.md, "Still open": the NVIDIA runtime).
plugin "docker" {
  config {
    allow_privileged = false
    allow_runtimes   = ["runc", "nvidia"]
    volumes {
      enabled = false
    }
  }
}

plugin "themis-device" {
  config {
    backend            = "nvml"
    rack               = "rack0" # the rack this node sits in
    fingerprint_period = "10s"
    # A GPU hit by a critical XID is healthy again after this long with no
    # other; leave it out to keep it bad until the plugin restarts.
    # xid_recovery     = "30m"

    # The driver's checkpoint_root: each exec or docker themis task gets
    # its own job's dir below it at /themis-checkpoints, found through the
    # GPU leases (read with the driver's token, examples/acl/driver.consul.hcl).
    checkpoint_root = "/var/lib/themis/checkpoints"
    consul_address  = "127.0.0.1:8500"
    consul_token    = "<the themis driver's Consul token>"
  }
}

plugin "themis-driver" {
  config {
    consul_address = "127.0.0.1:8500"
    consul_token   = "<the themis driver's Consul token>"
    lease_check    = true # refuse tasks on GPUs not leased to their job

    # Root's and not writable by others (the driver refuses a root a user
    # could swap); shared storage across clients for jobs to resume on
    # another node. Not under /tmp.
    checkpoint_root  = "/var/lib/themis/checkpoints"
    keep_checkpoints = 3

    # One identity per allocation: a uid from this range, held while the
    # allocation runs, claimed in checkpoint_root so clients sharing it
    # never hand out one uid twice. Keep it clear of real users, of
    # Nomad's own dynamic users (80000-89999) and of /etc/subuid ranges.
    dynamic_user_min = 90000
    dynamic_user_max = 99999

    # A task's `user` is honoured only when listed here for its namespace
    # ("<namespace>/<user>", "*/<user>"); none by default.
    allowed_users = []
    # Groups every task is in besides its own (say, one that may read
    # the datasets); none by default, never group 0.
    supplementary_groups = []
    # Namespaces (or "<namespace>/<job>") whose tasks may run as root; a
    # root task can leave a cgroups v1 device fence. None.
    allow_root_jobs = []

    # Device files every task may open besides its own GPUs' (InfiniBand
    # for a multi-node gang's RDMA, say): docs/nvml.md.
    allow_devices = []

    # Where the other parts of a multi-node gang reach this node's part.
    advertise_address = "10.0.0.5"
    gang_timeout      = "5m"

    # How long a task's start waits for a process of another allocation
    # that still holds one of its GPUs on this node (a task whose
    # allocation Nomad marked lost while its client was down) before it
    # fails naming it.
    gpu_hold_timeout = "5m"
  }
}
