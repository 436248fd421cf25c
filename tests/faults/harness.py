"""Helpers for tests/e2e/test_faults.py: replicas as real OS processes, and the checks that read
what they left behind (the event log, the read model, the Workflow files).

The checks derive everything they expect from the log itself and from first principles
(an `@every P` CronWorkflow created at C ticks at C + k*P, docs/design.md section 4), never from the
scheduler's own arithmetic, so a scheduler bug cannot hide behind the same bug in the oracle.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import yaml
from eventsourcing.persistence import Tracking

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.infrastructure.readside.model import ReadModel
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.service import event_type
from cronsource.projections.dispatch import ANNOTATION_SCHEDULED
from cronsource.projections.readmodel import (
    AggregateFollower,
    ReadModelProjection,
    rfc3339,
    status_row,
)

ROOT = Path(__file__).resolve().parents[2]
CRASHY_RUN = Path(__file__).resolve().with_name("crashy_run.py")
NAMESPACE = "default"

T = TypeVar("T")

try:  # libyaml makes reading thousands of Workflow files cheap
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


def cronsource_bin() -> str:
    """The console script of the interpreter running the tests (the project's virtualenv)."""
    candidate = Path(sys.executable).with_name("cronsource")
    if candidate.exists():
        return str(candidate)
    return str(ROOT / ".venv" / "bin" / "cronsource")


def utcnow() -> datetime:
    return datetime.now(UTC)


def wait_for(what: str, probe: Callable[[], T], timeout: float, interval: float = 0.1) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = probe()
            if value:
                return value
        except Exception as e:  # the store may be restarting: keep polling
            last_error = e
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}"
                + (f" (last error: {last_error!r})" if last_error else "")
            )
        time.sleep(interval)


# ------------------------------------------------------------------------------ manifests


