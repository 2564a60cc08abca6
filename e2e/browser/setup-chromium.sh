#!/usr/bin/env bash
# Makes sure Debian's chromium is installed, for the tests that look at a
# page in a headless browser (the planner's dashboard, a lease key in
# Consul's UI; e2e/browser): installs it with apt-get when it is missing
# and this runs as root; anywhere else it says why those tests will skip
# (they fail instead where THEMIS_REQUIRE_BROWSER=1, as in CI).
# `make test` and .ci/run run it.
set -euo pipefail
for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null; then
		exit 0
	fi
done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "setup-chromium: no chromium; installing Debian's chromium" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2
	apt-get install -y -q --no-install-recommends chromium >&2
	exit 0
fi
echo "setup-chromium: no chromium, and it cannot be installed here (needs root and apt-get: apt-get install chromium)" >&2
if [ "${THEMIS_REQUIRE_BROWSER:-}" = 1 ]; then
	exit 1
fi
echo "setup-chromium: the browser tests will skip" >&2
