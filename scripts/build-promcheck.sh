#!/usr/bin/env bash
# Build tests/promql (promcheck: Prometheus's rule file validation and PromQL parser, see its
# main.go) once per machine, and print the path of the binary on the last line of stdout.
#
# Why not promtool itself: cmd/promtool imports every service discovery of Prometheus (AWS,
# Azure, GCE, Kubernetes, ...); cold, it downloads about 1.8 GB of modules and compiles for
# about 10 CPU-minutes (measured cold: 1078 s wall at load 6 to 10, 600 CPU-s), which the CI
# budget (45 minutes for a cold run) cannot take.
# `promtool check rules` is model/rulefmt plus a lint of duplicate rules: promcheck runs the
# same model/rulefmt (and promql/parser) of the same Prometheus release, v3's module
# github.com/prometheus/prometheus v0.316.0, and the same lint. Cold: about 160 MB of
# modules and under a minute (measured cold: 56 s wall, 45 CPU-s).
#
# The binary is cached under
#   ${CRONSOURCE_PROMCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/promcheck}/<hash>/
# where <hash> covers go.mod, go.sum, main.go, this script and the Go version. A failed build
# exits non-zero: the tests that need it then fail, they never skip.
#
# Environment: GO (the go command, default `go`), CRONSOURCE_PROMCHECK_CACHE (cache root),
# GOMODCACHE/GOCACHE as usual.
set -euo pipefail
cd "$(dirname "$0")/.."

src=tests/promql

# shellcheck source=scripts/lib/go.sh
source scripts/lib/go.sh
require_go build-promcheck "promcheck from $src"

hash=$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go "$0" <(echo "$go_version") |
    sha256sum | cut -c1-16)
root=${CRONSOURCE_PROMCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/promcheck}
dir=$root/$hash
bin=$dir/promcheck

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # one build at a time; the others wait and reuse it

if [[ -x "$bin" ]]; then
    touch "$dir" # in use: see the pruning below
    echo "build-promcheck: reusing $bin" >&2
    echo "$bin"
    exit 0
fi

echo "build-promcheck: building $src with $go_version into $bin" >&2
start=$(date +%s)
tmp=$(mktemp "$dir/promcheck.XXXXXX")
trap 'rm -f "$tmp"' EXIT
(cd "$src" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -buildvcs=false \
    -ldflags "-s -w" -o "$tmp" .)
chmod 755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT
echo "build-promcheck: built in $(($(date +%s) - start)) s ($(du -h "$bin" | cut -f1))" >&2
find "$root" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" -mtime +14 -exec rm -rf {} + || true
echo "$bin"