def cron_manifest(name: str, schedule: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedules": [schedule],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }


def write_manifests(path: Path, docs: Iterable[dict[str, Any]]) -> Path:
    """One multi-document YAML file, as `cronsource run FILE` reads it."""
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return path


def migrate(url: str) -> None:
    out = subprocess.run(
        [cronsource_bin(), "--store", url, "migrate"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, f"migrate failed: {out.stderr}"


# ------------------------------------------------------------------------------ processes


@dataclass
class Replica:
    """One `cronsource run` process (through tests/faults/crashy_run.py, which is the real CLI
    plus optional crash hooks and a stats file written at a clean exit)."""

    name: str
    store: str
    manifest: Path
    workflows_dir: Path
    log_dir: Path
    run_args: tuple[str, ...] = ("--local-run-duration", "1s")
    #: More environment for the process (the stall hooks of crashy_run.py).
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    generation: int = 0
    started_at: float = 0.0
    exits: list[int | None] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.{self.generation}.log"

    @property
    def stats_path(self) -> Path:
        return self.log_dir / f"{self.name}.{self.generation}.stats.json"

    def start(self, fault: str | None = None) -> Replica:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} still running"
        self.generation += 1
        env = dict(os.environ)
        env.pop("CRONSOURCE_FAULT", None)
        env["PGAPPNAME"] = self.name  # lets the test see which replica holds which lock
        env["CRONSOURCE_FAULT_STATS"] = str(self.stats_path)
        env["PYTHONUNBUFFERED"] = "1"
        if fault:
            env["CRONSOURCE_FAULT"] = fault
        env.update(self.env)
        argv = [
            sys.executable,
            str(CRASHY_RUN),
            "--store",
            self.store,
            "run",
            str(self.manifest),
            "--workflows-dir",
            str(self.workflows_dir),
            *self.run_args,
        ]
        log = open(self.log_path, "wb")  # the child writes it; our handle closes below
        try:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT), env=env
            )
        finally:
            log.close()
        self.started_at = time.monotonic()
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_running(self, timeout: float = 60.0) -> None:
        """Until the scheduler loop runs (the CLI prints 'cronsource running')."""

        def probe() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}"
                )
            return "cronsource running" in self.log()

        wait_for(f"{self.name} to run", probe, timeout, 0.05)

    def kill(self) -> int | None:
        """SIGKILL, then reap. Returns the exit status (-9 when the signal killed it)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        rc = self.proc.wait(timeout=30)
        self.exits.append(rc)
        return rc

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for a clean exit; SIGKILL (and fail) if it does not come."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"{self.name} did not exit within {timeout}s of SIGTERM:\n{self.tail()}"
            ) from None
        self.exits.append(rc)
        return rc

    def stopped(self) -> bool:
        """Whether the process is stopped by a signal (state T in /proc)."""
        assert self.proc is not None
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except FileNotFoundError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def probe_url(self) -> str:
        """The probe server's base URL (`run --http-port 0` prints the port it got)."""
        for line in self.log().splitlines():
            if line.startswith("cronsource probes on "):
                return line.removeprefix("cronsource probes on ").strip()
        raise AssertionError(f"{self.name} has no probe server:\n{self.tail()}")

    def metrics(self) -> dict[str, float]:
        """This replica's /metrics, unlabelled samples by name (labelled: name{k=v,...})."""
        import urllib.request

        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(self.probe_url() + "/metrics", timeout=5) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return out

    def stats(self) -> dict[str, int]:
        try:
            return dict(json.loads(self.stats_path.read_text()))
        except (FileNotFoundError, ValueError):
            return {}

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def cleanup(self) -> None:
        """Never leave a process behind, whatever failed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


# ------------------------------------------------------------------------------ the log


@dataclass(frozen=True)
class Fire:
    notification_id: int
    scheduled_time: datetime
    fired_at: datetime
    workflow: str
    trigger: str


@dataclass(frozen=True)
class Skip:
    notification_id: int
    first: datetime
    last: datetime
    count: int
    reason: str
    at: datetime


@dataclass
class CronLog:
    """One CronWorkflow's history as read from the event log."""

    cron_id: str
    name: str
    owner_uid: str
    created: datetime
    period: timedelta
    spec: dict[str, Any]
    fires: list[Fire] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    pruned: set[str] = field(default_factory=set)
    #: RunNotStarted events by Workflow name (a fire whose Workflow was not created by its
    #: starting deadline: it must have no Workflow, and be recorded once).
    not_started: Counter[str] = field(default_factory=Counter)
    event_types: Counter[str] = field(default_factory=Counter)

    @property
    def deadline(self) -> timedelta | None:
        d = self.spec.get("startingDeadlineSeconds")
        return timedelta(seconds=d) if d else None

    def tick_index(self, t: datetime) -> int:
        """k for t = created + k*period; fails if t is not a tick of this schedule."""
        k, rest = divmod(t - self.created, self.period)
        assert rest == timedelta(0) and k >= 1, (
            f"{self.name}: {t.isoformat()} is not a tick of @every {self.period} from "
            f"{self.created.isoformat()}"
        )
        return int(k)

    def decision_times(self) -> list[datetime]:
        """When each decision was made (commit order), for take-over gaps."""
        return sorted(
            [f.fired_at for f in self.fires if f.trigger != "manual"] + [s.at for s in self.skips]
        )


def every_period(spec: dict[str, Any]) -> timedelta:
    (schedule,) = spec.get("schedules") or [spec["schedule"]]
    head, _, dur = schedule.partition(" ")
    assert head == "@every" and dur.endswith("s") and dur[:-1].isdigit(), schedule
    return timedelta(seconds=int(dur[:-1]))


def all_events(engine: Engine) -> list[tuple[int, Any]]:
    """(notification id, domain event) of the whole log, in append order."""
    svc = engine.service
    out: list[tuple[int, Any]] = []
    start = 1
    while True:
        notes = svc.recorder.select_notifications(start=start, limit=1000)
        out += [(n.id, svc.mapper.to_domain_event(n)) for n in notes]
        if len(notes) < 1000:
            return out
        start = notes[-1].id + 1


