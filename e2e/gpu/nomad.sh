#!/usr/bin/env bash
# A real Nomad agent on the GPU machine, with the themis plugins of DIR
# (e2e/gpu/build.sh with NOMAD=1 puts nomad, themis-device and themis-driver
# there): the device plugin's nvml backend fingerprints the GPU, Nomad
# places a job asking for device "themis/gpu", the themis driver starts it
# with what Nomad's device hook passed (env and device files) and fences it.
# A second job asks for no GPU but names it in CUDA_VISIBLE_DEVICES. No
# Consul and no planner: this checks the node's side through Nomad itself.
# Run by e2e/gpu/run.sh when DIR holds nomad; writes nomad.log under $OUT.
set -uo pipefail
dir="$1"
OUT="${OUT:-/tmp/themis-gpu}"
python="${THEMIS_TORCH_PYTHON:-/opt/torch/.venv/bin/python3}"
work=$(mktemp -d /tmp/themis-nomad-gpu-XXXX)
mkdir -p "$work/plugins"
cp "$dir/themis-device" "$dir/themis-driver" "$work/plugins/"
cat >"$work/agent.hcl" <<HCL
data_dir   = "$work/data"
plugin_dir = "$work/plugins"
bind_addr  = "127.0.0.1"
server {
  enabled          = true
  bootstrap_expect = 1
}
client {
  enabled          = true
  max_kill_timeout = "5m"
  options {
    # Cloud fingerprinters hang or fail where AWS_CA_BUNDLE is set.
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}
plugin "themis-device" {
  config {
    backend            = "nvml"
    fingerprint_period = "5s"
  }
}
plugin "themis-driver" {
  config {
    lease_check     = false
    checkpoint_root = "$work/checkpoints"
    # The agent's data dir is private to root here; a real client keeps
    # default_user = "nobody" (examples/agents/nomad-client-gpu.hcl).
    default_user    = "root"
    allow_root_jobs = ["*"]
  }
}
HCL
probe='import glob, os, torch
print("probe: CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""))
for p in sorted(glob.glob("/dev/nvidia*")):
    if os.path.isdir(p):
        continue
    try:
        os.close(os.open(p, os.O_RDWR)); print("probe: open", p, "ok")
    except OSError as e:
        print("probe: open", p, "failed errno", e.errno)
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
if n:
    x = torch.ones(1 << 20, device="cuda").sum().item()
    print("probe: cuda", torch.cuda.get_device_name(0), "sum", x)
print("probe: cuda devices", n)'
job() { # name uuid-or-empty
	local device="" env=""
	if [ -n "$2" ]; then
		device='device "themis/gpu" { count = 1 }'
	else
		env="CUDA_VISIBLE_DEVICES = \"$uuid\""
	fi
	cat >"$work/$1.hcl" <<HCL
job "$1" {
  datacenters = ["*"]
  type        = "batch"
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "probe" {
      driver = "themis"
      config {
        command = "$python"
        args    = ["-c", <<PY
$probe
PY
        ]
        themis {
          gpus = 1
        }
      }
      env {
        HOME = "/tmp"
        $env
      }
      resources {
        cpu    = 1000
        memory = 4096
        $device
      }
    }
  }
}
HCL
}

"$dir/nomad" agent -dev -config="$work/agent.hcl" >"$OUT/nomad-agent.log" 2>&1 &
agent=$!
trap 'kill $agent 2>/dev/null; wait $agent 2>/dev/null' EXIT
export NOMAD_ADDR=http://127.0.0.1:4646
for i in $(seq 60); do
	"$dir/nomad" node status -self -verbose >"$work/node.txt" 2>/dev/null && grep -q 'themis/gpu' "$work/node.txt" && break
	sleep 1
done
echo "--- node after $i s"
grep -iE 'themis|Device Resource|Health' "$work/node.txt" | head -20
uuid=$("$dir/nomad" node status -self -verbose | grep -oE 'GPU-[0-9a-f-]{36}' | head -1)
echo "--- the GPU Nomad sees: $uuid"
for name in given notgiven; do
	if [ $name = given ]; then job $name yes; else job $name ""; fi
	start=$(date +%s.%N)
	"$dir/nomad" job run -detach "$work/$name.hcl"
	for i in $(seq ${JOB_WAIT:-90}); do
		"$dir/nomad" job status -short $name 2>/dev/null | grep -qE '^Status +=.*dead' && break
		sleep 1
	done
	echo "--- job $name dead after $(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "$i") s"
	alloc=$("$dir/nomad" job allocs -t '{{range .}}{{.ID}}{{end}}' $name)
	"$dir/nomad" alloc status "$alloc" | sed -n '/Recent Events/,$p'
	"$dir/nomad" alloc logs "$alloc" probe
	"$dir/nomad" alloc logs -stderr "$alloc" probe | tail -5
done
