job "x" {
  type = "system"
  priority = 100
  node_pool = "themis-pending"
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image = "x"
        runtime = "nvidia"
        privileged = true
        devices = [{ host_path = "/dev/nvidia0" }]
        device_cgroup_rules = ["c 195:* rwm"]
      }
      env { NVIDIA_VISIBLE_DEVICES = "all" }
      template {
        data = "NVIDIA_VISIBLE_DEVICES=all"
        destination = "local/env"
        env = true
      }
      meta = { "themis.gpus" = "1" }
    }
  }
}
