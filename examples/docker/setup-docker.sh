#!/usr/bin/env bash
# Makes sure Debian's docker.io (dockerd 20.10, containerd, runc and the
# docker CLI) is installed, for the dev stack's and the e2e suite's own
# Docker daemon (e2e/devstack/docker.go): installs it with apt-get when it is
# missing and this runs as root; anywhere else it says why the docker tests
# will skip (they fail instead where THEMIS_REQUIRE_DOCKER=1). Nothing is
# started here, and no system Docker is configured or enabled.
# `make test` and `make dev` run it.
set -euo pipefail
if command -v dockerd >/dev/null || [ -x /usr/sbin/dockerd ]; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "setup-docker: no dockerd; installing Debian's docker.io" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2
	apt-get install -y -q --no-install-recommends docker.io >&2
	exit 0
fi
echo "setup-docker: no dockerd, and it cannot be installed here (needs root and apt-get: apt-get install docker.io)" >&2
if [ "${THEMIS_REQUIRE_DOCKER:-}" = 1 ]; then
	exit 1
fi
echo "setup-docker: the docker tests will skip" >&2
