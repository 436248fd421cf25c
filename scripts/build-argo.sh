#!/usr/bin/env bash
# Build Argo Workflows v4.0.5's own code for the differential and interoperability tests, once
# per machine, and print the paths of the binaries on the last three lines of stdout (the last
# two are the oracle and the controller, as `tail -n2` has always taken them):
#   benchclient          tests/argo/oracle/benchclient: a plain client-go client creating
#                        pre-encoded objects, one of bench.argo's `limit` variants
#   oracle               tests/argo/oracle: Argo's lint, `when`/stopStrategy evaluation and
#                        Go types behind a small command line (see its main.go)
#   workflow-controller  Argo's real controller, cmd/workflow-controller of the same module
# All come from the one module tests/argo/oracle (go.mod requires argo-workflows/v4 v4.0.5 and
# declares the controller as a `tool`), so go.sum pins every dependency and the benchclient
# needs no module of its own (client-go is the controller's). Built after the controller, it
# reuses its compiled packages: about 2 s more on a cold build. Argo is a test-only peer:
# nothing here is shipped or deployed.
#
# The binaries are cached under
#   ${CRONSOURCE_ARGO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/argo}/<hash>/
# where <hash> covers go.mod, go.sum, the oracle's and the benchclient's Go files, this script
# and the Go version.
# A failed build exits non-zero: the tests that need Argo then fail, they never skip.
#
# Environment: GO (the go command, default `go`), CRONSOURCE_ARGO_CACHE (cache root),
# GOMODCACHE/GOCACHE as usual.
set -euo pipefail
cd "$(dirname "$0")/.."

src=tests/argo/oracle
argo_version=v4.0.5
controller_pkg=github.com/argoproj/argo-workflows/v4/cmd/workflow-controller

# shellcheck source=scripts/lib/go.sh
source scripts/lib/go.sh
require_go build-argo "Argo $argo_version from $src"

hash=$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go "$src"/benchclient/*.go "$0" <(echo "$go_version") |
    sha256sum | cut -c1-16)
root=${CRONSOURCE_ARGO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/argo}
dir=$root/$hash
oracle=$dir/oracle
controller=$dir/workflow-controller
benchclient=$dir/benchclient

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # one build at a time; the others wait and reuse it

# Argo's link flags (its Makefile) so that the controller reports its version.
ldflags="-s -w -X github.com/argoproj/argo-workflows/v4.version=$argo_version"
build() { # build NAME PACKAGE [extra ldflags]
    local name=$1 pkg=$2 extra=${3:-} out=$dir/$1 tmp start
    if [[ -x "$out" ]]; then
        echo "build-argo: reusing $out" >&2
        return
    fi
    echo "build-argo: building $name ($pkg) with $go_version" >&2
    start=$(date +%s)
    tmp=$(mktemp "$dir/$name.XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -f '$tmp'" EXIT
    (cd "$src" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -buildvcs=false \
        -ldflags "$ldflags $extra" -o "$tmp" "$pkg")
    chmod 755 "$tmp"
    mv -f "$tmp" "$out"
    trap - EXIT
    echo "build-argo: built $name in $(($(date +%s) - start)) s ($(du -h "$out" | cut -f1))" >&2
}
# The oracle calls a few unexported Argo functions through //go:linkname.
build oracle . "-checklinkname=0"
build workflow-controller "$controller_pkg"
build benchclient ./benchclient
touch "$dir" # in use: see the pruning below
# Binaries of other source versions go once unused for 14 days.
find "$root" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" -mtime +14 -exec rm -rf {} + || true
echo "$benchclient"
echo "$oracle"
echo "$controller"
