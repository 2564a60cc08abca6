#!/usr/bin/env bash
# Builds the pinned Nomad and Consul agents from the Go module proxy into a cache
# directory and prints the directory. A build is skipped when the cached binary
# already reports the pinned version, so a warm call takes well under a second.
#
#   e2e/agents/build.sh            build both (if needed), print the bin directory
#   e2e/agents/build.sh nomad      only Nomad
#   e2e/agents/build.sh consul     only Consul
#
# Environment:
#   THEMIS_AGENTS_DIR   where binaries go (default: ${XDG_CACHE_HOME:-$HOME/.cache}/themis-nomad/agents)
#   NOMAD_VERSION / CONSUL_VERSION / NOMAD_API_VERSION   override the pins (not recommended)
#
# Why a wrapper module: both projects' go.mod files carry replace directives, so
# `go install pkg@version` refuses them. We copy Nomad's own requirements (and its
# hcl replace) into a throw-away module and build the main package from there; for
# Consul we copy its exclude block and let `go get` resolve its submodules.
set -euo pipefail

NOMAD_VERSION="${NOMAD_VERSION:-1.11.3}"
# The api module at the exact v1.11.3 commit is not served by the proxy; this
# pseudo-version is the nearest one that is, and builds cleanly with v1.11.3.
NOMAD_API_VERSION="${NOMAD_API_VERSION:-v0.0.0-20260907080526-08ef8f3d26da}"
CONSUL_VERSION="${CONSUL_VERSION:-1.22.0}"
DIR="${THEMIS_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/themis-nomad/agents}"

log() { printf 'build-agents: %s\n' "$*" >&2; }

have_version() { # binary want
	# No pipe into head here: with pipefail, the binary's SIGPIPE after head
	# exits would fail the check at random.
	local out first
	[ -x "$1" ] && out="$("$1" version 2>/dev/null)" || return 1
	first="${out%%$'\n'*}"
	[[ "$first " == *"v$2 "* ]]
}

# gomod_of module@version: the path of that version's go.mod in the module
# cache, downloading it if needed.
gomod_of() {
	local f
	f="$(go mod download -json "$1" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
	[ -f "$f" ] || { log "cannot download the go.mod of $1"; exit 1; }
	echo "$f"
}

# up_to_date binary version recipe: the binary reports the version and was
# built with the same recipe (pins and build tags), recorded beside it.
up_to_date() {
	have_version "$1" "$2" && [ "$(cat "$1.recipe" 2>/dev/null)" = "$3" ]
}

build_nomad() {
	local out="$DIR/nomad"
	# The ui tag embeds the web UI that Nomad's module ships pre-built.
	local recipe="nomad v$NOMAD_VERSION api $NOMAD_API_VERSION tags ui"
	if up_to_date "$out" "$NOMAD_VERSION" "$recipe"; then
		log "nomad v$NOMAD_VERSION cached at $out"
		return
	fi
	log "building nomad v$NOMAD_VERSION (cold: 10-18 min on 2 cores)"
	local work
	work="$(mktemp -d)"
	trap 'rm -rf "$work"' RETURN
	local modfile
	modfile="$(gomod_of "github.com/hashicorp/nomad@v$NOMAD_VERSION")"
	{
		echo "module themis.local/nomad-agent"
		sed -e '1d' \
			-e '/^replace github.com\/hashicorp\/nomad\/api => /d' \
			-e "s#^\(\s*github.com/hashicorp/nomad/api\) v.*#\1 $NOMAD_API_VERSION#" \
			"$modfile"
		echo "require github.com/hashicorp/nomad v$NOMAD_VERSION"
	} >"$work/go.mod"
	cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "github.com/hashicorp/nomad"
GO
	mkdir -p "$DIR"
	(cd "$work" && GOFLAGS=-mod=mod go build -trimpath -tags ui -o "$out.tmp" \
		-ldflags "-X github.com/hashicorp/nomad/version.GitCommit=v$NOMAD_VERSION" \
		github.com/hashicorp/nomad)
	mv "$out.tmp" "$out"
	have_version "$out" "$NOMAD_VERSION" || { log "built nomad does not report v$NOMAD_VERSION"; exit 1; }
	echo "$recipe" >"$out.recipe"
	log "nomad v$NOMAD_VERSION -> $out"
}

build_consul() {
	local out="$DIR/consul"
	local recipe="consul v$CONSUL_VERSION"
	if up_to_date "$out" "$CONSUL_VERSION" "$recipe"; then
		log "consul v$CONSUL_VERSION cached at $out"
		return
	fi
	log "building consul v$CONSUL_VERSION (cold: 10-18 min on 2 cores)"
	local work
	work="$(mktemp -d)"
	trap 'rm -rf "$work"' RETURN
	local modfile
	modfile="$(gomod_of "github.com/hashicorp/consul@v$CONSUL_VERSION")"
	{
		echo "module themis.local/consul-agent"
		echo
		echo "go $(sed -n 's/^go \(.*\)/\1/p' "$modfile")"
		echo
		# Consul's exclude block keeps broken versions of its dependencies out.
		awk '/^exclude \(/{p=1} p{print} p&&/^\)/{p=0}' "$modfile"
	} >"$work/go.mod"
	cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "github.com/hashicorp/consul"
GO
	mkdir -p "$DIR"
	# The checksum database has no entries for these three submodules.
	export GONOSUMDB="${GONOSUMDB:+$GONOSUMDB,}github.com/hashicorp/consul/proto-public,github.com/hashicorp/consul/envoyextensions,github.com/hashicorp/consul/troubleshoot"
	(cd "$work" && go get "github.com/hashicorp/consul@v$CONSUL_VERSION" &&
		GOFLAGS=-mod=mod go build -trimpath -o "$out.tmp" \
			-ldflags "-X github.com/hashicorp/consul/version.GitCommit=v$CONSUL_VERSION" \
			github.com/hashicorp/consul)
	mv "$out.tmp" "$out"
	have_version "$out" "$CONSUL_VERSION" || { log "built consul does not report v$CONSUL_VERSION"; exit 1; }
	echo "$recipe" >"$out.recipe"
	log "consul v$CONSUL_VERSION -> $out"
}

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }
case "${1:-all}" in
nomad) build_nomad ;;
consul) build_consul ;;
all) build_nomad; build_consul ;;
*) log "usage: $0 [nomad|consul|all]"; exit 2 ;;
esac
echo "$DIR"
