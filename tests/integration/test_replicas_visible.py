"""Visible replicas on a real PostgreSQL: two replicas named by their identity (the pod name)
in the leases, the `cronsource_shards_owned` label, `cronsource replicas` and the status
page, and each rebalance logs the shards it took and released.

The replicas are AdvisoryLockShards as `run` builds them (tests/integration/test_leases.py
shows the leases themselves), renewed by hand.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime

import psycopg
import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cronsource.adapters.application.statuspage import scheduler_health
from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.cli import cli
from cronsource.adapters.infrastructure.shards import SHARDS, AdvisoryLockShards
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.observability.metrics import Metrics
from tests.instants import T0

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


@pytest.fixture
def store(pg_url: str) -> StoreConfig:
    config = StoreConfig.parse(pg_url)
    migrate(config)
    return config


@pytest.fixture
def pair(store: StoreConfig) -> Iterator[tuple[AdvisoryLockShards, AdvisoryLockShards]]:
    a = AdvisoryLockShards(store.pg_conninfo, renew_in_background=False, holder="cronsource-a")
    b = AdvisoryLockShards(store.pg_conninfo, renew_in_background=False, holder="cronsource-b")
    for r in (a, b, a, b):
        r.rebalance()
    assert len(a.owned) == len(b.owned) == SHARDS // 2
    yield a, b
    a.release()
    b.release()


def test_shards_owned_is_labelled_by_replica_identity(
    store: StoreConfig, pair: tuple[AdvisoryLockShards, AdvisoryLockShards]
) -> None:
    engine = bootstrap(store)
    try:
        text = generate_latest(Metrics(engine, VirtualClock(T0)).registry).decode()
    finally:
        engine.close()
    owned = {
        s.labels["replica"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "cronsource_shards_owned"
    }
    assert owned == {"cronsource-a": SHARDS // 2, "cronsource-b": SHARDS // 2}


def test_replicas_lists_each_with_its_shards_and_the_projector(
    store: StoreConfig, pair: tuple[AdvisoryLockShards, AdvisoryLockShards]
) -> None:
    runner = CliRunner()
    env = {"CRONSOURCE_STORE": store.url}
    table = runner.invoke(cli, ["replicas"], env=env)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split() == [
        "REPLICA",
        "SHARDS",
        "PROJECTOR",
        "LEASE",
        "LAST",
        "TURN",
        "LAST",
        "RENEWAL",
    ]
    rows = {line.split()[0]: line.split()[1:4] for line in lines[1:]}
    assert rows == {"cronsource-a": ["32", "yes", "live"], "cronsource-b": ["32", "no", "live"]}

    as_json = runner.invoke(cli, ["replicas", "-o", "json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    data = {r["replica"]: r for r in json.loads(as_json.output)}
    assert data["cronsource-a"]["projector"] is True and data["cronsource-b"]["shards"] == 32
    assert data["cronsource-a"]["lastRenewal"].endswith("Z")
    as_yaml = runner.invoke(cli, ["replicas", "-o", "yaml"], env=env)
    assert {r["replica"] for r in yaml.safe_load(as_yaml.output)} == set(data)

    engine = bootstrap(store)
    try:
        live = scheduler_health(engine, T0)["replicas"]
    finally:
        engine.close()
    assert sorted((r["replica"], r["shards"], r["projector"]) for r in live) == [
        ("cronsource-a", 32, True),
        ("cronsource-b", 32, False),
    ]


def test_replicas_says_when_none_runs(store: StoreConfig) -> None:
    result = CliRunner().invoke(cli, ["replicas"], env={"CRONSOURCE_STORE": store.url})
    assert result.exit_code == 0
    assert "no replica running" in result.output


def test_a_rebalance_logs_the_shards_it_took_and_released(
    store: StoreConfig, caplog: pytest.LogCaptureFixture
) -> None:
    a = AdvisoryLockShards(store.pg_conninfo, renew_in_background=False, holder="cronsource-a")
    b = AdvisoryLockShards(store.pg_conninfo, renew_in_background=False, holder="cronsource-b")
    try:
        with caplog.at_level(logging.INFO, "cronsource"):
            a.rebalance()
            b.rebalance()
            a.rebalance()
            b.rebalance()
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("shards:")]
        assert said == [
            f"shards: replica cronsource-a took {SHARDS} shards; owns {SHARDS} of {SHARDS}"
            " (1 replica)",
            "shards: replica cronsource-a took the projector role",
            f"shards: replica cronsource-a released 32 shards; owns 32 of {SHARDS} (2 replicas)",
            f"shards: replica cronsource-b took 32 shards; owns 32 of {SHARDS} (2 replicas)",
        ]
    finally:
        a.release()
        b.release()


def test_each_renewal_writes_when_the_loop_last_turned(
    store: StoreConfig, pair: tuple[AdvisoryLockShards, AdvisoryLockShards]
) -> None:
    a, b = pair
    a.lease.turn_age = lambda: 120.0  # a loop stuck for two minutes, its lease thread alive
    b.lease.turn_age = lambda: None  # no turn finished yet
    assert a.renew() and b.renew()
    env = {"CRONSOURCE_STORE": store.url}
    out = CliRunner().invoke(cli, ["replicas", "-o", "json"], env=env)
    data = {r["replica"]: r for r in json.loads(out.output)}
    turned = datetime.fromisoformat(data["cronsource-a"]["lastTurn"])
    renewed = datetime.fromisoformat(data["cronsource-a"]["lastRenewal"])
    assert 119 <= (renewed - turned).total_seconds() <= 121
    assert data["cronsource-b"]["lastTurn"] is None
    table = CliRunner().invoke(cli, ["replicas"], env=env).output
    assert "2m ago" in table.splitlines()[1], table


def test_a_lease_table_without_last_turn_still_renews(store: StoreConfig) -> None:
    """A store migrated before `last_turn`: renewals leave it out instead of failing (which
    would lose the lease), `replicas` shows no turn, and `migrate` adds the column."""
    with psycopg.connect(store.pg_conninfo, autocommit=True) as conn:
        conn.execute("ALTER TABLE cronsource_leases DROP COLUMN last_turn")
    a = AdvisoryLockShards(store.pg_conninfo, renew_in_background=False, holder="old-store")
    try:
        a.lease.turn_age = lambda: 1.0
        a.rebalance()
        assert a.renew()
        out = CliRunner().invoke(
            cli, ["replicas", "-o", "json"], env={"CRONSOURCE_STORE": store.url}
        )
        assert [(r["replica"], r["lastTurn"]) for r in json.loads(out.output)] == [
            ("old-store", None)
        ]
    finally:
        a.release()
    migrate(store)
    with psycopg.connect(store.pg_conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'cronsource_leases'"
            " AND column_name = 'last_turn'"
        ).fetchone()
    assert row is not None
