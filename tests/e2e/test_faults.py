"""Fault tolerance with real OS processes and a real PostgreSQL.

Every test runs `cronsource run` (through tests/faults/crashy_run.py: the real CLI, plus crash
hooks that only wrap product methods, and a stats file written at a clean exit) as separate
processes, hurts them (SIGKILL at random or chosen points, a PostgreSQL restart under them),
stops them with SIGTERM (they must exit 0), and then checks what they left behind:

- the event log: no tick fired twice; every tick from creation to the last decided one has
  exactly one decision (a fire, or inside exactly one ScheduleSkipped range);
- the local target: every ScheduleFired has exactly one Workflow file (or was pruned);
- the read model: equal to a rebuild from the log.

Figures (take-over time, lateness, skip counts, rejected writes) are printed; run with -s.

Tests:

1. three replicas, 200 `@every 2s` CronWorkflows, replica-1 SIGKILLed at 20 s and restarted at
   40 s, SIGTERM at 60 s; one run (a module fixture) checked by two tests: the invariants
   (must hold whatever the timing) and the timing (take-over, nothing left behind, nothing
   missed, prompt exit; this one depends on the machine keeping up with 100 fires/s);
2. one replica SIGKILLed 30 times (20 random instants, 10 crash hooks), on PostgreSQL and on
   SQLite; then the read model must equal a rebuild from the log;
3. PostgreSQL stopped for 6 s under a running replica: it reconnects and decides again;
4. SIGTERM during a projection backlog: the turn in flight is bounded, so the exit is prompt;
5. a Forbid CronWorkflow after a restart: of its ticks due together the older are skipped as
   ConcurrencyForbid.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.shards import SHARDS, shard_of
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type
from tests import pgserver
from tests.faults.crashy_run import POINTS
from tests.faults.harness import (
    NAMESPACE,
    CronLog,
    Locks,
    Replica,
    advisory_locks,
    all_events,
    check_catch_up_rules,
    check_decisions,
    check_read_model,
    check_workflow_files,
    cron_manifest,
    final_catch_up,
    leftover_temp_files,
    migrate,
    read_logs,
    stop_keeping_data,
    tracking_position,
    utcnow,
    wait_for,
    write_manifests,
)

pytestmark = pytest.mark.postgres

#: A CronWorkflow whose last decided tick is older than this at SIGTERM was left behind long
#: enough for its next tick to be missed (the default late tolerance, docs/design.md section 4).
LAG_LIMIT = DEFAULT_LATE_TOLERANCE


def say(*parts: object) -> None:
    print("[faults]", *parts, flush=True)


def count_fires_since(url: str, since_epoch: float) -> int:
    """ScheduleFired events committed after `since_epoch`, read from the log itself (not
    from the read model, which the scheduler under test maintains)."""
    engine = bootstrap(url)
    try:
        return sum(
            1
            for _, ev in all_events(engine)
            if event_type(ev) == "ScheduleFired" and ev.fired_at.timestamp() > since_epoch
        )
    finally:
        engine.close()


# ---------------------------------------------------------------------------- test 1

REPLICAS = 3
CRONS = 200
RUN_SECONDS = 60.0
KILL_AT = 20.0
RESTART_AT = 40.0
#: Kubernetes' default terminationGracePeriodSeconds: after it, the kubelet sends SIGKILL.
GRACE_SECONDS = 30.0
#: The survivors must hold the dead replica's shards before it comes back. (How soon matters
#: only through lateness: a tick decided later than the late tolerance is missed, which the
#: timing test also checks.)
TAKEOVER_LIMIT = RESTART_AT - KILL_AT
#: The share of ticks that may be missed (decided late as DeadlineExceeded, never lost). Run
#: alone, the scenario missed none in 9 runs; in the README's full run, after 2,700 tests on
#: the same 2 cores and PostgreSQL server, it missed 86-193 of about 5,500 (1.6-3.5%): a
#: 2-s schedule misses a tick whenever a replica is 2 s late. How fast fires go is bench's to
#: measure (bench/); this bound still fails a scheduler that falls behind for good.
MISSED_SHARE = 0.05


def gap_around(times: list[datetime], instant: datetime) -> float:
    """Seconds between the last decision at or before `instant` and the first after it."""
    before = [t for t in times if t <= instant]
    after = [t for t in times if t > instant]
    if not before or not after:
        return float("inf")
    return (after[0] - before[-1]).total_seconds()


@dataclass
class ThreeReplicaRun:
    """What the 60 s scenario did and left behind (shared by the two tests below)."""

    wf_dir: Path
    logs: dict[str, CronLog]
    names: list[str]
    victim: str
    shards_before_kill: Locks
    killed_at: datetime
    retaken_after: float | None  # s until the survivors held all 64 shards (None: never)
    restarted_at: datetime
    back_after: float | None  # s until the restarted replica held shards again
    stopped_at: datetime
    exit_codes: dict[str, int | None]  # None: still running GRACE_SECONDS after SIGTERM
    exit_seconds: dict[str, float]
    behind: tuple[int, int]
    stats: dict[str, dict[str, int]]
    run_seconds: float
    catch_up_seconds: float
    tails: dict[str, str] = field(default_factory=dict)


def poll_locks(url: str, until_monotonic: float, done: Callable[[Locks], bool]) -> float | None:
    """Seconds until `done(locks)` held, polling pg_locks; None if not before the deadline."""
    t = time.monotonic()
    while time.monotonic() < until_monotonic:
        if done(advisory_locks(url)):
            return time.monotonic() - t
        time.sleep(0.05)
    return None


def apply_between_ticks(url: str, docs: list[dict[str, Any]]) -> None:
    """Create these `@every 2s` CronWorkflows in a second of the other parity than the ones
    already there (their creation times, to the second, one odd and one even)."""
    engine = bootstrap(url)
    try:
        svc = engine.service
        anchor = int(svc.find(NAMESPACE, "r000").baseline.timestamp())  # its creation
        second = int(time.time()) + 1
        if (second - anchor) % 2 == 0:
            second += 1
        time.sleep(max(0.0, second + 0.05 - time.time()))
        at = datetime.fromtimestamp(second + 0.05, UTC)
        for doc in docs:
            svc.apply(parse_manifest(doc), at)
    finally:
        engine.close()


@pytest.fixture(scope="module")
def three_replica_run(
    pg_server_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ThreeReplicaRun]:
    """Three `cronsource run` replicas share one store and one workflows directory, with 200
    `@every 2s` CronWorkflows (no starting deadline, history limit 1000 so nothing is
    pruned): 100 in the replicas' multi-document file, 100 applied once they run, so that
    the two halves tick in alternate seconds (`apply_between_ticks`). replica-1 gets SIGKILL
    at 20 s and is started again at 40 s; at 60 s all get SIGTERM. Whoever has not exited
    after GRACE_SECONDS gets SIGKILL, as the kubelet would do. Then the projections are
    caught up, as a restarted replica would."""
    url = pgserver.fresh_database(pg_server_url)
    tmp = tmp_path_factory.mktemp("three-replicas")
    replicas: list[Replica] = []
    try:
        migrate(url)
        crons = [
            cron_manifest(f"r{i:03d}", "@every 2s", successfulJobsHistoryLimit=1000)
            for i in range(CRONS)
        ]
        # The replicas apply the first half from their file; the second half is applied in
        # the second between two of the first half's ticks (below). `@every` ticks on whole
        # seconds from the creation (as robfig's Every), so the halves alternate, and the
        # load is the 100 fires every second this scenario is about, not 200 at one instant
        # every other second (how fast a burst of one schedule goes is bench's to measure).
        manifest = write_manifests(tmp / "crons.yaml", crons[: CRONS // 2])
        wf_dir = tmp / "workflows"
        replicas = [
            Replica(f"replica-{i}", url, manifest, wf_dir, tmp) for i in range(1, REPLICAS + 1)
        ]
        victim = replicas[0]
        t0 = time.monotonic()

        def until(offset: float) -> None:  # the scenario's own clock: these instants are it
            time.sleep(max(0.0, t0 + offset - time.monotonic()))

        for r in replicas:
            r.start()
        for r in replicas:
            r.wait_running(KILL_AT)
        apply_between_ticks(url, crons[CRONS // 2 :])

        until(KILL_AT)
        before_kill = advisory_locks(url)
        killed_at = utcnow()
        assert victim.kill() == -signal.SIGKILL
        retaken_after = poll_locks(
            url,
            t0 + RESTART_AT - 0.5,
            lambda locks: locks.owned == SHARDS and victim.name not in locks.shards,
        )

        until(RESTART_AT)
        restarted_at = utcnow()
        victim.start()
        victim.wait_running(RUN_SECONDS - RESTART_AT)
        back = poll_locks(
            url, t0 + RUN_SECONDS - 0.5, lambda locks: bool(locks.shards.get(victim.name))
        )
        back_after = None if back is None else (utcnow() - restarted_at).total_seconds()

        until(RUN_SECONDS)
        stopped_at = utcnow()
        for r in replicas:
            assert r.proc is not None
            r.proc.send_signal(signal.SIGTERM)
        exit_codes: dict[str, int | None] = {}
        exit_seconds: dict[str, float] = {}
        grace_ends = time.monotonic() + GRACE_SECONDS
        for r in replicas:
            assert r.proc is not None
            try:
                exit_codes[r.name] = r.proc.wait(timeout=max(0.0, grace_ends - time.monotonic()))
                exit_seconds[r.name] = (utcnow() - stopped_at).total_seconds()
            except subprocess.TimeoutExpired:
                exit_codes[r.name] = None
                exit_seconds[r.name] = float("inf")
                r.kill()
        run_seconds = time.monotonic() - t0

        t_catch = time.monotonic()
        behind = final_catch_up(url, wf_dir, read_model=False)
        engine = bootstrap(url)
        try:
            logs = read_logs(engine)
        finally:
            engine.close()
        yield ThreeReplicaRun(
            wf_dir=wf_dir,
            logs=logs,
            names=[r.name for r in replicas],
            victim=victim.name,
            shards_before_kill=before_kill,
            killed_at=killed_at,
            retaken_after=retaken_after,
            restarted_at=restarted_at,
            back_after=back_after,
            stopped_at=stopped_at,
            exit_codes=exit_codes,
            exit_seconds=exit_seconds,
            behind=behind,
            stats={r.name: r.stats() for r in replicas},
            run_seconds=run_seconds,
            catch_up_seconds=time.monotonic() - t_catch,
            tails={r.name: r.tail(15) for r in replicas},
        )
    finally:
        for r in replicas:
            r.cleanup()
        pgserver.drop_database(url)


@pytest.mark.timeout(300)
def test_three_replicas_no_tick_lost_or_fired_twice(three_replica_run: ThreeReplicaRun) -> None:
    """Whatever the timing: no tick fired twice, every tick from creation to the last decided
    one has exactly one decision, every fire has exactly one Workflow file, the dead
    replica's CronWorkflows were decided again after the kill, a replica that exits after
    SIGTERM exits 0."""
    run = three_replica_run
    logs = run.logs
    summary = check_decisions(logs)
    files = check_workflow_files(run.wf_dir, logs)
    assert summary.crons == CRONS and len(summary.last_decided) == CRONS
    # Ticks are missed (DeadlineExceeded) only where the takeover after the kill outlasted the
    # late tolerance, which depends on the machine's timing: a subset, not an exact set. Fires
    # there must be, and all of them on schedule.
    assert summary.skipped_ticks_by_reason.keys() <= {"DeadlineExceeded"}, summary.describe()
    assert summary.fires_by_trigger.keys() == {"schedule"}, summary.describe()
    bad_exits = {n: c for n, c in run.exit_codes.items() if c not in (0, None)}
    assert not bad_exits, f"non-zero exit after SIGTERM: {bad_exits} {run.tails}"

    victim_shards = run.shards_before_kill.shards.get(run.victim, frozenset())
    victim_crons = [lg for lg in logs.values() if shard_of(lg.cron_id) in victim_shards]
    orphaned = [
        lg.name for lg in victim_crons if not any(t > run.killed_at for t in lg.decision_times())
    ]
    assert not orphaned, f"never decided again after replica-1 died: {orphaned[:10]}"

    takeover = max(
        (gap_around(lg.decision_times(), run.killed_at) for lg in victim_crons), default=0
    )
    others = [lg for lg in logs.values() if shard_of(lg.cron_id) not in victim_shards]
    normal = max((gap_around(lg.decision_times(), run.killed_at) for lg in others), default=0)
    around_restart = [gap_around(lg.decision_times(), run.restarted_at) for lg in logs.values()]
    handback = max((g for g in around_restart if g != float("inf")), default=0.0)
    undecided_after_restart = sum(1 for g in around_restart if g == float("inf"))
    deadline_skips = summary.skip_events_by_reason["DeadlineExceeded"]
    held = {k: len(v) for k, v in sorted(run.shards_before_kill.shards.items())}
    say(
        f"test 1: {REPLICAS} replicas, {CRONS} x @every 2s for {RUN_SECONDS:.0f}s "
        f"(scenario {run.run_seconds:.1f}s, catch-up and reading {run.catch_up_seconds:.1f}s)"
    )
    say(
        f"test 1: shards before the kill {held}, "
        f"projector {run.shards_before_kill.projector}; survivors held all 64 shards "
        f"{_secs(run.retaken_after)} after SIGKILL; restarted replica held shards again "
        f"{_secs(run.back_after)} after its start"
    )
    say(
        f"test 1: take-over: longest gap between decisions of the dead replica's "
        f"{len(victim_crons)} CronWorkflows {takeover:.2f}s (the others: {normal:.2f}s; "
        f"period 2s); around the restart {handback:.2f}s, and {undecided_after_restart} "
        f"CronWorkflows were not decided at all in the 20s after it"
    )
    say(
        f"test 1: schedule fires {len(summary.lateness)}, lateness p50 "
        f"{summary.percentile(0.5) * 1000:.0f} ms, p99 {summary.percentile(0.99) * 1000:.0f} "
        f"ms, max {max(summary.lateness) * 1000:.0f} ms; DeadlineExceeded: {deadline_skips} "
        f"skip events, {summary.skipped_ticks_by_reason['DeadlineExceeded']} ticks"
    )
    say(
        f"test 1: SIGTERM -> exit {run.exit_codes} after {_rounded(run.exit_seconds)} s; "
        f"rejected writes (clean exits only) {run.stats}; read model/dispatch behind at the "
        f"end {run.behind} (only the dispatcher was caught up); {files} Workflow files, "
        f"{len(leftover_temp_files(run.wf_dir))} temp files left"
    )
    say(f"test 1: {summary.describe()}")


@pytest.mark.timeout(300)
def test_three_replicas_timely(three_replica_run: ThreeReplicaRun) -> None:
    """The timing half of the scenario: the survivors hold all shards while the dead replica
    is down; at most MISSED_SHARE of the ticks are late enough to be missed (a missed tick is
    still decided, as DeadlineExceeded: test_three_replicas_no_tick_lost_or_fired_twice) and
    none is left undecided that long at the end; every replica exits 0 within the grace
    period after SIGTERM. This needs the machine to keep up with 100 fires/s plus their
    projections; under overload a failure here is the unbounded turn that
    test_sigterm_is_prompt_with_a_projection_backlog pins."""
    run = three_replica_run
    summary = check_decisions(run.logs)
    problems = []
    if run.retaken_after is None or run.retaken_after > TAKEOVER_LIMIT:
        problems.append(f"dead replica's shards taken after {_secs(run.retaken_after)}")
    stale = {
        run.logs[c].name: t.isoformat()
        for c, t in summary.last_decided.items()
        if t < run.stopped_at - LAG_LIMIT
    }
    if stale:
        problems.append(f"{len(stale)} CronWorkflows not decided in the last {LAG_LIMIT}")
    missed = summary.skipped_ticks_by_reason
    ticks = summary.fires + sum(missed.values())
    if set(missed) - {"DeadlineExceeded"} or sum(missed.values()) > MISSED_SHARE * ticks:
        problems.append(f"ticks missed: {dict(missed)} of {ticks}")
    if any(c != 0 for c in run.exit_codes.values()):
        problems.append(
            f"not all exited 0 within {GRACE_SECONDS:.0f}s of SIGTERM: {run.exit_codes}"
        )
    assert not problems, "; ".join(problems)


def _secs(x: float | None) -> str:
    return "never" if x is None else f"{x:.2f}s"


def _rounded(d: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in d.items()}


# ---------------------------------------------------------------------------- test 2

RANDOM_KILLS = 20
HOOKED_KILLS = 2  # per crash point


def kill_loop_manifests() -> list[dict[str, Any]]:
    keep = {"successfulJobsHistoryLimit": 1000, "failedJobsHistoryLimit": 1000}
    return [
        *(cron_manifest(f"k{i}", "@every 1s", **keep) for i in range(3)),
        cron_manifest("k-pruned", "@every 1s"),  # default limits: HistoryPruned deletes files
        cron_manifest("k-deadline", "@every 1s", startingDeadlineSeconds=30, **keep),
        cron_manifest("k-forbid", "@every 1s", concurrencyPolicy="Forbid", **keep),
        cron_manifest("k-replace", "@every 1s", concurrencyPolicy="Replace", **keep),
    ]


@pytest.mark.parametrize("kind", ["postgresql", "sqlite"])
@pytest.mark.timeout(400)
def test_single_replica_killed_at_random_points(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """One replica, SIGKILLed again and again: at random times (seeded) and exactly inside
    the windows that matter (crash hooks): between the append and the Workflow file, inside
    a read-model transaction, after the file but before the dispatch position moved, between
    the .phase file and RunCompleted. After a last clean run and SIGTERM: every fire has
    exactly one Workflow file, and the read model equals a rebuild from the log."""
    t_test = time.monotonic()
    if kind == "postgresql":
        url = request.getfixturevalue("pg_url")
    else:
        url = f"sqlite:///{tmp_path / 'cronsource.db'}"
    migrate(url)
    manifest = write_manifests(tmp_path / "crons.yaml", kill_loop_manifests())
    wf_dir = tmp_path / "workflows"
    replica = Replica(
        "solo",
        url,
        manifest,
        wf_dir,
        tmp_path,
        run_args=("--local-run-duration", "1s", "--late-tolerance", "2s"),
    )
    rng = random.Random(20260504)
    plan: list[tuple[str, float | str]] = [
        ("random", round(rng.uniform(0.05, 3.0), 2)) for _ in range(RANDOM_KILLS)
    ]
    plan += [
        ("hook", f"{point}:{rng.randint(1, 4)}") for point in POINTS for _ in range(HOOKED_KILLS)
    ]
    rng.shuffle(plan)
    hits: Counter[str] = Counter()
    try:
        for how, arg in plan:
            if how == "random":
                assert isinstance(arg, float)
                replica.start()
                deadline = replica.started_at + arg
                while time.monotonic() < deadline and replica.running():
                    time.sleep(0.01)
                assert replica.running(), f"replica exited on its own:\n{replica.tail()}"
                assert replica.kill() == -signal.SIGKILL
            else:
                assert isinstance(arg, str)
                replica.start(fault=arg)
                assert replica.proc is not None
                try:
                    rc = replica.proc.wait(timeout=20)
                    replica.exits.append(rc)
                except subprocess.TimeoutExpired:  # not reached: it counts as a random kill
                    rc = replica.kill()
                point = arg.split(":")[0]
                if f"FAULT {point}" in replica.log():
                    hits[point] += 1
                    assert rc == -signal.SIGKILL, f"{arg}: exit {rc}:\n{replica.tail()}"
        # All the windows were hit at least once (the point of the hooks).
        assert set(hits) == set(POINTS), f"crash points reached: {dict(hits)}"
        killed_fires = count_fires_since(url, 0)

        replica.start()
        replica.wait_running(30)
        since = time.time()
        wait_for("fires after the last restart", lambda: count_fires_since(url, since) >= 14, 30)
        rc = replica.terminate()
        assert rc == 0, f"exit status {rc} after SIGTERM:\n{replica.tail()}"

        behind = final_catch_up(url, wf_dir)
        engine = bootstrap(url)
        try:
            events = all_events(engine)
            logs = read_logs(engine, events)
            summary = check_decisions(logs)
            check_catch_up_rules(logs, timedelta(seconds=2))
            files = check_workflow_files(wf_dir, logs)
            compared = check_read_model(engine, events, tmp_path / "rebuilt.db")
        finally:
            engine.close()
        assert killed_fires > 0
        randoms = sorted(float(a) for h, a in plan if h == "random")
        say(
            f"[{kind}] {len(plan)} SIGKILLs: random at {randoms} s after start; hooks hit "
            f"{dict(hits)}; {killed_fires} fires made by killed processes"
        )
        say(
            f"[{kind}] {summary.describe()}; {files} Workflow files; "
            f"{len(leftover_temp_files(wf_dir))} temp files left; read model equals a rebuild "
            f"over {compared} events; at SIGTERM read model/dispatch were {behind} behind; "
            f"test took {time.monotonic() - t_test:.0f}s"
        )
    finally:
        replica.cleanup()


# ---------------------------------------------------------------------------- test 3


@pytest.mark.timeout(240)
def test_postgres_restart_under_running_service(tmp_path: Path) -> None:
    """One replica; its PostgreSQL is stopped for a few seconds and started again. Nothing is
    lost or fired twice, ticks missed while the store was down follow the catch-up rules, and
    the replica reconnects by itself (fires exist after the restart)."""
    t_test = time.monotonic()
    tolerance = timedelta(seconds=3)  # so that a few seconds down makes ticks missed
    outage = 6.0
    handle = pgserver.start_server()
    replica: Replica | None = None
    try:
        url = handle.url
        migrate(url)
        docs = [
            cron_manifest(f"pgr-{i}", "@every 2s", successfulJobsHistoryLimit=1000)
            for i in range(3)
        ]
        docs.append(
            cron_manifest(
                "pgr-deadline",
                "@every 2s",
                successfulJobsHistoryLimit=1000,
                startingDeadlineSeconds=60,
            )
        )
        manifest = write_manifests(tmp_path / "crons.yaml", docs)
        wf_dir = tmp_path / "workflows"
        replica = Replica(
            "solo",
            url,
            manifest,
            wf_dir,
            tmp_path,
            run_args=("--local-run-duration", "1s", "--late-tolerance", "3s"),
        )
        replica.start().wait_running()
        t0 = time.time()
        wait_for("fires before the restart", lambda: count_fires_since(url, t0) >= 8, 30)

        stopping_at = utcnow()
        stop_keeping_data(handle.datadir)
        # Down once the stop has returned: a fire committed while `pg_ctl` was starting (its
        # tick just after `stopping_at`) was committed to a store that still answered, and
        # counted as fired while it was down 4 fires in one run out of many.
        down_at = utcnow()
        time.sleep(outage)  # the outage itself: the store is gone, nothing to poll
        assert replica.running(), f"replica died with the store:\n{replica.tail()}"
        pgserver.start(handle.datadir)
        up_at = utcnow()
        say(f"PostgreSQL down {(up_at - stopping_at).total_seconds():.1f}s")

        wait_for(
            "fires after PostgreSQL came back (the replica must reconnect)",
            lambda: count_fires_since(url, up_at.timestamp()) >= 8,
            30,  # the default late tolerance: back before an on-time tick can be missed
            0.25,
        )
        recovered = utcnow()
        while utcnow() < up_at + timedelta(seconds=10):
            time.sleep(0.2)
        rc = replica.terminate()
        assert rc == 0, f"exit status {rc} after SIGTERM:\n{replica.tail()}"

        behind = final_catch_up(url, wf_dir)
        engine = bootstrap(url)
        try:
            events = all_events(engine)
            logs = read_logs(engine, events)
            summary = check_decisions(logs)
            check_workflow_files(wf_dir, logs)
            check_read_model(engine, events, tmp_path / "rebuilt.db")
        finally:
            engine.close()

        check_catch_up_rules(logs, tolerance)
        after_up = sum(1 for lg in logs.values() for f in lg.fires if f.fired_at > up_at)
        during = [
            f.workflow for lg in logs.values() for f in lg.fires if down_at < f.fired_at < up_at
        ]
        assert not during, f"fired while the store was down: {during}"
        missed_in_outage = sum(
            s.count for lg in logs.values() for s in lg.skips if s.last >= stopping_at
        )
        assert after_up > 0, "no fire after PostgreSQL came back"
        assert missed_in_outage > 0, "the outage made no tick miss: the test proves nothing"
        first_after = min(
            min((f.fired_at for f in log.fires if f.fired_at > up_at), default=recovered)
            for log in logs.values()
        )
        say(
            f"restart: first decision {(first_after - up_at).total_seconds():.1f}s after "
            f"PostgreSQL was back; {missed_in_outage} ticks missed in the outage; "
            f"catch-up behind read model/dispatch {behind}; {summary.describe()}; "
            f"stats {replica.stats()}; test took {time.monotonic() - t_test:.0f}s"
        )
    finally:
        if replica is not None:
            replica.cleanup()
        handle.stop()


# ---------------------------------------------------------------------------- SIGTERM

BACKLOG_CRONS = 200
BACKLOG_RUNS_EACH = 50
SIGTERM_LIMIT = 10.0


@pytest.mark.timeout(180)
def test_sigterm_is_prompt_with_a_projection_backlog(pg_url: str, tmp_path: Path) -> None:
    """A replica that starts on a log with a backlog (10,000 manual runs requested while no
    replica ran) and gets SIGTERM while it projects it exits 0 within SIGTERM_LIMIT, well
    inside Kubernetes' 30 s grace period: 'SIGTERM finishes the batch in flight', not every
    batch there is. (The deterministic form of what test 1 shows under load.)"""
    migrate(pg_url)
    docs = [cron_manifest(f"b{i:03d}", "@every 1h") for i in range(BACKLOG_CRONS)]
    manifest = write_manifests(tmp_path / "crons.yaml", docs)
    engine = bootstrap(pg_url)
    try:
        now = utcnow()
        for doc in docs:
            cron_id, _ = engine.service.apply(parse_manifest(doc), now)
            agg = engine.service.load(cron_id)
            for k in range(BACKLOG_RUNS_EACH):
                agg.trigger(now, f"backlog-{k}")
            engine.service.save(agg)
        head = engine.service.recorder.max_notification_id() or 0
    finally:
        engine.close()
    assert head >= BACKLOG_CRONS * BACKLOG_RUNS_EACH

    replica = Replica("solo", pg_url, manifest, tmp_path / "workflows", tmp_path)
    try:
        replica.start().wait_running(30)
        wait_for(
            "the replica to start projecting the backlog",
            lambda: tracking_position(pg_url, "readmodel") > 0,
            30,
        )
        assert replica.running()
        sent = time.monotonic()
        assert replica.proc is not None
        replica.proc.send_signal(signal.SIGTERM)
        try:
            rc = replica.proc.wait(timeout=SIGTERM_LIMIT)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - sent
        say(f"SIGTERM with a backlog of {head} events: exit {rc} after {took:.1f}s")
        assert rc == 0, f"still running {SIGTERM_LIMIT:.0f}s after SIGTERM (backlog {head})"
    finally:
        replica.cleanup()


# ---------------------------------------------------------------------------- Forbid


@pytest.mark.timeout(120)
def test_forbid_ticks_due_together_after_a_restart(pg_url: str, tmp_path: Path) -> None:
    """A Forbid CronWorkflow without a deadline whose replica was down for a few seconds
    (less than the late tolerance): the first decision after the restart covers several
    ticks. Only the latest can be on time (issue 27, item 4); the older ones were not
    decided in time, so they are missed (DeadlineExceeded, never ConcurrencyForbid: issue 21),
    and no decision starts more than one run."""
    migrate(pg_url)
    manifest = write_manifests(
        tmp_path / "crons.yaml",
        [
            cron_manifest(
                "forbid", "@every 1s", concurrencyPolicy="Forbid", successfulJobsHistoryLimit=1000
            )
        ],
    )
    replica = Replica("solo", pg_url, manifest, tmp_path / "workflows", tmp_path)
    try:
        replica.start().wait_running(30)
        wait_for("two decisions", lambda: count_fires_since(pg_url, 0) >= 2, 30)
        assert replica.kill() == -signal.SIGKILL
        time.sleep(2.5)  # down: ticks come due meanwhile (well inside the 30 s tolerance)
        restarted = time.time()
        replica.start().wait_running(30)

        def decided_after_restart() -> bool:
            engine = bootstrap(pg_url)
            try:
                logs = read_logs(engine)
            finally:
                engine.close()
            return any(
                t.timestamp() > restarted for lg in logs.values() for t in lg.decision_times()
            )

        wait_for("a decision after the restart", decided_after_restart, 30)
        assert replica.terminate() == 0, replica.tail()
        engine = bootstrap(pg_url)
        try:
            logs = read_logs(engine)
        finally:
            engine.close()
        summary = check_decisions(logs)
        say(f"Forbid after a restart: {summary.describe()}")
        reasons = summary.skipped_ticks_by_reason
        assert "DeadlineExceeded" in reasons, f"skip reasons {dict(reasons)}"
        assert set(reasons) <= {"DeadlineExceeded", "ConcurrencyForbid"}, dict(reasons)
        for lg in logs.values():
            at_once = Counter(f.fired_at for f in lg.fires)
            assert max(at_once.values()) == 1, "one decision started more than one run"
    finally:
        replica.cleanup()
