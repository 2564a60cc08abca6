#!/usr/bin/env bash
# Builds an example image locally from examples/docker/<name>/Dockerfile,
# with no registry pull (the bases are `scratch` or made here):
#
#   examples/docker/build.sh hello   [TAG]   examples/hello, a static Go binary (default tag themis-hello:dev)
#   examples/docker/build.sh pytorch [TAG]   examples/pytorch on this machine's Debian python3 and
#                                            python3-torch (default tag themis-pytorch:dev)
#
# The docker CLI talks to $DOCKER_HOST (`themis dev` prints the dev stack's;
# the e2e suite sets it). The pytorch image's root file system is copied
# from this machine: the Python interpreter, its standard library, the
# modules and shared libraries that train.py loads (found by running it
# for a few steps), about 650 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
name="${1:?usage: $0 hello|pytorch [TAG]}"
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
case "$name" in
hello)
	tag="${2:-themis-hello:dev}"
	CGO_ENABLED=0 go build -o "$ctx/hello" ./examples/hello
	;;
pytorch)
	tag="${2:-themis-pytorch:dev}"
	py=/usr/bin/python3
	mkdir -p "$ctx/rootfs/app"
	cp examples/pytorch/themis_ckpt.py examples/pytorch/train.py "$ctx/rootfs/app/"
	# What train.py loads: run it for a few steps and list the modules and
	# shared objects of the process, then the loader and what ldd adds.
	PYTHONDONTWRITEBYTECODE=1 "$py" - "$root/examples/pytorch" >"$ctx/files" <<'PY'
import os, runpy, sys
here = sys.argv[1]
sys.path.insert(0, here)
sys.argv = [os.path.join(here, "train.py"), "--steps", "3", "--log-every", "100"]
out = sys.stdout
sys.stdout = open(os.devnull, "w")
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
import torch.distributed  # noqa: F401  (gloo, for gangs)
files = {sys.executable, os.path.realpath(sys.executable)}
for line in open("/proc/self/maps"):
    p = line.split()[-1]
    if p.startswith("/") and ".so" in p:
        files.add(p)
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f and f.startswith("/usr/") and not f.startswith(here):
        files.add(f)
for f in sorted(files):
    print(f, file=out)
PY
	# Whole packages (data files, lazily imported modules), the standard
	# library and the loader; ldd adds what those libraries need.
	{
		cat "$ctx/files"
		"$py" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])'
		echo /usr/lib/python3/dist-packages/torch
		echo /usr/lib/python3/dist-packages/numpy
		echo /usr/lib/python3/dist-packages/typing_extensions.py
		echo /lib64/ld-linux-x86-64.so.2
		echo /etc/ld.so.cache
		# (ldd fails on the .py files in the list: that is fine)
		{ xargs -a "$ctx/files" ldd 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
	} | sort -u >"$ctx/paths"
	# Copy them to the same places in the image, links as links, and then
	# every link's target, until no link in the image dangles.
	"$py" - "$ctx/rootfs" "$ctx/paths" <<'PY'
import os, shutil, sys
root, paths = sys.argv[1], [p.strip() for p in open(sys.argv[2]) if p.strip()]
def inside(p):
    return os.path.join(root, p.lstrip("/"))
def folder(p):
    # a folder on the way to a file: made, or linked where it is a link
    # (/lib -> usr/lib), never copied whole
    if p == "/" or os.path.lexists(inside(p)):
        return
    folder(os.path.dirname(p))
    if os.path.islink(p):
        os.symlink(os.readlink(p), inside(p))
        folder(os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p))))
    else:
        os.makedirs(inside(p), exist_ok=True)
def copy(p):
    folder(os.path.dirname(p))
    dst = inside(p)
    if os.path.lexists(dst) or not os.path.lexists(p):
        return
    if os.path.islink(p):
        os.symlink(os.readlink(p), dst)
        copy(os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p))))
    elif os.path.isdir(p):
        shutil.copytree(p, dst, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "test", "tests"))
    else:
        shutil.copy2(p, dst)
for p in paths:
    copy(p)
while True:  # links inside copied folders (torch/lib/*.so -> /usr/lib/...)
    dangling = []
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            f = os.path.join(d, n)
            if os.path.islink(f):
                t = os.readlink(f)
                host = os.path.normpath(t if t.startswith("/") else os.path.join("/" + os.path.relpath(d, root), t))
                if not os.path.lexists(inside(host)) and os.path.lexists(host):
                    dangling.append(host)
    if not dangling:
        break
    for h in dangling:
        copy(h)
PY
	mkdir -p "$ctx/rootfs/tmp" && chmod 1777 "$ctx/rootfs/tmp"
	du -sh "$ctx/rootfs" >&2
	;;
*)
	echo "build.sh: no image $name (hello, pytorch)" >&2
	exit 2
	;;
esac
cp "examples/docker/$name/Dockerfile" "$ctx/"
# The legacy builder: it needs no buildx plugin and pulls nothing for FROM scratch.
if ! DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >"$ctx.log" 2>&1; then
	cat "$ctx.log" >&2
	rm -f "$ctx.log"
	exit 1
fi
rm -f "$ctx.log"
echo "$tag"
