#!/usr/bin/env bash
# Build the OCI image localhost/cronsource:<version> from Debian packages and the project's
# wheels; the last line printed is the image's name.
#
#   1. rootfs: mmdebstrap --variant=minbase of bookworm with python3, python3-venv and
#      ca-certificates, from this machine's apt sources; cached per machine (keyed by the
#      package list and the sources file), so only the first build pays for it. It is the
#      build environment only: it never ships.
#   2. wheels: built on the host (pip wheel of the project and its dependencies; the host's
#      Python must be the image's, 3.11), so the image build itself needs no network. The
#      builder localhost/cronsource-builder:<key>: the rootfs plus a venv with the dependencies
#      (pip install --no-index), rebuilt only when the dependencies change.
#   3. base image localhost/cronsource-base:<key>, from scratch: only the files of the Debian
#      packages the interpreter and the wheels load (RUNTIME_PACKAGES), the venv without pip,
#      the CA bundle, a passwd for the user. No shell, no apt/dpkg, no perl (issue 25: the
#      image went from 393 MB to about a quarter of it; docs/operations.md).
#   4. the image: the base plus the project's installed files, a non-root user, `cronsource`
#      as entry point, labels with the version and the source; its imports are tried in it.
# Runs as root (buildah's storage is the one podman reads). Needs mmdebstrap and buildah:
# scripts/test.sh installs them. Run the result with
#   podman run --rm --runtime runc --ulimit nofile=20000:20000 --ulimit nproc=32768:32768 IMAGE
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
SUITE=bookworm
IMAGE_PYTHON=3.11 # bookworm's python3
PACKAGES=python3,python3-venv,ca-certificates
CACHE=${CRONSOURCE_IMAGE_CACHE:-$HOME/.cache/cronsource/image}
SOURCE_URL=${CRONSOURCE_SOURCE_URL:-https://github.com/cronsource/cronsource}
UID_GID=10001:10001

log() { echo "build-image: $*" >&2; }

for tool in mmdebstrap buildah; do
    command -v "$tool" >/dev/null || { log "$tool is not installed (apt-get install $tool)"; exit 1; }
done
host_python=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [[ "$host_python" != "$IMAGE_PYTHON" ]]; then
    log "the host's $PY is $host_python; the wheels must be built by Python $IMAGE_PYTHON"
    exit 1
fi
version=$("$PY" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
image=localhost/cronsource:$version

sources=${CRONSOURCE_APT_SOURCES:-}
if [[ -z "$sources" ]]; then
    for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
        if [[ -f "$f" ]] && grep -qE '^[^#]*\bbookworm\b' "$f" && grep -q debian "$f"; then
            sources=$f
            break
        fi
    done
fi
[[ -n "$sources" ]] || { log "no apt sources file for $SUITE (set CRONSOURCE_APT_SOURCES)"; exit 1; }

mkdir -p "$CACHE"
started=$SECONDS

# ---- 1. the Debian root filesystem, once per machine
rootfs_key=$(printf '%s\n' "$SUITE" "$PACKAGES" minbase | cat - "$sources" | sha256sum | cut -c1-16)
rootfs=$CACHE/rootfs-$rootfs_key.tar
if [[ ! -s "$rootfs" ]]; then
    log "mmdebstrap $SUITE ($PACKAGES) from $sources"
    mmdebstrap --quiet --variant=minbase --include="$PACKAGES" \
        --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
        --customize-hook='rm -rf "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/usr/share/locale/*' \
        "$SUITE" "$CACHE/partial-$rootfs_key.tar" "$sources" >&2
    mv "$CACHE/partial-$rootfs_key.tar" "$rootfs"
fi

# ---- 2. the builder: the rootfs plus a venv with the dependencies (and pip), rebuilt only when
#         the dependencies (or this script) change. It never ships: step 3 copies out of it.
deps_key=$( ("$PY" -c 'import tomllib, json; print(json.dumps(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))'; echo "$rootfs_key"; cat "$0") | sha256sum | cut -c1-16)
builder=localhost/cronsource-builder:$deps_key
base=localhost/cronsource-base:$deps_key
work=$(mktemp -d)
ctr=""
cleanup() {
    [[ -n "$ctr" ]] && buildah rm "$ctr" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
# The wheels are built from a copy of the tree, so that setuptools' build/ in the tree (stale
# modules included) never reaches the image.
mkdir "$work/src"
tar --exclude=./.venv --exclude=./.git --exclude=./build --exclude='*.egg-info' \
    --exclude=__pycache__ --exclude='./.*cache' --exclude=./workflows --exclude='./cronsource.db*' \
    -cf - . | tar -xf - -C "$work/src"

if ! buildah inspect --type image "$builder" >/dev/null 2>&1; then
    log "wheels of the dependencies (pip wheel on the host)"
    "$PY" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$work/wheels" "$work/src" >&2
    rm -f "$work"/wheels/cronsource-*.whl
    ctr=$(buildah from scratch)
    buildah add --quiet "$ctr" "$rootfs" / >/dev/null
    buildah add --quiet "$ctr" "$work/wheels" /tmp/wheels >/dev/null
    log "venv with the dependencies (pip install --no-index)"
    # python3.11, not python3: the venv's interpreter link must name a file the runtime has
    # (python3-minimal's /usr/bin/python3 link is not among RUNTIME_PACKAGES).
    buildah run --isolation chroot "$ctr" -- sh -ec '
        python3.11 -m venv /opt/cronsource
        /opt/cronsource/bin/pip install --quiet --no-index --no-cache-dir \
            --disable-pip-version-check /tmp/wheels/*.whl
        rm -rf /tmp/wheels
    ' >&2
    buildah commit --quiet --rm "$ctr" "$builder" >/dev/null
    ctr=""
fi

# ---- 3. the base image: no Debian rootfs, only what the runtime loads (distroless-like). From
#         the builder: the files of RUNTIME_PACKAGES (the interpreter, its standard library and
#         the shared libraries it and the wheels link against: `ldd` over every .so), the venv
#         without pip and setuptools, the CA bundle; then passwd/group for the user, /tmp, HOME.
#         No shell, no package manager, no perl, no coreutils in the image.
RUNTIME_PACKAGES="libc6 libgcc-s1 libstdc++6 zlib1g libbz2-1.0 liblzma5 libexpat1 libffi8
    libsqlite3-0 libssl3 libuuid1 libcrypt1 python3.11-minimal libpython3.11-minimal
    libpython3.11-stdlib media-types"
if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
    log "base: the runtime's files out of the builder"
    ctr=$(buildah from --pull-never "$builder")
    buildah run --isolation chroot "$ctr" -- sh -ec '
        /opt/cronsource/bin/pip uninstall --quiet --yes --disable-pip-version-check setuptools pip
        # The standard library compiled once here: the image is read-only at run time.
        python3.11 -m compileall -q -j0 /usr/lib/python3.11 >/dev/null || true
    ' >&2
    # Paths as dpkg lists them go through the /lib -> usr/lib links of the merged /usr; each
    # is written under its real directory, and the links themselves are kept.
    buildah run --isolation chroot "$ctr" -- python3.11 -c '
import os, subprocess, sys
skip = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/lintian/", "/usr/share/locale/",
        "/usr/share/info/", "/usr/lib/x86_64-linux-gnu/gconv/", "/usr/lib/python3.11/test/",
        "/usr/lib/python3.11/lib2to3/", "/usr/lib/python3.11/pydoc_data/",
        "/usr/lib/python3.11/ensurepip/", "/usr/lib/python3.11/idlelib/",
        "/usr/lib/python3.11/tkinter/", "/usr/lib/python3.11/turtledemo/")
out = set()
for pkg in sys.argv[1:]:
    listed = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True, check=True)
    for f in listed.stdout.splitlines():
        if not os.path.lexists(f) or (os.path.isdir(f) and not os.path.islink(f)):
            continue
        real = os.path.join(os.path.realpath(os.path.dirname(f)), os.path.basename(f))
        if not real.startswith(skip):
            out.add(real)
            if real.endswith(".py"):  # its bytecode, compiled above
                d, name = os.path.split(real)
                cache = os.path.join(d, "__pycache__", name[:-3] + ".cpython-311.pyc")
                if os.path.exists(cache):
                    out.add(cache)
for link in ("/bin", "/sbin", "/lib", "/lib64"):
    if os.path.lexists(link):
        out.add(link)
out.add("/etc/ssl/certs/ca-certificates.crt")
print("\n".join(sorted(p.lstrip("/") for p in out)))
' $RUNTIME_PACKAGES >"$work/runtime.list"
    mnt=$(buildah mount "$ctr")
    # C.utf8: the locale Python coerces the C locale to (libc-bin's, as in Debian).
    tar -C "$mnt" -cf "$work/runtime.tar" --no-recursion -T "$work/runtime.list" \
        --recursion usr/lib/locale/C.utf8 opt/cronsource
    buildah umount "$ctr" >/dev/null
    buildah rm "$ctr" >/dev/null
    ctr=""
    # The rest of the file system: the user, /tmp, HOME, Debian's links to the CA bundle.
    extra=$work/extra
    mkdir -p "$extra/etc/ssl/certs" "$extra/tmp" "$extra/var/lib/cronsource" "$extra/usr/lib/ssl" \
        "$extra/usr/bin"
    printf 'root:x:0:0:root:/root:/usr/sbin/nologin\ncronsource:x:10001:10001::/var/lib/cronsource:/usr/sbin/nologin\n' \
        >"$extra/etc/passwd"
    printf 'root:x:0:\ncronsource:x:10001:\n' >"$extra/etc/group"
    ln -s /etc/ssl/certs/ca-certificates.crt "$extra/usr/lib/ssl/cert.pem"
    ln -s /etc/ssl/certs "$extra/usr/lib/ssl/certs"
    ln -s python3.11 "$extra/usr/bin/python3"
    chmod 1777 "$extra/tmp"
    chown 10001:10001 "$extra/var/lib/cronsource"
    tar -C "$extra" -cf "$work/extra.tar" .
    ctr=$(buildah from scratch)
    buildah add --quiet "$ctr" "$work/runtime.tar" / >/dev/null
    buildah add --quiet "$ctr" "$work/extra.tar" / >/dev/null
    buildah commit --quiet --rm "$ctr" "$base" >/dev/null
    ctr=""
    # Older builders and bases are not used again: drop them (the current ones stay for warm
    # builds).
    buildah images --format '{{.Name}}:{{.Tag}}' \
        | grep -E '^localhost/cronsource-(base|builder):' | grep -vF -e "$base" -e "$builder" \
        | xargs -r buildah rmi >/dev/null 2>&1 || true
fi

# ---- 4. the project's wheel on top: installed in a builder, and its files (as pip recorded
#         them, bytecode included) copied onto the base as one layer.
log "the project's wheel"
"$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$work/app" "$work/src" >&2
ctr=$(buildah from --pull-never "$builder")
buildah add --quiet "$ctr" "$work/app" /tmp/app >/dev/null
buildah run --isolation chroot "$ctr" -- sh -ec '
    /opt/cronsource/bin/pip install --quiet --no-index --no-cache-dir --no-deps \
        --disable-pip-version-check /tmp/app/*.whl
' >&2
buildah run --isolation chroot "$ctr" -- /opt/cronsource/bin/python -c '
import importlib.metadata as md, os
d = md.distribution("cronsource")
for f in d.files:
    p = os.path.normpath(os.path.join(str(d.locate_file("")), str(f)))
    if os.path.exists(p):
        print(p.lstrip("/"))
' >"$work/app.list"
mnt=$(buildah mount "$ctr")
tar -C "$mnt" -cf "$work/app.tar" --no-recursion -T "$work/app.list"
buildah umount "$ctr" >/dev/null
buildah rm "$ctr" >/dev/null
ctr=$(buildah from --pull-never "$base")
buildah add --quiet "$ctr" "$work/app.tar" / >/dev/null
# Everything the runtime imports loads in the image itself (a missing shared library or
# module fails the build here, not in a cluster).
buildah run --isolation chroot "$ctr" -- /opt/cronsource/bin/python -c '
import ssl, sqlite3, decimal, zoneinfo, uuid, ctypes, lzma, bz2, zlib, json, asyncio
import psycopg, re2, pydantic_core, yaml, httpx, httpx2, lightkube, aiohttp_socks, uvicorn, fastapi
from cronsource.adapters.entrypoints.cli import main
from cronsource.adapters.entrypoints.http.app import create_app
from cronsource.adapters.infrastructure.kube import connect
psycopg.pq.version()
ssl.create_default_context().load_verify_locations("/etc/ssl/certs/ca-certificates.crt")
zoneinfo.ZoneInfo("Europe/Paris")
' >&2
# Read-only root friendly: no bytecode written at run time (pip compiled it at install), the
# working directory and HOME are the user's own; deploy/ mounts an emptyDir on /tmp.
buildah config \
    --user "$UID_GID" \
    --workingdir /var/lib/cronsource \
    --env PATH=/opt/cronsource/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env HOME=/var/lib/cronsource \
    --env PYTHONDONTWRITEBYTECODE=1 \
    --env PYTHONUNBUFFERED=1 \
    --entrypoint '["/opt/cronsource/bin/cronsource"]' \
    --cmd '["--help"]' \
    --port 9090 \
    --label org.opencontainers.image.title=cronsource \
    --label org.opencontainers.image.description="Event-sourced scheduler for Argo CronWorkflows" \
    --label org.opencontainers.image.version="$version" \
    --label org.opencontainers.image.revision="$revision" \
    --label org.opencontainers.image.source="$SOURCE_URL" \
    "$ctr"
buildah commit --quiet --rm "$ctr" "$image" >/dev/null
ctr=""
log "built $image in $((SECONDS - started))s"
echo "$image"
