"""A frozen replica, with real processes and a real PostgreSQL (issue 27, item 6).

A replica stopped with SIGSTOP keeps its PostgreSQL session and, before leases, its shard and
projector locks: its CronWorkflows fired for nobody until it was killed. Here two replicas of
`cronsource run` (tests/faults/crashy_run.py: the real CLI plus hooks) share one store; one of
them, which also holds the projector role, freezes itself exactly where it holds something it
must not act on later (the stall hooks of crashy_run.py), and the test sends SIGCONT later:

1. frozen for 75 s with a decided batch in hand, just before its commit: the other takes its
   shards and the projector role within the lease plus a rebalance; between the lapse and the
   take-over the metrics count its shards as lapsed and unowned; the woken replica commits
   nothing it decided before, and nothing is lost or decided twice;
2. frozen inside the read model's write transaction (lease 3 s, 12 s stop): the other's
   projections go on past the frozen batch during the stop, and the frozen transaction never
   commits.

Afterwards: no tick fired twice, every tick decided exactly once, every stream without a
version gap, every fire with exactly one Workflow file, and the read model equal to a rebuild
from the log. Figures are printed (run with -s).
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.infrastructure.leases import LEASE_SECONDS
from cronsource.adapters.infrastructure.shards import REBALANCE_SECONDS, SHARDS
from cronsource.adapters.observability.metrics import Metrics
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from tests.faults.harness import (
    Locks,
    Replica,
    advisory_locks,
    all_events,
    check_catch_up_rules,
    check_decisions,
    check_read_model,
    check_stream_versions,
    check_workflow_files,
    cron_manifest,
    final_catch_up,
    migrate,
    read_logs,
    tracking_position,
    utcnow,
    wait_for,
    write_manifests,
)

pytestmark = pytest.mark.postgres

VICTIM, SURVIVOR = "victim", "survivor"


def say(*parts: object) -> None:
    print("[frozen]", *parts, flush=True)


def split(locks: Locks) -> bool:
    """Both replicas hold shards, and every shard is held."""
    return locks.owned == SHARDS and all(locks.shards.get(n) for n in (VICTIM, SURVIVOR))


def taken_over(locks: Locks) -> bool:
    """The survivor holds every shard and the projector role."""
    return (
        locks.owned == SHARDS
        and len(locks.shards.get(SURVIVOR, ())) == SHARDS
        and locks.projector == SURVIVOR
    )


def seconds_until_lapse(url: str, r: Replica) -> float:
    """Until the replica's lease lapses, by the server's clock (its row names host:pid)."""
    assert r.proc is not None
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM renewed_at + lease_seconds * interval '1 second' - now())"
            " FROM cronsource_leases WHERE holder LIKE %s",
            (f"%:{r.proc.pid}",),
        ).fetchone()
    assert row is not None, f"{r.name} has no lease"
    return float(row[0])


def store_metrics(engine: Engine) -> dict[str, float]:
    """The store-wide gauges (unlabelled samples), as any process's /metrics computes them."""
    text = generate_latest(Metrics(engine, SYSTEM_CLOCK).registry).decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.labels
    }


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    made: list[Replica] = []
    yield made
    for r in made:
        r.cleanup()


def start_pair(
    url: str, tmp: Path, manifest: Path, stall: str, run_args: tuple[str, ...], made: list[Replica]
) -> tuple[Replica, Replica, Path]:
    """The victim (armed to stall at `stall`) starts first and takes the projector role, then
    the survivor joins; returns once they split the shards. The stall happens the first time
    the victim reaches the point after the returned file exists."""
    arm = tmp / "arm"
    wf_dir = tmp / "workflows"
    env = {"CRONSOURCE_STALL": stall, "CRONSOURCE_STALL_ARM": str(arm)}
    victim = Replica(VICTIM, url, manifest, wf_dir, tmp, run_args=run_args, env=env)
    survivor = Replica(SURVIVOR, url, manifest, wf_dir, tmp, run_args=run_args)
    made += [victim, survivor]
    victim.start().wait_running()
    wait_for(
        "the victim to hold the projector role",
        lambda: advisory_locks(url).projector == VICTIM,
        30,
    )
    survivor.start().wait_running()
    wait_for("the replicas to split the shards", lambda: split(advisory_locks(url)), 30)
    return victim, survivor, arm


