#!/usr/bin/env bash
# Makes sure $PYTHON (default /usr/bin/python3, Debian's Python 3.11) imports
# torch: Debian's python3-torch (1.13, CPU; it brings libgloo0, so gloo
# process groups work). Installs it with apt-get when it is missing and this
# runs as root (CI, the dev machines); anywhere else it says why the PyTorch
# tests will skip (they fail instead where THEMIS_REQUIRE_TORCH=1).
# `make test` and `make dev` run it.
set -euo pipefail
py="${PYTHON:-/usr/bin/python3}"
if "$py" -c 'import torch' 2>/dev/null; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "setup-torch: $py has no torch; installing Debian's python3-torch (CPU)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2
	apt-get install -y -q --no-install-recommends python3-torch >&2
	if "$py" -c 'import torch' 2>/dev/null; then
		exit 0
	fi
	echo "setup-torch: python3-torch is installed but $py still cannot import torch" >&2
else
	echo "setup-torch: $py cannot import torch and it cannot be installed here (needs root and apt-get: apt-get install python3-torch)" >&2
fi
if [ "${THEMIS_REQUIRE_TORCH:-}" = 1 ]; then
	exit 1
fi
echo "setup-torch: the PyTorch tests will skip" >&2
