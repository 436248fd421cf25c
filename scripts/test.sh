#!/usr/bin/env bash
# The whole test suite on a fresh machine: install, start a throwaway PostgreSQL, run the
# unit/property/integration tests, lint and type checks, and every shared scenario on SQLite
# and PostgreSQL; stop what it started. Set CRONSOURCE_TEST_PG to use an existing server.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
    "$PY" -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'

scripts/ensure-postgres.sh >/dev/null

started=""
cleanup() {
    if [[ -n "$started" ]]; then .venv/bin/python -m tests.pgserver stop "$started" || true; fi
}
trap cleanup EXIT
if [[ -z "${CRONSOURCE_TEST_PG:-}" ]]; then
    read -r started url < <(.venv/bin/python -m tests.pgserver start)
    export CRONSOURCE_TEST_PG="$url"
    echo "throwaway PostgreSQL at $url (data in $started)"
fi

echo "== ruff"
.venv/bin/ruff check domain projections adapters tests
echo "== mypy --strict domain/"
.venv/bin/mypy --strict domain/

scenarios=${CRONSOURCE_SCENARIOS:-../shared/scenarios}
if [[ ! -f "$scenarios/check.py" ]]; then
    echo "scenarios not found at $scenarios (set CRONSOURCE_SCENARIOS)" >&2
    exit 1
fi
export PATH="$PWD/.venv/bin:$PATH"
echo "== scenarios on the default store (SQLite)"
python "$scenarios/check.py" "$scenarios"/*.yaml
echo "== scenarios on PostgreSQL"
python "$scenarios/check.py" --store "$CRONSOURCE_TEST_PG" "$scenarios"/*.yaml

echo "== test Kubernetes API server (built once per machine; minutes when cold)"
apiserver_bin=$(scripts/build-test-apiserver.sh | tail -n 1)
export CRONSOURCE_TEST_APISERVER="$apiserver_bin"

echo "== Argo v4.0.5's oracle and workflow-controller (built once per machine; minutes when cold)"
argo_bins=$(scripts/build-argo.sh | tail -n 2)
CRONSOURCE_ARGO_ORACLE=$(sed -n 1p <<<"$argo_bins")
CRONSOURCE_ARGO_CONTROLLER=$(sed -n 2p <<<"$argo_bins")
export CRONSOURCE_ARGO_ORACLE CRONSOURCE_ARGO_CONTROLLER

echo "== Chromium for the status-page browser test (Debian package)"
if [[ ! -x /usr/bin/chromium ]]; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi

echo "== pytest"
.venv/bin/pytest -q -p no:cacheprovider "$@"