def stop_and_check(url: str, tmp: Path, pair: list[Replica]) -> dict[str, object]:
    """SIGTERM both (each must exit 0), bring the dispatcher and read model to the end of the
    log, and check every invariant; returns the figures."""
    stopped_at = utcnow()
    for r in pair:
        assert r.terminate() == 0, f"{r.name} did not exit 0 after SIGTERM:\n{r.tail()}"
    behind = final_catch_up(url, tmp / "workflows")
    engine = bootstrap(url)
    try:
        events = all_events(engine)
        logs = read_logs(engine, events)
        summary = check_decisions(logs)
        check_catch_up_rules(logs, DEFAULT_LATE_TOLERANCE)
        files = check_workflow_files(tmp / "workflows", logs)
        streams = check_stream_versions(events)
        compared = check_read_model(engine, events, tmp / "rebuilt.db")
    finally:
        engine.close()
    # Nothing left behind: every CronWorkflow was decided within its last two periods.
    stale = [
        lg.name
        for lg in logs.values()
        if summary.last_decided[lg.cron_id] < stopped_at - 2 * lg.period
    ]
    assert not stale, f"{len(stale)} CronWorkflows not decided lately: {stale[:5]}"
    expected = sum(math.floor((stopped_at - lg.created) / lg.period) for lg in logs.values())
    decided = sum(
        math.floor((summary.last_decided[lg.cron_id] - lg.created) / lg.period)
        for lg in logs.values()
    )
    return {
        "expected ticks (creation to SIGTERM)": expected,
        "ticks decided": decided,
        "fires": summary.fires,
        "fires by trigger": dict(summary.fires_by_trigger),
        "skipped ticks by reason": dict(summary.skipped_ticks_by_reason),
        "Workflow files": files,
        "streams without gaps": streams,
        "read model equal to a rebuild, events": compared,
        "read model/dispatch behind at SIGTERM": behind,
        "fire lateness p50/p99/max ms": (
            round(summary.percentile(0.5) * 1000),
            round(summary.percentile(0.99) * 1000),
            round(max(summary.lateness) * 1000),
        ),
    }


# ---------------------------------------------------------------------------- 75 s

CRONS = 100
STOP_SECONDS = 75.0
#: The survivor sees the lease lapse at most LEASE_SECONDS after the victim's last renewal
#: (which was before the stall), terminates the victim's session at its next rebalance and
#: takes the freed shards at the one after; one more second for the turns around them.
TAKEOVER_LIMIT = LEASE_SECONDS + 3 * REBALANCE_SECONDS + 1.0


@pytest.mark.timeout(300)
def test_a_replica_frozen_for_75s_before_a_commit_is_fenced(
    pg_url: str, tmp_path: Path, replicas: list[Replica]
) -> None:
    t_test = time.monotonic()
    migrate(pg_url)
    manifest = write_manifests(
        tmp_path / "crons.yaml",
        (
            cron_manifest(f"f{i:03d}", "@every 10s", successfulJobsHistoryLimit=1000)
            for i in range(CRONS)
        ),
    )
    run_args = ("--local-run-duration", "1s", "--http-port", "0")
    victim, survivor, arm = start_pair(
        pg_url, tmp_path, manifest, "before-commit", run_args, replicas
    )
    held = advisory_locks(pg_url).shards
    arm.touch()
    wait_for(
        "the victim to stall before a commit", lambda: "STALL before-commit" in victim.log(), 30
    )
    stalled = time.monotonic()
    wait_for("the victim to be stopped", victim.stopped, 5, 0.01)

    before_lapse = survivor.metrics()
    # The lapsed window lasts from the moment the lease lapses (by the server's clock) to the
    # survivor's next rebalance, at most a second: to see it every time, the survivor is held
    # (SIGSTOP) from just before that moment until the metric, computed from the store by the
    # same collector every process's /metrics runs, has shown it.
    time.sleep(max(0.0, seconds_until_lapse(pg_url, victim) - 0.3))
    assert survivor.proc is not None
    survivor.proc.send_signal(signal.SIGSTOP)
    held_at = time.monotonic()
    engine = bootstrap(pg_url)
    try:
        during = wait_for(
            "cronsource_shards_lapsed to show the frozen replica's shards",
            lambda: (m := store_metrics(engine))["cronsource_shards_lapsed"] > 0 and m,
            5,
            0.01,
        )
    finally:
        engine.close()
        survivor.proc.send_signal(signal.SIGCONT)
    survivor_held = time.monotonic() - held_at

    takeover: float | None = None
    after_takeover: dict[str, float] = {}
    while time.monotonic() < stalled + STOP_SECONDS:
        if takeover is None and taken_over(advisory_locks(pg_url)):
            takeover = time.monotonic() - stalled
            after_takeover = survivor.metrics()
        assert victim.stopped(), "the victim ran before SIGCONT"
        time.sleep(0.05 if takeover is None else 0.5)
    assert victim.proc is not None
    victim.proc.send_signal(signal.SIGCONT)
    woke = time.monotonic()
    wait_for(
        "the woken victim to hold shards again",
        lambda: bool(advisory_locks(pg_url).shards.get(VICTIM)),
        30,
    )
    handback = time.monotonic() - woke
    # Two more ticks with both replicas, as before the stall.
    time.sleep(max(0.0, woke + 20 - time.monotonic()))
    victim_metrics = victim.metrics()
    victim_log = victim.log()
    figures = stop_and_check(pg_url, tmp_path, replicas)

    assert takeover is not None and takeover <= TAKEOVER_LIMIT, (
        f"the survivor held every shard and the projector role {takeover}s after the stall"
        f" (limit {TAKEOVER_LIMIT}s)"
    )
    assert before_lapse["cronsource_shards_lapsed"] == 0
    assert before_lapse["cronsource_shards_unowned"] == 0
    # While the lease has lapsed and before the take-over: the frozen replica's shards are
    # lapsed, and counted as unowned; it is no live replica and no live projector.
    assert during["cronsource_shards_lapsed"] == len(held[VICTIM])
    assert during["cronsource_shards_unowned"] == len(held[VICTIM])
    assert during["cronsource_replicas_lapsed"] == 1 and during["cronsource_replicas"] == 1
    assert during["cronsource_projector_replicas"] == 0
    assert after_takeover["cronsource_shards_lapsed"] == 0
    assert after_takeover["cronsource_shards_unowned"] == 0
    assert after_takeover["cronsource_projector_replicas"] == 1
    # The woken replica wrote nothing it decided under its old ownership: the batch in hand
    # at the stall was refused before its commit, and it said why.
    assert victim.stats()["stale_commits"] == 0 and "STALE COMMIT" not in victim_log
    assert "LeaseLost" in victim_log and "giving up" in victim_log, victim.tail()
    assert victim_metrics["cronsource_leases_lost_total"] >= 1
    say(
        f"75 s stop: {CRONS} x @every 10s, lease {LEASE_SECONDS:g}s; shards before the stall "
        f"{ {k: len(v) for k, v in sorted(held.items())} }; survivor held all {SHARDS} and the "
        f"projector role {takeover:.2f}s after the stall (limit {TAKEOVER_LIMIT:g}s; the "
        f"survivor was held {survivor_held:.2f}s of it while the metric was read: "
        f"cronsource_shards_lapsed {during['cronsource_shards_lapsed']:g}, unowned "
        f"{during['cronsource_shards_unowned']:g}); victim held shards again "
        f"{handback:.2f}s after SIGCONT; victim "
        f"leases lost {victim_metrics['cronsource_leases_lost_total']:g}, stats {victim.stats()}"
    )
    say(f"75 s stop: {figures}; test took {time.monotonic() - t_test:.0f}s")