def read_logs(engine: Engine, events: list[tuple[int, Any]] | None = None) -> dict[str, CronLog]:
    events = all_events(engine) if events is None else events
    logs: dict[str, CronLog] = {}
    for nid, ev in events:
        cid = str(ev.originator_id)
        kind = event_type(ev)
        if kind == "CronWorkflowCreated":
            agg = engine.service.repository.get(ev.originator_id, version=1)
            logs[cid] = CronLog(
                cron_id=cid,
                name=agg.name,
                owner_uid=agg.uid or cid,
                # The @every anchor: the creation time to the second, as robfig's Every.
                created=agg.baseline.replace(microsecond=0),
                period=every_period(agg.spec),
                spec=agg.spec,
            )
        log = logs[cid]
        log.event_types[kind] += 1
        if kind == "ScheduleFired":
            log.fires.append(
                Fire(nid, ev.scheduled_time, ev.fired_at, ev.workflow_name, ev.trigger)
            )
        elif kind == "RunRecovered":
            # A run whose fire the log lost (a failover): the recovery is its tick's
            # decision and its Workflow's event (adapters/runtime/recovery.py).
            trigger = "recovered" if ev.trigger in ("schedule", "catchup") else ev.trigger
            log.fires.append(Fire(nid, ev.scheduled_time, ev.timestamp, ev.workflow_name, trigger))
        elif kind == "ScheduleSkipped":
            log.skips.append(
                Skip(nid, ev.scheduled_time, ev.last_scheduled_time, ev.count, ev.reason, ev.at)
            )
        elif kind == "HistoryPruned":
            log.pruned.update(ev.workflow_names)
        elif kind == "RunNotStarted":
            log.not_started[ev.workflow_name] += 1
        elif kind == "SpecUpdated":
            assert not ev.reset_baseline, f"{log.name}: unexpected schedule change"
    return logs


@dataclass
class Summary:
    crons: int = 0
    fires: int = 0
    fires_by_trigger: Counter[str] = field(default_factory=Counter)
    skipped_ticks_by_reason: Counter[str] = field(default_factory=Counter)
    skip_events_by_reason: Counter[str] = field(default_factory=Counter)
    lateness: list[float] = field(default_factory=list)  # seconds, schedule fires
    events_by_type: Counter[str] = field(default_factory=Counter)
    last_decided: dict[str, datetime] = field(default_factory=dict)

    def percentile(self, q: float) -> float:
        if not self.lateness:
            return float("nan")
        xs = sorted(self.lateness)
        return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]

    def describe(self) -> str:
        late = (
            f"lateness p50 {self.percentile(0.5) * 1000:.0f} ms, p99 "
            f"{self.percentile(0.99) * 1000:.0f} ms, max {max(self.lateness) * 1000:.0f} ms"
            f" (mean {statistics.fmean(self.lateness) * 1000:.0f} ms)"
            if self.lateness
            else "no fires"
        )
        return (
            f"{self.crons} CronWorkflows, {self.fires} fires {dict(self.fires_by_trigger)}, "
            f"skipped ticks {dict(self.skipped_ticks_by_reason)} in skip events "
            f"{dict(self.skip_events_by_reason)}; {late}; events {dict(self.events_by_type)}"
        )


def check_decisions(logs: dict[str, CronLog]) -> Summary:
    """Invariants 1 and 3 on the log: no tick fired twice; every tick from creation to the
    last decided one has exactly one decision (a fire, or inside exactly one skip range,
    whose `count` matches the ticks it covers); nothing decided that is not a tick."""
    s = Summary(crons=len(logs))
    problems: list[str] = []
    for log in logs.values():
        s.events_by_type.update(log.event_types)
        decided: Counter[int] = Counter()
        fired: Counter[int] = Counter()
        for f in log.fires:
            s.fires += 1
            s.fires_by_trigger[f.trigger] += 1
            if f.trigger == "manual":
                continue
            k = log.tick_index(f.scheduled_time)
            fired[k] += 1
            decided[k] += 1
            expected_name = f"{log.name}-{int(f.scheduled_time.timestamp())}"
            if f.workflow != expected_name:
                problems.append(f"{log.name}: fire of {f.scheduled_time} named {f.workflow}")
            if f.trigger == "schedule":
                s.lateness.append((f.fired_at - f.scheduled_time).total_seconds())
        for sk in log.skips:
            s.skip_events_by_reason[sk.reason] += 1
            s.skipped_ticks_by_reason[sk.reason] += sk.count
            k0, k1 = log.tick_index(sk.first), log.tick_index(sk.last)
            if k1 - k0 + 1 != sk.count:
                problems.append(
                    f"{log.name}: skip {sk.first}..{sk.last} covers {k1 - k0 + 1} ticks, "
                    f"count says {sk.count}"
                )
            for k in range(k0, k1 + 1):
                decided[k] += 1
        twice = sorted(k for k, n in fired.items() if n > 1)
        if twice:
            problems.append(
                f"{log.name}: ticks fired more than once: "
                + ", ".join(str(log.created + k * log.period) for k in twice[:5])
            )
        if decided:
            last = max(decided)
            s.last_decided[log.cron_id] = log.created + last * log.period
            lost = [k for k in range(1, last + 1) if decided[k] == 0]
            dup = [k for k in range(1, last + 1) if decided[k] > 1]
            if lost:
                problems.append(
                    f"{log.name}: {len(lost)} ticks without a decision, first "
                    f"{log.created + lost[0] * log.period}"
                )
            if dup:
                problems.append(
                    f"{log.name}: {len(dup)} ticks with more than one decision, first "
                    f"{log.created + dup[0] * log.period}"
                )
    assert not problems, "decision invariants broken:\n" + "\n".join(problems[:30])
    return s


