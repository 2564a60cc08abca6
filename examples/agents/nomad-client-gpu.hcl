# The themis plugins on a Nomad client with real NVIDIA GPUs: the device
# plugin's nvml backend fingerprints the GPUs, their topology as cells
# (NVLink / PCIe switch / socket), MIG instances and health through NVML.
# See docs/nvml.md. Merge into the client's agent config.

plugin_dir = "/opt/nomad/plugins" # holds themis-device and themis-driver

client {
  enabled = true
  # Long grace periods for checkpointing jobs need a higher cap than 30s.
  max_kill_timeout = "30m"
}

plugin "themis-device" {
  config {
    backend            = "nvml"
    rack               = "rack0"  # the rack this node sits in
    fingerprint_period = "10s"
    # A GPU hit by a critical XID is healthy again after this long with no
    # other; leave it out to keep it bad until the plugin restarts.
    # xid_recovery     = "30m"
  }
}

# plugin "themis-driver" { ... } as in nomad-dev.hcl.tmpl, with this
# cluster's Consul address.
