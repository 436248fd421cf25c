#!/usr/bin/env bash
# Make sure the PostgreSQL server binaries (initdb, pg_ctl, postgres) are
# installed, installing the Debian package "postgresql" if they are not.
# Prints the bin dir as the last line of stdout; everything else goes to stderr.
#
#   bindir=$(scripts/ensure-postgres.sh | tail -n1)
#
# Idempotent: when the binaries are already there it only looks, and exits.
# Looks in PATH first, then /usr/lib/postgresql/<highest version>/bin (the
# same order as tests/pgserver.py).
set -euo pipefail

# Overridable for the script's own tests only.
PG_LIB_ROOT=${ENSURE_PG_LIB_ROOT:-/usr/lib/postgresql}
PACKAGE=postgresql

die() {
    echo "ensure-postgres: ERROR: $*" >&2
    exit 1
}

has_server_binaries() {
    [[ -x $1/initdb && -x $1/pg_ctl && -x $1/postgres ]]
}

find_bindir() {
    local initdb dir
    if initdb=$(command -v initdb 2>/dev/null); then
        dir=$(dirname "$(readlink -f "$initdb")")
        if has_server_binaries "$dir"; then
            echo "$dir"
            return 0
        fi
    fi
    # Highest version first: 16 before 15 before 9.6.
    while IFS= read -r dir; do
        if has_server_binaries "$dir"; then
            echo "$dir"
            return 0
        fi
    done < <(compgen -G "$PG_LIB_ROOT/*/bin" | sort -V -r || true)
    return 1
}

if bindir=$(find_bindir); then
    echo "$bindir"
    exit 0
fi

echo "ensure-postgres: PostgreSQL server binaries not found; installing Debian package '$PACKAGE'" >&2
command -v apt-get >/dev/null 2>&1 \
    || die "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found and apt-get is not available; install the Debian package '$PACKAGE' (or your distribution's PostgreSQL server package) by hand"
[[ $(id -u) -eq 0 ]] \
    || die "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; installing the Debian package '$PACKAGE' needs root: sudo apt-get install -y $PACKAGE"

# apt output goes to stderr so that stdout stays just the bin dir.
if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "$PACKAGE"; } >&2; then
    die "'apt-get update && apt-get install -y $PACKAGE' failed; the PostgreSQL server binaries (initdb, pg_ctl, postgres) from the Debian package '$PACKAGE' are required to run the tests"
fi

bindir=$(find_bindir) \
    || die "installed the Debian package '$PACKAGE' but still found no initdb/pg_ctl/postgres in PATH or $PG_LIB_ROOT/*/bin"
echo "ensure-postgres: using $bindir" >&2
echo "$bindir"