def check_stream_versions(events: list[tuple[int, Any]]) -> int:
    """No stream has a gap: each one's versions are 1, 2, ..., n in log order (a save on top
    of versions the log does not hold would leave one). Returns the streams checked."""
    versions: dict[Any, list[int]] = defaultdict(list)
    for _, ev in events:
        versions[ev.originator_id].append(ev.originator_version)
    gaps = {str(cid): vs for cid, vs in versions.items() if vs != list(range(1, len(vs) + 1))}
    assert not gaps, f"{len(gaps)} streams with version gaps, e.g. {next(iter(gaps.items()))}"
    return len(versions)


def workflow_files(directory: Path) -> dict[str, Path]:
    ns = directory / NAMESPACE
    return {p.stem: p for p in ns.glob("*.json")} if ns.is_dir() else {}


def leftover_temp_files(directory: Path) -> list[Path]:
    ns = directory / NAMESPACE
    return sorted(ns.glob(".tmp-*")) if ns.is_dir() else []


def check_workflow_files(directory: Path, logs: dict[str, CronLog]) -> int:
    """Invariant 4 on the local target: every ScheduleFired has exactly one Workflow file
    (files are named by the Workflow, so 'exactly one' is: present, ours, for that tick, and
    no file without a fire) unless a HistoryPruned event deleted it, or exactly one
    RunNotStarted event and no file at all (never both). Returns files checked."""
    files = workflow_files(directory)
    problems: list[str] = []
    expected: dict[str, tuple[CronLog, Fire]] = {}
    for log in logs.values():
        for f in log.fires:
            if f.workflow in expected:
                problems.append(f"workflow name {f.workflow} fired twice")
            expected[f.workflow] = (log, f)
    for name, (log, f) in expected.items():
        path = files.get(name)
        if name in log.not_started:
            if log.not_started[name] != 1:
                problems.append(f"{name}: {log.not_started[name]} RunNotStarted events")
            if path is not None:
                problems.append(f"{name}: recorded as not started, and its file exists")
            continue
        if name in log.pruned:
            if path is not None:
                problems.append(f"{name}: pruned by HistoryPruned but its file is still there")
            continue
        if path is None:
            problems.append(f"{name}: ScheduleFired (notification {f.notification_id}) has no file")
            continue
        wf = yaml.load(path.read_text(), Loader=_Loader)
        meta = wf["metadata"]
        if meta["annotations"].get(ANNOTATION_SCHEDULED) != rfc3339(f.scheduled_time):
            problems.append(f"{name}: file is for another scheduled time")
        if log.owner_uid not in {o["uid"] for o in meta["ownerReferences"]}:
            problems.append(f"{name}: file is not owned by {log.name}")
    unfired = sorted(n for lg in logs.values() for n in lg.not_started if n not in expected)
    if unfired:
        problems.append(f"RunNotStarted without a ScheduleFired: {unfired[:5]}")
    extra = sorted(set(files) - set(expected))
    if extra:
        problems.append(f"{len(extra)} Workflow files without a ScheduleFired: {extra[:5]}")
    assert not problems, "Workflow file invariant broken:\n" + "\n".join(problems[:30])
    return len(files)


def final_catch_up(url: str, workflows_dir: Path, read_model: bool = True) -> tuple[int, int]:
    """What a restarted replica's projections do first: bring the read model and the
    dispatcher (a local target on the same directory) up to the end of the log; with
    `read_model=False` only the dispatcher (the Workflow files), which is all some checks need.
    Returns (events the read model was behind, events the dispatcher was behind)."""
    engine = bootstrap(url, target=LocalTarget(workflows_dir))
    try:
        svc = engine.service
        head = svc.recorder.max_notification_id() or 0
        behind_rm = head - (engine.view.max_tracking_id(svc.name, "readmodel") or 0)
        behind_dispatch = head - (engine.view.max_tracking_id(svc.name, "dispatch") or 0)
        if read_model:
            engine.projector.catch_up()
        else:
            dispatcher = engine.dispatcher
            assert dispatcher is not None
            now = utcnow()
            start = (engine.view.max_tracking_id(svc.name, "dispatch") or 0) + 1
            while True:
                notes = svc.recorder.select_notifications(start=start, limit=1000)
                dispatcher.process_batch(
                    [(svc.mapper.to_domain_event(n), Tracking(svc.name, n.id)) for n in notes], now
                )
                if len(notes) < 1000:
                    break
                start = notes[-1].id + 1
        return behind_rm, behind_dispatch
    finally:
        engine.close()


