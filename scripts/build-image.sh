#!/usr/bin/env bash
# Build the OCI image localhost/cronsource:<version> from Debian packages and the project's
# wheels; the last line printed is the image's name.
#
#   1. rootfs: mmdebstrap --variant=minbase of bookworm with python3, python3-venv and
#      ca-certificates, from this machine's apt sources; cached per machine (keyed by the
#      package list and the sources file), so only the first build pays for it.
#   2. wheels: built on the host (pip wheel of the project and its dependencies; the host's
#      Python must be the image's, 3.11), so the image build itself needs no network.
#   3. base image localhost/cronsource-base:<key>: the rootfs plus a venv with the
#      dependencies (pip install --no-index), rebuilt only when the dependencies change.
#   4. the image: the base plus the project's wheel, a non-root user, `cronsource` as entry
#      point, labels with the version and the source.
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

# ---- 2 and 3. the dependencies, in a base image rebuilt when they (or this script) change
deps_key=$( ("$PY" -c 'import tomllib, json; print(json.dumps(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))'; echo "$rootfs_key"; cat "$0") | sha256sum | cut -c1-16)
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

if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
    log "wheels of the dependencies (pip wheel on the host)"
    "$PY" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$work/wheels" "$work/src" >&2
    rm -f "$work"/wheels/cronsource-*.whl
    ctr=$(buildah from scratch)
    buildah add --quiet "$ctr" "$rootfs" / >/dev/null
    buildah add --quiet "$ctr" "$work/wheels" /tmp/wheels >/dev/null
    log "venv with the dependencies (pip install --no-index)"
    buildah run --isolation chroot "$ctr" -- sh -ec '
        python3 -m venv /opt/cronsource
        /opt/cronsource/bin/pip install --quiet --no-index --no-cache-dir \
            --disable-pip-version-check /tmp/wheels/*.whl
        rm -rf /tmp/wheels
        /opt/cronsource/bin/pip uninstall --quiet --yes setuptools
        groupadd --gid 10001 cronsource
        useradd --uid 10001 --gid 10001 --home-dir /var/lib/cronsource --create-home \
            --shell /usr/sbin/nologin cronsource
    ' >&2
    buildah commit --quiet --rm "$ctr" "$base" >/dev/null
    ctr=""
    # Older bases are not used again: drop them (the current one stays for warm builds).
    buildah images --format '{{.Name}}:{{.Tag}}' | grep -F localhost/cronsource-base: \
        | grep -vF "$base" | xargs -r buildah rmi >/dev/null 2>&1 || true
fi

# ---- 4. the project's wheel on top
log "the project's wheel"
"$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$work/app" "$work/src" >&2
ctr=$(buildah from --pull-never "$base")
buildah add --quiet "$ctr" "$work/app" /tmp/app >/dev/null
buildah run --isolation chroot "$ctr" -- sh -ec '
    /opt/cronsource/bin/pip install --quiet --no-index --no-cache-dir --no-deps \
        --disable-pip-version-check /tmp/app/*.whl
    /opt/cronsource/bin/pip uninstall --quiet --yes pip
    rm -rf /tmp/app
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
