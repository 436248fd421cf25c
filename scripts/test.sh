#!/usr/bin/env bash
# The whole test suite on a fresh machine: install, start a throwaway PostgreSQL, run the
# lint and type checks, every scenario (tests/scenarios, plus ../shared/scenarios when present)
# on SQLite and PostgreSQL, and every tier of pytest (tests/unit, tests/integration,
# tests/e2e); stop what it started. Set CRONSOURCE_TEST_PG to use an existing server.
#
#   scripts/test.sh [PYTEST ARGS...]   everything (the README's and CI's command)
#   scripts/test.sh --quick [ARGS...]  lint, types and the unit tier only: no PostgreSQL, no
#                                      API server or Argo build, minutes (the edit-test loop)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=""
if [[ "${1:-}" == "--quick" ]]; then
    quick=1
    shift
fi

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
    "$PY" -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
# The project's own modules compiled once (an editable install leaves them as sources): every
# `cronsource` command a test starts would otherwise compile them again where
# PYTHONDONTWRITEBYTECODE is set, about a fifth of a command's start-up, hundreds of times.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/python -m compileall -q cronsource domain projections adapters bench tests >/dev/null

checks() {
    echo "== ruff"
    .venv/bin/ruff check .
    echo "== import layers (import-linter)"
    .venv/bin/lint-imports
    echo "== mypy --strict (every package of the product and the benchmarks)"
    .venv/bin/mypy --strict -p cronsource -p bench
}

if [[ -n "$quick" ]]; then
    checks
    # Collection alone runs the tiers' guards (a server-store test no integration module
    # imports, a unit test that reaches the network): seconds, and no server is needed.
    echo "== pytest: every tier collects"
    .venv/bin/pytest -q -p no:cacheprovider --collect-only tests >/dev/null
    echo "== pytest: the unit tier"
    exec .venv/bin/pytest -q -p no:cacheprovider -n 2 tests/unit "$@"
fi

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

checks

export PATH="$PWD/.venv/bin:$PATH"
# The repo's own scenarios, then any extra folders (CRONSOURCE_SCENARIOS, else ../shared/scenarios
# when it exists): each folder is checked by its own check.py.
folders=(tests/scenarios ${CRONSOURCE_SCENARIOS:-})
if [[ -z "${CRONSOURCE_SCENARIOS:-}" && -f ../shared/scenarios/check.py ]]; then
    folders+=(../shared/scenarios)
fi
for dir in "${folders[@]}"; do
    echo "== scenarios in $dir on the default store (SQLite)"
    python "$dir/check.py" "$dir"/*.yaml
    echo "== scenarios in $dir on PostgreSQL"
    python "$dir/check.py" --store "$CRONSOURCE_TEST_PG" "$dir"/*.yaml
done

echo "== test Kubernetes API server (built once per machine; minutes when cold)"
apiserver_bin=$(scripts/build-test-apiserver.sh | tail -n 1)
export CRONSOURCE_TEST_APISERVER="$apiserver_bin"

echo "== Argo v4.0.5's oracle, workflow-controller and benchclient (built once per machine; minutes when cold)"
argo_bins=$(scripts/build-argo.sh | tail -n 3)
CRONSOURCE_ARGO_BENCHCLIENT=$(sed -n 1p <<<"$argo_bins")
CRONSOURCE_ARGO_ORACLE=$(sed -n 2p <<<"$argo_bins")
CRONSOURCE_ARGO_CONTROLLER=$(sed -n 3p <<<"$argo_bins")
export CRONSOURCE_ARGO_ORACLE CRONSOURCE_ARGO_CONTROLLER CRONSOURCE_ARGO_BENCHCLIENT

echo "== Argo PR #16604's cronhash, the oracle of hashed H schedules (standard library only; seconds)"
CRONSOURCE_ARGO_CRONHASH=$(scripts/build-argo-cronhash.sh | tail -n 1)
export CRONSOURCE_ARGO_CRONHASH

echo "== Helm v4.3.0 and the Prometheus Operator types check (built once per machine; about a minute after the apiserver)"
helm_bins=$(scripts/build-helm.sh | tail -n 2)
CRONSOURCE_HELM=$(sed -n 1p <<<"$helm_bins")
CRONSOURCE_MONCHECK=$(sed -n 2p <<<"$helm_bins")
export CRONSOURCE_HELM CRONSOURCE_MONCHECK

echo "== promcheck: Prometheus's rule validation and PromQL parser (built once per machine; under a minute)"
CRONSOURCE_PROMCHECK=$(scripts/build-promcheck.sh | tail -n 1)
export CRONSOURCE_PROMCHECK

echo "== Debian packages: Chromium (status-page test), mmdebstrap/buildah/podman/runc/skopeo (image),"
echo "   faketime (a replica's wall clock stepped while it runs: tests/e2e/test_fault_clock_jumps.py)"
need=()
for pkg in chromium mmdebstrap buildah podman runc skopeo faketime; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if (( ${#need[@]} )); then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

# Most tests wait on processes, servers and clocks more than they compute: two at a time (one
# per core) halves their wall time. Those that time the machine or themselves (marker `solo`,
# tests/conftest.py) run after, one at a time, with both cores to themselves. A selection
# (ARGS) may fall wholly in one of the two; it fails only if neither ran anything. Each phase
# names its slowest tests: a cold run must stay under 45 minutes, and this says where it goes.
echo "== pytest: unit, integration and e2e, in two processes (all but the solo tests)"
rc_shared=0
.venv/bin/pytest -q -p no:cacheprovider -n 2 --dist loadfile -m "not solo" --durations=15 "$@" || rc_shared=$?
echo "== pytest: the solo tests, one at a time"
rc_solo=0
.venv/bin/pytest -q -p no:cacheprovider -m solo --durations=30 "$@" || rc_solo=$?
# Exit 5 is "no test selected": fine for one phase of a selection, not for both.
if (( rc_shared == 5 && rc_solo == 5 )); then
    echo "no test selected" >&2
    exit 5
fi
for rc in "$rc_shared" "$rc_solo"; do
    if (( rc != 0 && rc != 5 )); then exit "$rc"; fi
done
