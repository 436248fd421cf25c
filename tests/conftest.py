"""Fixtures of every tier, defined once, and the tiers themselves.

The tiers are folders: tests/unit (our own logic in-process: no server, no subprocess, no
network; `scripts/test.sh --quick` runs only these), tests/integration (a real PostgreSQL,
the test kube-apiserver, Argo's binaries, subprocesses of our own) and tests/e2e (whole
`cronsource run`/`serve` processes, faults, failover, the image, a browser). Each test gets
its folder's marker (`-m unit` ...), and a unit test that asks for a server is refused at
collection rather than starting one.

PostgreSQL is a real server, started once per session (tests/pgserver.py) unless
CRONSOURCE_TEST_PG names one; a missing server fails the tests, never skips them.

The engine: `engine` is `bootstrap(store_url, target=target, late_tolerance=late_tolerance)`.
A module changes what it is built on by overriding `target` or `late_tolerance`, and runs over
several stores with `@pytest.mark.stores("memory", "sqlite", "postgres")`: the unit tier
takes the embedded stores of that list, the integration tier the server ones (the module of the
same name in tests/integration imports the unit module's test functions to run them there; a
collection of both tiers stops when one is not imported, since it would never run on a server).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from cronsource.projections.dispatch import WorkflowTarget
from tests import pgserver, probe_helpers
from tests.instants import T0
from tests.kube import apiserver as kube_apiserver_module

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "integration", "e2e")
#: Stores a unit test may run on (in this process, on local files) and those it may not.
EMBEDDED_STORES = ("memory", "sqlite")
SERVER_STORES = ("postgres", "postgresql")
#: What only the integration and e2e tiers may use: a server, a cluster, a mounted disk, an image.
SERVER_FIXTURES = frozenset(
    {"pg_url", "pg_server_url", "kube_apiserver", "kube_api", "kube_namespace", "small_disk"}
)
SERVER_MARKERS = ("postgres", "k8s", "image")
#: The e2e modules that time the machine or themselves (a SIGTERM obeyed within 10 s, a lease
#: lapse, /healthz within a second, a tick a second from a move, the benchmarks' figures) and
#: so must have both cores to themselves: marked `solo`. scripts/test.sh runs the rest in two
#: processes (pytest-xdist), then these one at a time.
SOLO_E2E_MODULES = frozenset(
    {
        "test_argo_bench.py",
        "test_argo_controller_interop.py",
        "test_create_race.py",
        "test_failover.py",
        "test_fault_clock_jumps.py",
        "test_fault_disk_full.py",
        "test_fault_frozen_replica.py",
        "test_fault_store_down.py",
        "test_faults.py",
        "test_faults_not_started.py",
        "test_http_hostile.py",
        "test_kube_bench.py",
        "test_probes.py",
        "test_readiness.py",
        "test_replicas_bench.py",
        "test_replicas_visible.py",
        "test_simulate_files.py",
    }
)

pg_server_url = pytest.fixture(scope="session")(pgserver.pg_server_url)
pg_url = pytest.fixture(pgserver.pg_url)

# A real Kubernetes API server (the full kube-apiserver + embedded etcd, built from Go
# modules by scripts/build-test-apiserver.sh), started once per session by the tests that use it.
kube_apiserver = pytest.fixture(scope="session")(kube_apiserver_module.kube_apiserver)
kube_api = pytest.fixture(kube_apiserver_module.kube_api)
kube_namespace = pytest.fixture(kube_apiserver_module.kube_namespace)
small_disk = pytest.fixture(probe_helpers.small_disk)


@pytest.fixture
def migrated_pg_url(pg_url: str) -> str:
    """A fresh PostgreSQL database with cronsource's tables, as `cronsource migrate` makes them."""
    migrate(StoreConfig.parse(pg_url))
    return pg_url


# --------------------------------------------------------------------------------- tiers


