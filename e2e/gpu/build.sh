#!/usr/bin/env bash
# Builds, here (Go, cgo on, Linux amd64), the test binaries that the GPU
# checks run on a machine with an NVIDIA GPU and no Go toolchain, into DIR
# (default .gpu at the repo root, which .git/info/exclude should ignore),
# stripped and xz-compressed so they travel within 64 MiB:
#
#   e2e/gpu/build.sh [DIR]     then, on the GPU machine:   e2e/gpu/run.sh [DIR]
#
# docs/nvml.md, "On a real GPU", says what they check.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-.gpu}"
mkdir -p "$dir"
build() { # package name
	CGO_ENABLED=1 GOOS=linux GOARCH=amd64 go test -c -ldflags='-s -w' -o "$dir/$2" "$1"
	xz -T0 -6 -f "$dir/$2"
}
build ./device/ device.test
build ./cmd/themis-device/ themis-device.test
build ./driver/ driver.test
build ./driver/gpususpend/ gpususpend.test
# With NOMAD=1, also a Nomad agent and the two plugins, for e2e/gpu/nomad.sh
# (about 38 MB more, compressed).
if [ "${NOMAD:-0}" = 1 ]; then
	for p in themis-device themis-driver; do
		CGO_ENABLED=1 go build -ldflags='-s -w' -o "$dir/$p" ./cmd/$p
		xz -T0 -6 -f "$dir/$p"
	done
	strip -o "$dir/nomad" "$(e2e/agents/build.sh nomad)/nomad"
	xz -T0 -6 -f "$dir/nomad"
fi
ls -l "$dir"
