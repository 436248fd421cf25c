# shellcheck shell=bash
# Sourced by the build scripts (scripts/build-*.sh): the Go toolchain they need, checked the
# same way in each.
#
#   require_go NAME WHAT
#
# sets GO (default `go`) and go_version, exports GOTOOLCHAIN=local, and exits 1 with one line
# on stderr, starting with NAME, when Go is missing or older than 1.26 (WHAT says what needs it).

require_go() {
    local name=$1 what=$2
    GO=${GO:-go}
    if ! command -v "$GO" >/dev/null 2>&1; then
        echo "$name: the Go toolchain ('$GO') is not installed or not on PATH;" \
            "it is needed to build $what (Go >= 1.26)" >&2
        exit 1
    fi
    # Never let the go command fetch another toolchain behind our back: a too old Go fails here.
    export GOTOOLCHAIN=local
    go_version=$("$GO" env GOVERSION)
    case "$go_version" in
        go1.2[6-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
        *)
            echo "$name: $go_version is too old, Go >= 1.26 is needed to build $what" >&2
            exit 1
            ;;
    esac
}