# ---------------------------------------------------------------------------- projector

SHORT_LEASE = 3.0
SHORT_STOP = 12.0


@pytest.mark.timeout(180)
def test_a_projector_frozen_inside_its_write_cannot_commit_it(
    pg_url: str, tmp_path: Path, replicas: list[Replica]
) -> None:
    t_test = time.monotonic()
    migrate(pg_url)
    manifest = write_manifests(
        tmp_path / "crons.yaml",
        (
            cron_manifest(f"p{i:02d}", "@every 2s", successfulJobsHistoryLimit=1000)
            for i in range(20)
        ),
    )
    run_args = ("--local-run-duration", "1s", "--lease-duration", f"{SHORT_LEASE:g}s")
    victim, _, arm = start_pair(pg_url, tmp_path, manifest, "readmodel-in-txn", run_args, replicas)
    arm.touch()
    wait_for(
        "the victim to stall inside a read model write",
        lambda: "STALL readmodel-in-txn" in victim.log(),
        30,
    )
    stalled = time.monotonic()
    wait_for("the victim to be stopped", victim.stopped, 5, 0.01)
    frozen_at = tracking_position(pg_url, "readmodel")
    # The frozen transaction holds the read model's position row. The survivor projects past
    # it only once the victim's session is terminated (rolling the transaction back).
    wait_for(
        "the survivor to take the projector role",
        lambda: advisory_locks(pg_url).projector == "survivor",
        SHORT_LEASE + 3 * REBALANCE_SECONDS + 1.0,
        0.05,
    )
    takeover = time.monotonic() - stalled
    wait_for(
        "the survivor's projections to pass the frozen batch",
        lambda: tracking_position(pg_url, "readmodel") > frozen_at,
        10,
        0.05,
    )
    passed = time.monotonic() - stalled
    assert passed < SHORT_STOP and victim.stopped()
    time.sleep(max(0.0, stalled + SHORT_STOP - time.monotonic()))
    assert victim.proc is not None
    victim.proc.send_signal(signal.SIGCONT)
    wait_for("the frozen transaction to end", lambda: "STALL txn" in victim.log(), 15)
    log = victim.log()
    assert "STALL txn failed" in log and "STALL txn committed" not in log, victim.tail()
    wait_for(
        "the woken victim to hold shards again",
        lambda: bool(advisory_locks(pg_url).shards.get(VICTIM)),
        30,
    )
    time.sleep(3)  # a few more ticks with both replicas
    figures = stop_and_check(pg_url, tmp_path, replicas)
    failed = next(line for line in log.splitlines() if "STALL txn failed" in line)
    say(
        f"projector frozen in its write: lease {SHORT_LEASE:g}s, survivor projected "
        f"{takeover:.2f}s after the stall and passed the frozen batch (position {frozen_at}) "
        f"after {passed:.2f}s; the frozen write on waking: {failed.strip()!r}"
    )
    say(f"projector: {figures}; test took {time.monotonic() - t_test:.0f}s")