def tier_of(path: Path) -> str | None:
    """The tier folder a test file sits in (None outside tests/<tier>/)."""
    try:
        first = path.resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in TIERS else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    mark = metafunc.definition.get_closest_marker("stores")
    if mark is None:
        return
    if "store_url" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: stores() without store_url")
    here = tier_of(metafunc.definition.path)
    # A unit module's test collected elsewhere is its server half; every other test outside
    # the unit tier runs on every store it names.
    companion = here != "unit" and metafunc.function.__module__.startswith("tests.unit.")
    if here == "unit":
        kinds = [k for k in mark.args if k in EMBEDDED_STORES]
    elif companion:
        kinds = [k for k in mark.args if k in SERVER_STORES]
    else:
        kinds = list(mark.args)
    metafunc.parametrize(
        "store_url",
        [
            pytest.param(k, marks=[pytest.mark.postgres] if k in SERVER_STORES else [])
            for k in kinds
        ],
        indirect=True,
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = sorted(m for m in SOLO_E2E_MODULES if not (TESTS / "e2e" / m).is_file())
    if missing:
        raise pytest.UsageError(f"SOLO_E2E_MODULES names no test module: {', '.join(missing)}")
    refused = []
    for item in items:
        tier = tier_of(item.path)
        if tier is None:
            continue
        item.add_marker(tier)
        if tier == "e2e" and item.path.name in SOLO_E2E_MODULES:
            item.add_marker("solo")
        if tier == "unit":
            fixtures = SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            markers = [m for m in SERVER_MARKERS if item.get_closest_marker(m)]
            if fixtures or markers:
                refused.append(f"{item.nodeid}: {', '.join(sorted(fixtures) + markers)}")
    if refused:
        raise pytest.UsageError(
            "unit tests may not use a server (move them to tests/integration):\n  "
            + "\n  ".join(refused)
        )
    _check_server_halves(items)


def _check_server_halves(items: list[pytest.Item]) -> None:
    """A unit test whose `stores` name a server store must also be collected in
    tests/integration (imported by the module of its name there); otherwise its server half
    silently never runs. Checked when both tiers are collected."""
    tiers = {tier_of(item.path) for item in items}
    if not {"unit", "integration"} <= tiers:
        return
    elsewhere = {
        getattr(item, "function", None) for item in items if tier_of(item.path) == "integration"
    }
    missing = sorted(
        {
            item.nodeid.split("[")[0]
            for item in items
            if tier_of(item.path) == "unit"
            and (mark := item.get_closest_marker("stores")) is not None
            and set(mark.args) & set(SERVER_STORES)
            and getattr(item, "function", None) not in elsewhere
        }
    )
    if missing:
        raise pytest.UsageError(
            "these tests name a server store but no module of tests/integration imports them:"
            "\n  " + "\n  ".join(missing)
        )


# -------------------------------------------------------------------------------- engine


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store the engine is built on: `memory:` unless the test is marked `stores`."""
    kind = getattr(request, "param", "memory")
    if kind == "memory":
        return "memory:"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def target() -> WorkflowTarget | None:
    """Where the engine's dispatcher creates Workflows; None: no dispatcher."""
    return None


@pytest.fixture
def late_tolerance() -> timedelta:
    return DEFAULT_LATE_TOLERANCE


@pytest.fixture
def engine(
    store_url: str, target: WorkflowTarget | None, late_tolerance: timedelta
) -> Iterator[Engine]:
    """The engine over a migrated store, as `cronsource migrate` then a command build it."""
    config = StoreConfig.parse(store_url)
    if config.kind != "memory":
        migrate(config)
    e = bootstrap(config, target=target, late_tolerance=late_tolerance)
    try:
        yield e
    finally:
        e.close()


@pytest.fixture
def clock() -> VirtualClock:
    """Time that only the test moves (`set`, `wait`), from tests/instants.py's T0."""
    return VirtualClock(T0)
