#!/usr/bin/env bash
# Build the test Kubernetes API server (tests/kube/apiserver: the full kube-apiserver of
# Kubernetes v1.37.2, built from the k8s.io/kubernetes Go module, with an embedded etcd) once per
# machine, and print the path of the binary on the last line of stdout.
#
# The binary is cached under
#   ${CRONSOURCE_TEST_APISERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/test-apiserver}/<hash>/apiserver
# where <hash> covers go.mod, go.sum, main.go, this script and the Go version, so a change to
# any of them builds a new one and an unchanged tree reuses it (also from another clone on the
# same machine, as CI's is). A cold build (empty Go module and build caches) downloads about
# 150 modules (560 MB) from the Go module proxy and compiles for about 10 minutes on 2 cores
# (595 s measured in November 2026, leaving 2.8 GB in GOCACHE); with the module cache filled and
# an empty build cache, about 3 minutes; a change of main.go alone, well under a minute.
#
# Environment: GO (the go command, default `go`), CRONSOURCE_TEST_APISERVER_CACHE (cache root),
# GOMODCACHE/GOCACHE as usual.
set -euo pipefail
cd "$(dirname "$0")/.."

src=tests/kube/apiserver
# Kubernetes version the Go modules are (k8s.io/* v0.37.2 = Kubernetes v1.37.2); reported by
# the server's /version so that kubectl does not warn about an unknown version.
kube_version=v1.37.2

# shellcheck source=scripts/lib/go.sh
source scripts/lib/go.sh
require_go build-test-apiserver "the test API server from $src"

hash=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" "$0" <(echo "$go_version") |
    sha256sum | cut -c1-16)
root=${CRONSOURCE_TEST_APISERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/test-apiserver}
dir=$root/$hash
bin=$dir/apiserver

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # one build at a time; the others wait and reuse it

if [[ -x "$bin" ]]; then
    touch "$dir" # in use: see the pruning below
    echo "build-test-apiserver: reusing $bin" >&2
    echo "$bin"
    exit 0
fi

echo "build-test-apiserver: building $src with $go_version into $bin (a cold build takes about 10 minutes)" >&2
start=$(date +%s)
tmp=$(mktemp "$dir/apiserver.XXXXXX")
trap 'rm -f "$tmp"' EXIT
ldflags="-s -w"
ldflags+=" -X k8s.io/component-base/version.gitVersion=$kube_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=37"
(cd "$src" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -buildvcs=false \
    -ldflags "$ldflags" -o "$tmp" .)
chmod 755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT
echo "build-test-apiserver: built in $(($(date +%s) - start)) s ($(du -h "$bin" | cut -f1))" >&2
# Binaries of other source versions (about 120 MB each) go once unused for 14 days.
find "$root" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" -mtime +14 -exec rm -rf {} + || true
echo "$bin"
