#!/usr/bin/env bash
# Build the tools the chart and the monitoring files of deploy/ are checked with, once per
# machine, and print their paths on the last two lines of stdout:
#   helm       Helm v4.3.0's own command (helm.sh/helm/v4/cmd/helm, a `tool` of tests/helm):
#              `helm lint` and `helm template` of deploy/helm/cronsource
#   moncheck   tests/helm/moncheck: the chart's ServiceMonitor and PrometheusRule decoded
#              strictly into the Prometheus Operator's Go types (the test API server has no
#              CRDs for them)
# Both come from the one module tests/helm, so go.sum pins every dependency of both.
#
# Why it is cheap: tests/helm pins every module it shares with the test API server
# (tests/kube/apiserver/go.mod: k8s.io/* v0.37.2, and the rest) to the apiserver's version,
# which is why Helm is v4.3.0 and not a later one (v4.3.1 needs newer golang.org/x modules).
# Go's build cache then reuses packages the apiserver build compiled (tests/e2e/test_helm_chart.py
# checks that the versions still line up). Measured in December 2026 on the 2 shared cores of a
# development machine (load 4 to 7 from other work, so the wall times are high):
#   cold alone (empty Go module and build caches): 146 s wall, 147 CPU-s; 540 MB of modules,
#     780 MB of build cache
#   after the apiserver build (its modules and build cache there, as in CI): 133 s wall,
#     77 CPU-s (the 360 MB of modules Helm adds download in seconds: a go mod download of
#     all 540 MB took 6 s here, so CPU time is the cost)
#   Helm v4.3.2 unpinned, cold alone: 332 s wall (load 3 to 6)
#
# The binaries are cached under
#   ${CRONSOURCE_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/helm}/<hash>/
# where <hash> covers go.mod, go.sum, moncheck's Go files, this script and the Go version.
# A failed build exits non-zero: the tests that need helm then fail, they never skip.
#
# Environment: GO (the go command, default `go`), CRONSOURCE_HELM_CACHE (cache root),
# GOMODCACHE/GOCACHE as usual.
set -euo pipefail
cd "$(dirname "$0")/.."

src=tests/helm
helm_version=v4.3.0
helm_pkg=helm.sh/helm/v4/cmd/helm

# shellcheck source=scripts/lib/go.sh
source scripts/lib/go.sh
require_go build-helm "Helm $helm_version from $src"

hash=$(cat "$src/go.mod" "$src/go.sum" "$src"/moncheck/*.go "$0" <(echo "$go_version") |
    sha256sum | cut -c1-16)
root=${CRONSOURCE_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/helm}
dir=$root/$hash
helm=$dir/helm
moncheck=$dir/moncheck

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # one build at a time; the others wait and reuse it

build() { # build NAME PACKAGE [ldflags]
    local name=$1 pkg=$2 ldflags="-s -w ${3:-}" out=$dir/$1 tmp start
    if [[ -x "$out" ]]; then
        echo "build-helm: reusing $out" >&2
        return
    fi
    echo "build-helm: building $name ($pkg) with $go_version" >&2
    start=$(date +%s)
    tmp=$(mktemp "$dir/$name.XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -f '$tmp'" EXIT
    # The flags of the apiserver build (scripts/build-test-apiserver.sh): the same compile
    # flags are what lets the build cache serve the packages both use.
    (cd "$src" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -buildvcs=false \
        -ldflags "$ldflags" -o "$tmp" "$pkg")
    chmod 755 "$tmp"
    mv -f "$tmp" "$out"
    trap - EXIT
    echo "build-helm: built $name in $(($(date +%s) - start)) s ($(du -h "$out" | cut -f1))" >&2
}
# Helm's Makefile sets its version this way (`helm version`).
build helm "$helm_pkg" "-X helm.sh/helm/v4/internal/version.version=$helm_version"
build moncheck ./moncheck
touch "$dir" # in use: see the pruning below
# Binaries of other source versions go once unused for 14 days.
find "$root" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" -mtime +14 -exec rm -rf {} + || true
echo "$helm"
echo "$moncheck"
