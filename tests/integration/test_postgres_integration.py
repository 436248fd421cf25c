"""Integration tests against a real PostgreSQL server (tests/conftest.py starts one).

What is pinned here is what only a real database can show: tables created once by `migrate`
and replicas running with CREATE_TABLE=n; the version check rejecting a stale writer over a
real connection (the seed race of argoproj/argo-workflows#4558), between services in one
process and between OS processes; the batch commit and its fallback; and the SQL read model's
exactly-once tracking. Time is always an argument: nothing here reads a clock to decide.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from eventsourcing.postgres import PostgresFactory
from eventsourcing.utils import resolve_topic, strtobool

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.infrastructure.readside import views
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.infrastructure.store.recorders import StaleAppend
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.manifest import CronWorkflowManifest, parse_manifest
from cronsource.domain.schedule import compile_schedule
from cronsource.domain.service import CronService, event_type
from cronsource.projections.readmodel import StatusRow, rfc3339
from tests.instants import T0

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "procs" / "decide_worker.py"
EVENT_TABLES = {"cronsource_events", "cronsource_snapshots"}
VIEW_TABLES = {
    "cronsource_status",
    "cronsource_audit",
    "cronsource_tracking",
    "cronsource_retention",
}
#: The replicas' leases (adapters/infrastructure/leases.py), made by `migrate` with the read model.
LEASE_TABLES = {"cronsource_leases"}
#: The audit's documented views (docs/audit.md), which information_schema.tables lists too.
AUDIT_VIEWS = set(views.VIEW_NAMES)


# ---------------------------------------------------------------------------- helpers


def manifest(name: str, schedule: str = "* * * * *", **spec: Any) -> CronWorkflowManifest:
    return parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "schedules": [schedule],
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
                **spec,
            },
        }
    )


def minute(k: int, seconds: int = 0) -> datetime:
    return T0 + timedelta(minutes=k, seconds=seconds)


def public_tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return {r[0] for r in rows}


def all_events(svc: CronService) -> list[Any]:
    """Every stored domain event, in notification (append) order."""
    out: list[Any] = []
    start = 1
    while True:
        notes = svc.recorder.select_notifications(start=start, limit=1000)
        out += [svc.mapper.to_domain_event(n) for n in notes]
        if len(notes) < 1000:
            return out
        start = notes[-1].id + 1


def fired_times(events: list[Any], cron_id: UUID) -> list[datetime]:
    """Scheduled times of the schedule/catch-up fires of one CronWorkflow, in log order."""
    return [
        e.scheduled_time
        for e in events
        if e.originator_id == cron_id
        and event_type(e) == "ScheduleFired"
        and e.trigger in ("schedule", "catchup")
    ]


def decisions(events: list[Any], agg: CronWorkflow) -> Counter[datetime]:
    """How many decisions (fires, and skipped ticks of skip ranges) each tick got."""
    tally: Counter[datetime] = Counter()
    for e in events:
        if e.originator_id != agg.id:
            continue
        kind = event_type(e)
        if kind == "ScheduleFired" and e.trigger in ("schedule", "catchup"):
            tally[e.scheduled_time] += 1
        elif kind == "ScheduleSkipped":
            ticks = list(
                agg.schedule.ticks_between(
                    e.scheduled_time - timedelta(microseconds=1), e.last_scheduled_time
                )
            )
            assert len(ticks) == e.count, f"skip range {e} does not hold {e.count} ticks"
            tally.update(ticks)
    return tally


def expected_ticks(schedule: str, after: datetime, until: datetime) -> list[datetime]:
    return list(compile_schedule([schedule]).ticks_between(after, until))


def status_of(engine: Engine, name: str) -> StatusRow:
    [row] = [s for s in engine.view.statuses() if s.name == name]
    return row


@pytest.fixture
def migrated(pg_url: str) -> str:
    """A fresh database with the event store and read-model tables created once."""
    migrate(StoreConfig.parse(pg_url))
    return pg_url


NewEngine = Callable[[], Engine]


@pytest.fixture
def engines(migrated: str) -> Iterator[NewEngine]:
    """Makes replica engines on the migrated database, all with CREATE_TABLE=n."""
    made: list[Engine] = []

    def new() -> Engine:
        made.append(bootstrap(migrated, create_tables=False))
        return made[-1]

    yield new
    for e in made:
        e.close()


# ---------------------------------------------------------------------------- migrate


def test_store_env_never_enables_db_functions() -> None:
    for url in (
        "postgresql://u:p@db.example:5433/cron",
        "postgres://u@db.example/cron?schema=sched",
    ):
        cfg = StoreConfig.parse(url)
        for create in (True, False):
            env = cfg.env(create_table=create)
            # Absent, or pinned off; never on (docs/design.md section 2).
            assert not strtobool(env.get("POSTGRES_ENABLE_DB_FUNCTIONS") or "n"), env
            assert env["CREATE_TABLE"] == ("y" if create else "n")
            # eventsourcing's own PostgreSQL factory, given the URL's whole conninfo.
            factory = resolve_topic(env["PERSISTENCE_MODULE"])
            assert issubclass(factory, PostgresFactory), factory


def test_migrate_creates_tables_once_and_replicas_run_without_ddl(pg_url: str) -> None:
    cfg = StoreConfig.parse(pg_url)
    # A replica started before `migrate` creates nothing (CREATE_TABLE=n), and fails loudly.
    early = bootstrap(pg_url, create_tables=False)
    try:
        assert public_tables(pg_url) == set()
        with pytest.raises(Exception, match="cronsource_(events|snapshots)"):
            early.service.apply(manifest("early"), T0)
        assert public_tables(pg_url) == set()
    finally:
        early.close()

    migrate(cfg)
    assert public_tables(pg_url) == EVENT_TABLES | VIEW_TABLES | LEASE_TABLES | AUDIT_VIEWS
    with psycopg.connect(pg_url) as conn:
        oids = conn.execute(
            "SELECT relname, oid FROM pg_class WHERE relname LIKE 'cronsource%' ORDER BY 1"
        ).fetchall()
    migrate(cfg)  # idempotent: the same tables, not new ones
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert (
            conn.execute(
                "SELECT relname, oid FROM pg_class WHERE relname LIKE 'cronsource%' ORDER BY 1"
            ).fetchall()
            == oids
        )
        # From here on, log every DDL command run in this database.
        conn.execute("CREATE TABLE ddl_log (tag TEXT NOT NULL, at TIMESTAMPTZ DEFAULT now())")
        conn.execute(
            """CREATE FUNCTION log_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
               BEGIN INSERT INTO ddl_log (tag) VALUES (tg_tag); END $$"""
        )
        conn.execute(
            "CREATE EVENT TRIGGER cronsource_ddl_log ON ddl_command_start"
            " EXECUTE FUNCTION log_ddl()"
        )

    replicas = [bootstrap(pg_url, create_tables=False) for _ in range(3)]
    try:
        for r in replicas:
            env = r.service.env
            assert env.get("CREATE_TABLE") == "n"
            assert not strtobool(env.get("POSTGRES_ENABLE_DB_FUNCTIONS") or "n")
            assert r.service.recorder.datastore.enable_db_functions is False  # type: ignore[attr-defined]
        cron_id, what = replicas[0].service.apply(manifest("nightly", "30 2 * * *"), T0)
        assert what == "created"
        for k, r in enumerate(replicas):
            report = r.service.tick([cron_id], datetime(2026, 5, 5 + k, 2, 30, 5, tzinfo=UTC))
            assert report.fires == 1
            r.projector.catch_up()
        assert status_of(replicas[2], "nightly").status["lastScheduledTime"] == (
            "2026-05-07T02:30:00Z"
        )
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT tag FROM ddl_log").fetchall() == []
        # The check is live: an engine that does create tables is logged.
        bootstrap(pg_url, create_tables=True).close()
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT count(*) FROM ddl_log").fetchone()[0] > 0  # type: ignore[index]
    finally:
        for r in replicas:
            r.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP EVENT TRIGGER IF EXISTS cronsource_ddl_log")


def test_migrate_creates_the_schema_the_url_names(pg_url: str) -> None:
    """`?schema=NAME` of a schema that did not exist: migrate said it "does not exist", as a
    connection failure; it creates it, and a second migrate changes nothing."""
    sep = "&" if "?" in pg_url else "?"
    cfg = StoreConfig.parse(f"{pg_url}{sep}schema=made_by_migrate")
    migrate(cfg)
    migrate(cfg)
    with psycopg.connect(cfg.pg_conninfo) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.tables"
            " WHERE table_schema = 'made_by_migrate' AND table_name = 'cronsource_events'"
        ).fetchone()
    assert row == (1,)


def test_process_environment_cannot_enable_db_functions(
    migrated: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POSTGRES_ENABLE_DB_FUNCTIONS", "y")
    engine = bootstrap(migrated, create_tables=False)
    try:
        assert engine.service.recorder.datastore.enable_db_functions is False  # type: ignore[attr-defined]
    finally:
        engine.close()


def test_process_environment_cannot_move_the_event_store(
    migrated: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA elsewhere")
    monkeypatch.setenv("POSTGRES_SCHEMA", "elsewhere")
    engine = bootstrap(migrated, create_tables=False)
    try:
        engine.service.apply(manifest("a"), T0)
        with psycopg.connect(migrated) as conn:
            n = conn.execute("SELECT count(*) FROM public.cronsource_events").fetchone()
        assert n == (1,)
    finally:
        engine.close()


# ---------------------------------------------------------------------------- the seed race


def _spy_on_inserts(svc: CronService) -> list[BaseException]:
    """Record every exception the service's recorder raises on insert (the store's verdict)."""
    seen: list[BaseException] = []
    real = svc.recorder.insert_events

    def insert_events(*args: Any, **kwargs: Any) -> Any:
        try:
            return real(*args, **kwargs)
        except BaseException as exc:
            seen.append(exc)
            raise

    svc.recorder.insert_events = insert_events  # type: ignore[method-assign]
    return seen


def test_seed_race_second_commit_is_rejected_and_retry_fires_nothing(engines: NewEngine) -> None:
    """argoproj/argo-workflows#4558 over a real connection: two replicas decide the same due
    tick on the same state; the store takes one, refuses the other; one ScheduleFired."""
    e1, e2 = engines(), engines()
    s1, s2 = e1.service, e2.service
    cron_id, _ = s1.apply(manifest("seed"), T0)
    refused = {id(s1): _spy_on_inserts(s1), id(s2): _spy_on_inserts(s2)}
    last_seen: datetime | None = None
    last_view: str | None = None
    for k in range(1, 7):
        at = minute(k, seconds=3)
        tick = minute(k)
        first, second = (s1, s2) if k % 2 else (s2, s1)  # alternate the winner
        won = first.decide_batch([cron_id], at)
        lost = second.decide_batch([cron_id], at)
        for aggs in (won, lost):
            [agg] = aggs
            assert [type(e).__name__ for e in agg.pending_events] == ["ScheduleFired"]
            assert agg.pending_events[0].scheduled_time == tick  # type: ignore[attr-defined]
        n_before = len(all_events(s1))
        rejected_before = second.rejected_writes

        r1 = first.commit_batch(won, at)
        assert (r1.fires, r1.rejected) == (1, 0)
        r2 = second.commit_batch(lost, at)
        assert (r2.fires, r2.rejected) == (0, 1)
        assert second.rejected_writes == rejected_before + 1
        errors = refused[id(second)]
        assert len(errors) == 1 and isinstance(errors[0], StaleAppend), errors
        # The server refused it: the stream's last version in the log is the version the
        # lost save starts at (the winner wrote it), not the one before.
        top = s1.load(cron_id).version
        assert errors[0].stale == {cron_id: (top, top)}
        errors.clear()
        assert refused[id(first)] == []

        events = all_events(s1)
        assert len(events) == n_before + 1, "the retry recorded something"
        assert fired_times(events, cron_id).count(tick) == 1
        assert fired_times(events, cron_id) == [minute(i) for i in range(1, k + 1)]

        for svc in (s1, s2):
            lst = svc.load(cron_id).last_scheduled_time
            assert lst == tick
            assert last_seen is None or lst >= last_seen
        last_seen = tick
        for e in (e2, e1):
            e.projector.catch_up()
            shown = status_of(e, "seed").status["lastScheduledTime"]
            assert shown == rfc3339(tick)
            assert last_view is None or shown >= last_view
            last_view = shown
    assert s1.rejected_writes + s2.rejected_writes == 6


def test_stale_writer_behind_by_two_ticks_cannot_move_last_scheduled_time_back(
    engines: NewEngine,
) -> None:
    """The stale replica decided tick 1; meanwhile the other fired ticks 1 and 2. Its save is
    refused and its retry (still at tick 1's instant) finds nothing to do."""
    e1, e2 = engines(), engines()
    cron_id, _ = e1.service.apply(manifest("behind"), T0)
    stale = e2.service.decide_batch([cron_id], minute(1, 1))
    assert e1.service.tick([cron_id], minute(1, 1)).fires == 1
    assert e1.service.tick([cron_id], minute(2, 1)).fires == 1
    report = e2.service.commit_batch(stale, minute(1, 1))
    assert (report.fires, report.rejected) == (0, 1)
    assert e2.service.rejected_writes == 1
    events = all_events(e1.service)
    assert fired_times(events, cron_id) == [minute(1), minute(2)]
    assert e2.service.load(cron_id).last_scheduled_time == minute(2)
    assert report.next_due[cron_id] == minute(3)
    e2.projector.catch_up()
    assert status_of(e2, "behind").status["lastScheduledTime"] == rfc3339(minute(2))


# ---------------------------------------------------------------------------- processes


def _spawn_workers(
    url: str, ids: list[UUID], instants: list[datetime], n: int, mode: str, tmp: Path
) -> list[tuple[subprocess.Popen[str], Any]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    procs = []
    for i in range(n):
        err = open(tmp / f"worker{i}.err", "w+")  # closed by the caller
        argv = [
            sys.executable,
            str(WORKER),
            "--store",
            url,
            "--ids",
            ",".join(map(str, ids)),
            "--instants",
            ",".join(t.isoformat() for t in instants),
            "--mode",
            mode,
            "--name",
            f"w{i}",
        ]
        p = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=ROOT,
            env=env,
        )
        procs.append((p, err))
    return procs


def _expect(proc: subprocess.Popen[str], err: Any, key: str) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait()
        err.seek(0)
        raise AssertionError(f"worker exited {proc.returncode} before {key!r}:\n{err.read()}")
    msg: dict[str, Any] = json.loads(line)
    assert key in msg, msg
    return msg


def _go(procs: list[tuple[subprocess.Popen[str], Any]]) -> None:
    for p, _ in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


N_CRONS = 20
N_WORKERS = 4


def _cron_schedule(i: int) -> tuple[str, dict[str, Any]]:
    if i % 3 == 0:
        return "*/2 * * * *", {}
    if i % 3 == 1:  # runs never complete here, so after the first fire every tick is skipped
        return "* * * * *", {"concurrencyPolicy": "Forbid"}
    return "* * * * *", {}


@pytest.mark.parametrize("mode", ["lockstep", "free"])
def test_processes_race_on_the_same_ticks_and_each_tick_is_decided_once(
    engines: NewEngine, migrated: str, mode: str, tmp_path: Path
) -> None:
    """4 OS processes decide the same due ticks of the same 20 CronWorkflows at the same
    instants. `lockstep`: at every instant all decide before any commits (worst interleaving);
    `free`: started together, each loops over the instants with `svc.tick`."""
    admin = engines()
    aggs = {}
    for i in range(N_CRONS):
        schedule, spec = _cron_schedule(i)
        cron_id, _ = admin.service.apply(manifest(f"race-{i:02d}", schedule, **spec), T0)
        aggs[cron_id] = (schedule, admin.service.load(cron_id))
    ids = list(aggs)
    instants = [minute(k, seconds=k % 7) for k in range(1, 9)]

    procs = _spawn_workers(migrated, ids, instants, N_WORKERS, mode, tmp_path)
    try:
        for p, err in procs:
            _expect(p, err, "ready")
        started = time.perf_counter()
        _go(procs)  # the barrier: every worker is built and waiting; release them together
        if mode == "lockstep":
            for i in range(len(instants)):
                if i:
                    _go(procs)
                for p, err in procs:
                    assert _expect(p, err, "decided")["decided"] == i
                _go(procs)
                for p, err in procs:
                    assert _expect(p, err, "committed")["committed"] == i
        results = [_expect(p, err, "done") for p, err in procs]
        elapsed = time.perf_counter() - started
        for p, _ in procs:
            assert p.wait(timeout=30) == 0
    finally:
        for p, err in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            err.close()

    rejected = sum(r["rejected_writes"] for r in results)
    worker_fires = sum(r["fires"] for r in results)
    print(
        f"\n[{mode}] {N_WORKERS} processes x {N_CRONS} CronWorkflows x {len(instants)} instants:"
        f" rejected writes {rejected} (per worker {[r['rejected_writes'] for r in results]}),"
        f" {elapsed:.2f}s"
    )

    events = all_events(admin.service)
    total_fired = 0
    for cron_id, (schedule, agg) in aggs.items():
        fired = fired_times(events, cron_id)
        dup = [t for t, c in Counter(fired).items() if c > 1]
        assert not dup, f"{agg.name}: two ScheduleFired for {dup}"
        want = expected_ticks(schedule, T0, instants[-1])
        got = decisions(events, agg)
        assert dict(got) == dict.fromkeys(want, 1), f"{agg.name}: decisions {got}"
        total_fired += len(fired)
        final = admin.service.load(cron_id)
        assert final.last_scheduled_time == max(fired)
        assert final.decided_until == want[-1]
    # Every fire a worker reported was stored, and no stored fire went unreported.
    assert worker_fires == total_fired
    if mode == "lockstep":
        # Each instant: one batch wins, the other three are refused once and retry to no-ops.
        assert rejected == (N_WORKERS - 1) * len(instants)
    admin.projector.catch_up()
    for cron_id, (_, agg) in aggs.items():
        st = status_of(admin, agg.name)
        assert st.status["lastScheduledTime"] == rfc3339(max(fired_times(events, cron_id)))


# ---------------------------------------------------------------------------- batch commit


def _create_many(svc: CronService, n: int, prefix: str) -> list[UUID]:
    return [svc.apply(manifest(f"{prefix}-{i:03d}"), T0)[0] for i in range(n)]


def test_batch_commit_of_200_and_fallback_when_one_was_saved_first(engines: NewEngine) -> None:
    ea, eb = engines(), engines()
    sa, sb = ea.service, eb.service
    ids = _create_many(sa, 200, "batch")

    # One instant, 200 due: one decide, one commit, one transaction.
    at1 = minute(1, 2)
    decided = sa.decide_batch(ids, at1)
    started = time.perf_counter()
    report = sa.commit_batch(decided, at1)
    seconds = time.perf_counter() - started
    assert (report.saved, report.fires, report.rejected) == (200, 200, 0)
    print(f"\nbatch commit on PostgreSQL: 200 fires in {seconds * 1000:.1f} ms")

    # Next instant: another service saves one of them first; the batch is refused as a
    # whole and decided again as a batch on fresh state: one more transaction, not one per
    # CronWorkflow, and every CronWorkflow still fires exactly once.
    at2 = minute(2, 2)
    decided = sa.decide_batch(ids, at2)
    assert sb.tick([ids[123]], at2).fires == 1
    inserts = 0
    insert_events = sa.recorder.insert_events

    def counted(stored: Any, **kwargs: Any) -> Any:
        nonlocal inserts
        inserts += 1
        return insert_events(stored, **kwargs)

    sa.recorder.insert_events = counted  # type: ignore[method-assign]
    report = sa.commit_batch(decided, at2)
    assert inserts == 2
    assert report.rejected == 1 and sa.rejected_writes == 1
    assert report.fires == 199
    assert report.saved == 199  # the one saved first had nothing left to decide
    assert set(report.next_due) == set(ids)
    assert set(report.next_due.values()) == {minute(3)}

    events = all_events(sa)
    for cron_id in ids:
        assert fired_times(events, cron_id) == [minute(1), minute(2)]
    assert sum(1 for e in events if event_type(e) == "ScheduleFired") == 400


# ---------------------------------------------------------------------------- read model


def test_read_model_on_postgres_is_exactly_once_across_catch_ups_and_engines(
    engines: NewEngine, migrated: str
) -> None:
    e1 = engines()
    svc = e1.service
    a, _ = svc.apply(manifest("alpha"), T0)
    b, _ = svc.apply(manifest("beta", "*/5 * * * *"), T0)
    svc.tick([a, b], minute(1, 1))
    svc.tick([a, b], minute(5, 1))
    svc.suspend(b, minute(5, 40), by="alice", note="maintenance")
    # The 10:01 run finishes; the completion is observed at 10:05:30 (no tick is due then).
    svc.run_completed(a, "alpha-1777888860", "Succeeded", minute(2), minute(5, 30))
    n_events = len(all_events(svc))

    assert e1.projector.catch_up() == n_events
    alpha = status_of(e1, "alpha")
    assert alpha.status["lastScheduledTime"] == "2026-05-04T10:05:00Z"
    assert [r["name"] for r in alpha.status["active"]] == ["alpha-1777889100"]
    assert alpha.status["succeeded"] == 1
    assert alpha.next_due == minute(6)
    beta = status_of(e1, "beta")
    assert beta.status["lastScheduledTime"] == "2026-05-04T10:05:00Z"
    assert beta.spec["suspend"] is True and beta.next_due is None
    audit = e1.view.audit()
    assert len(audit) == n_events
    assert [r.notification_id for r in audit] == list(range(1, n_events + 1))
    assert [r.type for r in e1.view.audit(name="beta")] == [
        "CronWorkflowCreated",
        "ScheduleFired",
        "Suspended",
    ]
    assert e1.view.due(minute(6)) == [str(a)]

    # Again: nothing left to project, nothing written twice.
    assert e1.projector.catch_up() == 0
    assert len(e1.view.audit()) == n_events
    # Another engine (another replica) on the same database shares the tracking position.
    e2 = engines()
    assert e2.projector.catch_up() == 0
    assert len(e2.view.audit()) == n_events
    with psycopg.connect(migrated) as conn:
        assert conn.execute("SELECT count(*) FROM cronsource_audit").fetchone() == (n_events,)
        assert conn.execute(
            "SELECT notification_id FROM cronsource_tracking WHERE projection = 'readmodel'"
        ).fetchall() == [(n_events,)]

    # New events: whichever replica catches up first projects them, once.
    assert e2.service.tick([a], minute(6, 1)).fires == 1
    assert e2.projector.catch_up() == 1
    assert e1.projector.catch_up() == 0
    assert len(e1.view.audit()) == n_events + 1
    alpha = status_of(e1, "alpha")
    assert alpha.status["lastScheduledTime"] == "2026-05-04T10:06:00Z"
    assert alpha.version == e2.service.load(a).version


def test_two_replicas_catching_up_at_once_do_not_crash(engines: NewEngine, migrated: str) -> None:
    e1, e2 = engines(), engines()
    e1.service.apply(manifest("both"), T0)
    results: dict[str, Any] = {}

    def catch_up(name: str, engine: Engine) -> None:
        try:
            results[name] = engine.projector.catch_up()
        except BaseException as exc:
            results[name] = exc

    # Hold inserts into the tracking table (reads still pass) until both replicas have read
    # the old position and wait to write the new one: the interleaving made deterministic.
    blocker = psycopg.connect(migrated)
    try:
        blocker.execute("LOCK TABLE cronsource_tracking IN EXCLUSIVE MODE")
        threads = [
            threading.Thread(target=catch_up, args=(n, e)) for n, e in (("e1", e1), ("e2", e2))
        ]
        for t in threads:
            t.start()
        with psycopg.connect(migrated, autocommit=True) as mon:
            deadline = time.monotonic() + 30
            while mon.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted"
                " AND relation = 'cronsource_tracking'::regclass"
            ).fetchone() != (2,):
                assert time.monotonic() < deadline, f"replicas never blocked: {results}"
                assert all(t.is_alive() for t in threads), results
                time.sleep(0.01)
        blocker.rollback()
        for t in threads:
            t.join(timeout=30)
    finally:
        blocker.close()
    assert len(e1.view.audit()) == 1
    for name, result in results.items():
        if isinstance(result, BaseException):
            raise result
        assert result in (0, 1), (name, result)