def check_read_model(engine: Engine, events: list[tuple[int, Any]], scratch: Path) -> int:
    """The read model built incrementally (through crashes) equals a rebuild from the log:
    every event into a new, empty SQLite read model through a fresh projection; then the
    status rows, the audit rows and the tracking position must be identical. Also each
    status row equals `status_row` of the aggregate loaded now. Returns events compared."""
    svc = engine.service
    head = events[-1][0] if events else 0
    assert engine.view.max_tracking_id(svc.name, "readmodel") == head, (
        "read model not caught up to the end of the log"
    )
    rebuilt = ReadModel.sqlite(str(scratch))
    try:
        rebuilt.create_tables()
        follower = AggregateFollower(
            lambda cid, v: svc.repository.get(cid, version=v)  # type: ignore[no-any-return]
        )
        projection = ReadModelProjection(rebuilt, follower)
        for i in range(0, len(events), 500):
            projection.process_batch(
                [(ev, Tracking(svc.name, nid)) for nid, ev in events[i : i + 500]]
            )
        assert rebuilt.max_tracking_id(svc.name, "readmodel") == head

        have = engine.view.audit()
        want = rebuilt.audit()
        assert [r.notification_id for r in have] == [nid for nid, _ in events], (
            "audit rows are not one per notification: missing "
            f"{sorted({nid for nid, _ in events} - {r.notification_id for r in have})[:10]}, "
            f"extra {sorted({r.notification_id for r in have} - {n for n, _ in events})[:10]}"
        )
        diff = [(a, b) for a, b in zip(have, want, strict=True) if a != b]
        assert not diff, f"{len(diff)} audit rows differ from a rebuild, first: {diff[0]}"

        have_s = engine.view.statuses(include_deleted=True)
        want_s = rebuilt.statuses(include_deleted=True)
        assert have_s == want_s, "status rows differ from a rebuild: " + str(
            [(a, b) for a, b in zip(have_s, want_s, strict=False) if a != b][:1]
        )
        for row in have_s:
            agg = svc.repository.get(UUID(row.cron_id))
            sr = status_row(agg)
            assert row == sr, f"status row of {row.name} differs from its aggregate"
        return len(events)
    finally:
        rebuilt.close()


# ------------------------------------------------------------------------------ shard locks

SHARD_LOCK_CLASS = 0x6374  # adapters/infrastructure/shards.py _SHARD_CLASS
PROJECTOR_LOCK_CLASS = 0x6375  # adapters/infrastructure/shards.py _PROJECTOR_CLASS


@dataclass(frozen=True)
class Locks:
    """Who holds which advisory lock, by replica name (PGAPPNAME of its connections)."""

    shards: dict[str, frozenset[int]]
    projector: str | None

    def holder_of(self, shard: int) -> str | None:
        return next((r for r, owned in self.shards.items() if shard in owned), None)

    @property
    def owned(self) -> int:
        return sum(len(v) for v in self.shards.values())


def advisory_locks(url: str) -> Locks:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT a.application_name, l.classid::int, l.objid::int FROM pg_locks l"
            " JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()
    shards: dict[str, set[int]] = defaultdict(set)
    projector = None
    for app, cls, obj in rows:
        if cls == SHARD_LOCK_CLASS:
            shards[app].add(obj)
        elif cls == PROJECTOR_LOCK_CLASS:
            projector = app
    return Locks({k: frozenset(v) for k, v in shards.items()}, projector)


