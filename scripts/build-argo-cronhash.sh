#!/usr/bin/env bash
# Build the oracle of hashed `H` schedules (tests/argo/cronhash: Argo PR #16604's own
# util/cronhash, see its NOTICE) once per machine and print the binary's path on the last line
# of stdout. It needs only Go's standard library: no module download, a few seconds cold.
#
# The binary is cached under
#   ${CRONSOURCE_ARGO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/argo}/cronhash-<hash>/
# where <hash> covers the module's files, this script and the Go version. A failed build exits
# non-zero: the differential test then fails, it never skips.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."

src=tests/argo/cronhash

# shellcheck source=scripts/lib/go.sh
source scripts/lib/go.sh
require_go build-argo-cronhash "the oracle in $src"

hash=$(cat "$src/go.mod" "$src"/*.go "$src"/cronhash/*.go "$self" <(echo "$go_version") |
    sha256sum | cut -c1-16)
root=${CRONSOURCE_ARGO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronsource/argo}
dir=$root/cronhash-$hash
out=$dir/cronhash

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # one build at a time; the others wait and reuse it

if [[ -x "$out" ]]; then
    echo "build-argo-cronhash: reusing $out" >&2
else
    echo "build-argo-cronhash: building $src with $go_version" >&2
    tmp=$(mktemp "$dir/cronhash.XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -f '$tmp'" EXIT
    (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOPROXY=off "$GO" build -trimpath \
        -buildvcs=false -o "$tmp" .)
    chmod 755 "$tmp"
    mv -f "$tmp" "$out"
    trap - EXIT
fi
touch "$dir"
# Oracles of other source versions go once unused for 14 days.
find "$root" -mindepth 1 -maxdepth 1 -type d -name 'cronhash-*' ! -name "cronhash-$hash" \
    -mtime +14 -exec rm -rf {} + || true
echo "$out"
