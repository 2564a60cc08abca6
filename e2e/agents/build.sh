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
#   THEMIS_AGENTS_DIR   where binaries go (default: ${XDG_CACHE_HOME:-$HOME/.cache}/themis-nomad/agents,
#                       or .../agents-nomad-<version> for a Nomad other than the pin)
#   NOMAD_VERSION / CONSUL_VERSION / NOMAD_API_VERSION   override the pins (not recommended)
#   NOMAD_VERSION=2.0.5 (any 2.x): the module proxy serves no Nomad 2.x module
#       (its module path has no /v2), so Nomad is built from a source tree of
#       the public repository at tag v<version>, in THEMIS_NOMAD_SRC (default:
#       ${XDG_CACHE_HOME:-$HOME/.cache}/themis-nomad/src/nomad-v<version>);
#       the script fails naming that folder when it is absent. Its
#       dependencies come from the module proxy. `make test-nomad2` uses it.
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
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/themis-nomad"
PINNED_DIR="$CACHE/agents"
if [ "$NOMAD_VERSION" = "1.11.3" ]; then
	DIR="${THEMIS_AGENTS_DIR:-$PINNED_DIR}"
else
	DIR="${THEMIS_AGENTS_DIR:-$CACHE/agents-nomad-$NOMAD_VERSION}"
fi
NOMAD_SRC="${THEMIS_NOMAD_SRC:-$CACHE/src/nomad-v$NOMAD_VERSION}"

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

# build_nomad_source builds Nomad from a source tree (2.x). A tree taken from
# a partial clone may lack nomad/structs/structs.generated.go (a generated
# file of several MB): it is generated here with the codecgen that Nomad's
# own GNUmakefile names, as `make generate-structs` would.
build_nomad_source() {
	local out="$DIR/nomad"
	# The tags Nomad's own GNUmakefile builds with in its CI, less ui.
	local tags="hashicorpmetrics codegen_generated"
	local recipe="nomad v$NOMAD_VERSION source tags $tags"
	if up_to_date "$out" "$NOMAD_VERSION" "$recipe"; then
		log "nomad v$NOMAD_VERSION cached at $out"
		return
	fi
	if [ ! -f "$NOMAD_SRC/go.mod" ] || ! grep -q "Version = \"$NOMAD_VERSION\"" "$NOMAD_SRC/version/version.go" 2>/dev/null; then
		log "no Nomad v$NOMAD_VERSION source tree at $NOMAD_SRC"
		log "the module proxy serves no Nomad 2.x; put the public repository's tag v$NOMAD_VERSION there, e.g."
		log "  git clone --branch v$NOMAD_VERSION --depth 1 https://github.com/hashicorp/nomad \"$NOMAD_SRC\""
		log "(or set THEMIS_NOMAD_SRC to such a tree)"
		exit 1
	fi
	log "building nomad v$NOMAD_VERSION from $NOMAD_SRC (cold: 10-18 min on 2 cores)"
	if [ ! -f "$NOMAD_SRC/nomad/structs/structs.generated.go" ]; then
		local codecgen
		codecgen="$(grep -m 1 -o 'github.com/hashicorp/go-msgpack/v2/codec/codecgen@v[0-9.]*' "$NOMAD_SRC/GNUmakefile" || true)"
		[ -n "$codecgen" ] || { log "cannot find codecgen's version in $NOMAD_SRC/GNUmakefile"; exit 1; }
		log "generating nomad/structs/structs.generated.go with $codecgen"
		local bin
		bin="$(mktemp -d)"
		GOBIN="$bin" go install "$codecgen"
		(cd "$NOMAD_SRC/nomad/structs" && GOFLAGS=-mod=mod PATH="$bin:$PATH" ./generate.sh)
		rm -rf "$bin"
	fi
	mkdir -p "$DIR"
	# No ui tag: the web UI's assets are not in the repository's tree.
	(cd "$NOMAD_SRC" && GOFLAGS=-mod=mod go build -trimpath -tags "$tags" -o "$out.tmp" \
		-ldflags "-X github.com/hashicorp/nomad/version.GitCommit=v$NOMAD_VERSION" .)
	mv "$out.tmp" "$out"
	have_version "$out" "$NOMAD_VERSION" || { log "built nomad does not report v$NOMAD_VERSION"; exit 1; }
	echo "$recipe" >"$out.recipe"
	log "nomad v$NOMAD_VERSION -> $out"
}

build_nomad() {
	case "$NOMAD_VERSION" in
	2.*) build_nomad_source; return ;;
	esac
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
	# Another Nomad's folder reuses the pinned folder's Consul when it is the same build.
	if [ "$DIR" != "$PINNED_DIR" ] && up_to_date "$PINNED_DIR/consul" "$CONSUL_VERSION" "$recipe"; then
		mkdir -p "$DIR"
		cp "$PINNED_DIR/consul" "$out.tmp" && mv "$out.tmp" "$out"
		echo "$recipe" >"$out.recipe"
		log "consul v$CONSUL_VERSION copied from $PINNED_DIR"
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
