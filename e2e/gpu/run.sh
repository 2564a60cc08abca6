#!/usr/bin/env bash
# The GPU checks, run from the repo root on a machine with an NVIDIA GPU and
# its driver (as root, no Go needed), with the binaries e2e/gpu/build.sh made
# in DIR (default .gpu). Everything goes under $OUT (default /tmp/themis-gpu):
#
#   run.log           the machine's facts and every test's -v output
#   nvidia-smi-q.txt  nvidia-smi -q
#   gpu-report.md     TestRealGPU: the NVML fingerprint beside nvidia-smi
#   driver-suite.log  the driver's whole test suite on this machine
#   driver-report.md  the driver's CUDA job: preempt/resume, suspend in place, device fence
#   suspend-report.md GPU suspend in place of SUSPEND_GIB GiB (default 8,64)
#   nomad.log         with NOMAD=1 binaries: e2e/gpu/nomad.sh
#
# Each step has its own time limit, so one that hangs does not cost the rest.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
dir="$(cd "${1:-.gpu}" && pwd)"
OUT="${OUT:-/tmp/themis-gpu}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step facts
date -u
uname -a
grep -m1 'model name' /proc/cpuinfo
nproc
free -g
stat -fc 'cgroup fs: %T' /sys/fs/cgroup
cat /sys/fs/cgroup/cgroup.controllers /sys/fs/cgroup/cgroup.subtree_control 2>&1
nvidia-smi
nvidia-smi -q >"$OUT/nvidia-smi-q.txt"
nvidia-smi topo -m
nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id,driver_version,mig.mode.current,persistence_mode,ecc.mode.current --format=csv
ls -l /dev/nvidia* /dev/nvidia-caps 2>&1
command -v cuda-checkpoint || echo "no cuda-checkpoint tool on PATH"
ls /usr/local/nvidia/bin 2>/dev/null
timeout 60 python3 -c 'import torch, sys; print("python", sys.version.split()[0], sys.executable, "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'

step unpack
for f in "$dir"/*.xz; do
	if command -v xz >/dev/null; then xz -dkf "$f"; else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[1][:-3], "wb"))' "$f"; fi
done
chmod +x "$dir"/*.test
for f in nomad themis-device themis-driver; do [ -f "$dir/$f" ] && chmod +x "$dir/$f"; done

step device: NVML fingerprint and the plugin over gRPC
(cd device && THEMIS_GPU_REPORT="$OUT/gpu-report.md" timeout 90 "$dir/device.test" -test.run 'RealGPU|NVMLAbsent' -test.v)
echo "exit $?"

step "driver: the whole suite on this machine (device fence, cgroups), then a CUDA job through the driver"
(cd driver && timeout 150 "$dir/driver.test" -test.skip 'RealGPU' -test.timeout 145s >"$OUT/driver-suite.log" 2>&1)
echo "exit $? (log: driver-suite.log)"
grep -E '^(--- FAIL|--- SKIP|ok|FAIL|PASS)' "$OUT/driver-suite.log"
(cd driver && THEMIS_DRIVER_GPU_REPORT="$OUT/driver-report.md" timeout 200 "$dir/driver.test" -test.run 'RealGPU' -test.v -test.timeout 195s)
echo "exit $?"

step GPU suspend in place
(cd driver/gpususpend && THEMIS_SUSPEND_GIB="${SUSPEND_GIB:-8,64}" THEMIS_SUSPEND_REPORT="$OUT/suspend-report.md" \
	timeout 200 "$dir/gpususpend.test" -test.v -test.timeout 195s)
echo "exit $?"

step themis-device binary: the plugin process with the nvml backend
(cd cmd/themis-device && timeout 60 "$dir/themis-device.test" -test.run 'BinaryNVML' -test.v)
echo "exit $?"

if [ -x "$dir/nomad" ]; then
	step "a real Nomad agent with the plugins: a job given the GPU, a job given none"
	timeout 240 e2e/gpu/nomad.sh "$dir" 2>&1 | tee "$OUT/nomad.log"
	echo "exit $?"
fi

step done
nvidia-smi --query-gpu=memory.used --format=csv
ls -l "$OUT"