def tracking_position(url: str, projection: str) -> int:
    """A projection's position in the log, read straight from the read-model table."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT notification_id FROM cronsource_tracking WHERE projection = %s",
            (projection,),
        ).fetchone()
    return int(row[0]) if row else 0


def check_catch_up_rules(logs: dict[str, CronLog], tolerance: timedelta) -> None:
    """Each decision follows docs/design.md section 4 for the time it was made: a tick decided
    less than `tolerance` after it fires on schedule; a later one is missed: without a
    deadline it is skipped (DeadlineExceeded); with one, the latest tick still within it
    runs as a catch-up and older ones within it are CatchupLimit; ConcurrencyForbid only
    under Forbid. (Suspension, stop and `when` are not used by these tests.)"""
    problems: list[str] = []
    for log in logs.values():
        dl = log.deadline
        forbid = log.spec.get("concurrencyPolicy") == "Forbid"
        decided_at: dict[datetime, list[datetime]] = defaultdict(list)  # decision time -> ticks
        for f in log.fires:
            decided_at[f.fired_at].append(f.scheduled_time)
        for sk in log.skips:
            decided_at[sk.at].append(sk.last)
        for f in log.fires:
            late = f.fired_at - f.scheduled_time
            if f.trigger == "schedule" and late >= tolerance:
                problems.append(f"{f.workflow}: fired on schedule {late} late")
            elif f.trigger == "catchup" and (dl is None or not tolerance <= late < dl):
                problems.append(f"{f.workflow}: catch-up {late} late, deadline {dl}")
            elif f.trigger not in ("schedule", "catchup"):
                problems.append(f"{f.workflow}: unexpected trigger {f.trigger}")
        for s in log.skips:
            where = f"{log.name}: {s.reason} {s.first}..{s.last} decided at {s.at}"
            # Only the latest due tick can be on time (issue 27, item 4): a skip of ticks less
            # than the tolerance late is right when a later tick was decided with it.
            superseded = any(t > s.last for t in decided_at.get(s.at, ()))
            if s.reason == "DeadlineExceeded" and s.at - s.last < tolerance and not superseded:
                problems.append(f"{where}: the last tick was not late")
            if (
                s.reason == "CatchupLimit"
                and not forbid
                and s.at - s.last < tolerance
                and not superseded
            ):
                problems.append(f"{where}: the last tick was not late")
            if s.reason == "DeadlineExceeded" and dl is not None and s.at < s.last + dl:
                problems.append(f"{where}: within the deadline {dl}")
            elif s.reason == "CatchupLimit" and forbid:
                # "When several ticks are due at once, only the latest may run" (Forbid, since
                # 22da915): the older ones come out as CatchupLimit even on time and without a
                # deadline. test_forbid_ticks_due_together_after_a_restart pins the reason.
                if not any(t > s.last for t in decided_at.get(s.at, ())):
                    problems.append(f"{where}: Forbid skip with no later tick decided with it")
            elif s.reason == "CatchupLimit":
                # A later tick ran with it: a catch-up within the deadline, or (issue 27,
                # item 4) the latest due tick, on time.
                later = [
                    f
                    for f in log.fires
                    if f.trigger in ("catchup", "schedule")
                    and f.fired_at == s.at
                    and f.scheduled_time > s.last
                ]
                if dl is None or s.at >= s.first + dl or not later:
                    problems.append(f"{where}: no later fire within the deadline")
            elif s.reason == "ConcurrencyForbid":
                if log.spec.get("concurrencyPolicy") != "Forbid":
                    problems.append(f"{where}: policy is not Forbid")
            elif s.reason != "DeadlineExceeded":
                problems.append(f"{where}: unexpected reason")
    assert not problems, "catch-up rules broken:\n" + "\n".join(problems[:30])


def stop_keeping_data(datadir: str) -> None:
    """Stop a tests/pgserver.py server but keep its data directory, so that
    `pgserver.start(datadir)` brings the same database back on the same port (the handle's
    `restart()` does both at once, with no time in between for ticks to be missed)."""
    from tests import pgserver

    pgserver._pg_ctl_stop(pgserver.find_bindir(), datadir, pgserver.server_user())


# ------------------------------------------------------------------------------ a full disk


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A small file system of its own at `where` (a tmpfs: the suite runs as root, as CI does),
    readable by every user (a PostgreSQL tablespace on it is written by the server's user);
    unmounted after, lazily, so that a process that outlived its test cannot keep it."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"mounting a tmpfs needs root: {done.stderr}"
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill_disk(disk: Path) -> Path:
    """Write a file until `disk` has not one byte left (a page's worth of room would let a
    store commit a little more); returns it (removing it frees the disk)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)
    return filler
