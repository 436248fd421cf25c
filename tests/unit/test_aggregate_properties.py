"""Property tests of the CronWorkflow aggregate: random commands, docs/design.md section 3.

A hypothesis state machine drives one or two CronWorkflows (random specs) through CronService
on the memory store: clock steps of 0 s to 3 h, ticks, suspend/resume, spec changes, run
results, vanished children, manual triggers, backfills, deletes, and races between two service
instances on one store. After every step `StreamAudit` replays the new events of every stream
ever created and checks, from the log alone:

1. at most one ScheduleFired per (stream, scheduled_time) for schedule/catchup/backfill fires;
2. lastScheduledTime equals the latest schedule/catchup/buffer fire and never decreases;
3. every tick of the schedule between the baseline (creation or the last schedule change) and
   the last decided tick has exactly one decision, a fire or a place in one ScheduleSkipped
   range whose count is right, in tick order; a schedule change leaves no tick of the old
   schedule undecided; nothing runs while suspended and a resume runs at most one tick;
4. workflow names are unique per stream, `<name>-<unix seconds>` for non-manual fires, and a
   manual name is one no tick can take;
5b. (the pause after failures, issue 23 item 1) a CronWorkflow with
   `cronsource.io/pause-after-failures: "N"` pauses right after the run end that makes N in a
   row Failed/Error, naming exactly those N; nothing of its schedule runs while paused; its
   ticks are skipped as PausedAfterFailures only while paused or as ticks of a lifted pause;
   a resume or a FailureCountReset starts the count again;
5c. (buffered overlap, issue 23 item 4) with `cronsource.io/overlap` a tick that comes while
   a run is active waits (TickBuffered) or is skipped; at most the cap wait at once (1 for
   BufferOne); each waiting tick is decided once later, fired from the buffer (oldest first,
   never while a run is active) or skipped, and never fires twice;
6. a save computed on stale state is rejected and leaves no event behind: the log holds the
   winner's events, then only what the loser re-decided on fresh state.

Invariant 5 is about the Kubernetes status writer, not the log. Also from the log: Forbid never
starts a run while one is active, Replace names every run still active, history limits prune
the oldest finished runs by finish time, and after a tick at `now` a live CronWorkflow has
nothing undecided up to `now` unless Forbid with a deadline makes a tick wait.

The oracle for ticks is `compile_schedule` fed from the events' own spec and time stamps, not
the aggregate's state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from cronsource.domain.manifest import (
    CronWorkflowManifest,
    CronWorkflowSpec,
    parse_manifest,
    scheduling_options,
)
from cronsource.domain.schedule import CompiledSchedule, compile_schedule
from cronsource.domain.service import CronService, event_type

MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
NAMES = ("alpha", "beta")
#: Not on a minute boundary, so creation never coincides with a tick by construction.
START = datetime(2026, 5, 4, 9, 58, 17, tzinfo=UTC)
SCHEDULES = ("* * * * *", "*/5 * * * *", "0 * * * *", "@every 90s")
MICRO = timedelta(microseconds=1)

# Steps cluster around the late tolerance (30 s) and the schedules' periods, where the rules
# change their answer; the uniform part covers outages of up to 3 hours.
STEPS = st.one_of(
    st.sampled_from([0, 1, 29, 30, 31, 59, 60, 61, 89, 90, 91, 300, 600, 3600]),
    st.integers(min_value=0, max_value=3 * 3600),
).map(lambda s: timedelta(seconds=s))

SPECS = st.fixed_dictionaries(
    {
        "schedules": st.lists(st.sampled_from(SCHEDULES), min_size=1, max_size=2, unique=True),
        "concurrencyPolicy": st.sampled_from(["Allow", "Forbid", "Replace"]),
        "startingDeadlineSeconds": st.sampled_from([None, 0, 60, 600]),
        "suspend": st.sampled_from([False, False, False, True]),
    },
    optional={
        "successfulJobsHistoryLimit": st.integers(0, 3),
        "failedJobsHistoryLimit": st.integers(0, 2),
        "stopStrategy": st.just({"expression": "cronworkflow.failed >= 3"}),
        "when": st.sampled_from(
            [
                "cronworkflow.succeeded < 4",
                "cronworkflow.lastScheduledTime == nil || "
                "(now() - cronworkflow.lastScheduledTime).Seconds() > 200",
            ]
        ),
    },
)
ANNOTATIONS = st.sampled_from(
    [
        {},
        {},
        {"cronsource.io/catchup-policy": "All", "cronsource.io/max-catchup": "2"},
        {"cronsource.io/pause-after-failures": "2"},
        {
            "cronsource.io/pause-after-failures": "1",
            "cronsource.io/pause-reset-on-spec-change": "true",
        },
        {"cronsource.io/overlap": "BufferOne"},
        {"cronsource.io/overlap": "BufferAll", "cronsource.io/max-buffer": "2"},
    ]
)
OVERLAP = "cronsource.io/overlap"


def manifest(name: str, spec: dict[str, Any], annotations: dict[str, str]) -> CronWorkflowManifest:
    if OVERLAP in annotations:
        # Buffered overlap is admitted with Forbid only.
        spec = {**spec, "concurrencyPolicy": "Forbid"}
    return parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {
                **{k: v for k, v in spec.items() if v is not None},
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
            },
        }
    )


def event_key(ev: Any) -> tuple[Any, ...]:
    """Everything an event says, to compare a stored event with one that was pending."""
    body = {k: v for k, v in vars(ev).items() if k != "originator_id"}
    return (event_type(ev), repr(sorted(body.items())))


# --------------------------------------------------------------------------- the log auditor


@dataclass
class StreamAudit:
    """Replays one stream's events as they are appended and checks the invariants.

    `cursor` is the latest decided tick of the current baseline period (or the baseline itself):
    every tick of `schedule` in (baseline, cursor] has exactly one decision.
    """

    stream: UUID
    version: int = 0
    cron: str = ""
    spec: CronWorkflowSpec | None = None
    schedule: CompiledSchedule | None = None
    cursor: datetime = START
    last_scheduled: datetime | None = None
    fired: set[datetime] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    suspended: bool = False
    stopped: bool = False
    deleted: bool = False
    resumed_at: datetime | None = None
    runs_since_resume: int = 0
    active: list[str] = field(default_factory=list)
    finished: list[tuple[str, str, datetime]] = field(default_factory=list)
    prune_due: bool = False
    replaced: set[str] = field(default_factory=set)
    # The pause after failures, from the events alone: the threshold the last spec set, the
    # failed runs in a row since the last success, resume or reset, whether it is paused, and
    # whether the last run end made a pause due (it must be the next change recorded).
    threshold: int | None = None
    streak: list[str] = field(default_factory=list)
    paused: bool = False
    pause_due: bool = False
    # Buffered overlap: the ticks waiting, oldest first, and the cap the last spec set.
    buffered: list[datetime] = field(default_factory=list)
    cap: int = 0

    def _compile(self, spec: dict[str, Any], annotations: dict[str, str], anchor: datetime) -> None:
        self.spec = CronWorkflowSpec.model_validate(spec)
        self.schedule = compile_schedule(
            self.spec.all_schedules,
            self.spec.timezone,
            scheduling_options(annotations).dst_policy,
            anchor=anchor,
        )

    def next_tick(self) -> datetime:
        assert self.schedule is not None
        return self.schedule.next_after(self.cursor)

    def feed(self, ev: Any) -> None:
        kind = event_type(ev)
        assert ev.originator_version == self.version + 1, "versions are contiguous"
        self.version = ev.originator_version
        assert not self.deleted, f"{kind} appended to a deleted stream"
        if kind != "HistoryPruned":
            self.check_history_limits()
        if self.pause_due and kind not in ("HistoryPruned", "Stopped", "PausedAfterFailures"):
            raise AssertionError(f"{kind} recorded where the pause after failures was due")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(ev)

    def _set_cap(self, annotations: dict[str, str]) -> None:
        opts = scheduling_options(annotations)
        self.cap = opts.max_buffer if opts.overlap else 0

    def _on_TickBuffered(self, ev: Any) -> None:
        t = ev.scheduled_time
        assert t == self.next_tick(), f"buffered {t}, next undecided is {self.next_tick()}"
        assert self.active, f"tick {t} buffered with no run active"
        assert not (self.suspended or self.stopped or self.paused)
        self.buffered.append(t)
        assert len(self.buffered) <= self.cap, f"{len(self.buffered)} wait, cap {self.cap}"
        self.cursor = t

    def _on_CronWorkflowCreated(self, ev: Any) -> None:
        assert self.version == 1
        self.cron = ev.name
        self._set_cap(ev.annotations)
        self.threshold = scheduling_options(ev.annotations).pause_after_failures
        self._compile(ev.spec, ev.annotations, ev.timestamp)
        self.cursor = ev.timestamp

    def _on_SpecUpdated(self, ev: Any) -> None:
        self._set_cap(ev.annotations)
        self.threshold = scheduling_options(ev.annotations).pause_after_failures
        if ev.reset_baseline:
            # Invariant 3 across a schedule change: the old schedule's ticks before the change
            # were all decided (none dropped, none left waiting), and none of them will ever
            # be decided again.
            assert not self.buffered, f"{self.buffered} left waiting at a schedule change"
            assert self.next_tick() >= ev.timestamp, (
                f"tick {self.next_tick()} of the old schedule left undecided at the change"
            )
            self._compile(ev.spec, ev.annotations, ev.timestamp)
            self.cursor = ev.timestamp
        else:
            before = self.schedule
            self._compile(ev.spec, ev.annotations, self._anchor(before))
            assert self.schedule == before, "a schedule change must reset the baseline"

    @staticmethod
    def _anchor(schedule: CompiledSchedule | None) -> datetime:
        assert schedule is not None
        return schedule.anchor

    def _on_ScheduleFired(self, ev: Any) -> None:
        t, name, trigger = ev.scheduled_time, ev.workflow_name, ev.trigger
        assert name not in self.names, f"workflow name {name} used twice"  # invariant 4
        self.names.add(name)
        active, self.active = self.active, [*self.active, name]
        if trigger == "manual":
            assert not re.fullmatch(rf"{re.escape(self.cron)}-\d+", name), name
            return
        assert name == f"{self.cron}-{int(t.timestamp())}", name  # invariant 4
        assert t not in self.fired, f"tick {t} fired twice"  # invariant 1
        self.fired.add(t)
        assert self.schedule is not None and self.spec is not None
        if trigger == "backfill":
            # Backfill fires only ticks that are decided already (or before the baseline).
            assert t <= self.cursor, f"backfill fired undecided tick {t}"
            assert self.schedule.next_after(t - MICRO) == t, f"backfill of a non-tick {t}"
            return
        if trigger == "buffer":
            assert self.buffered and t == self.buffered[0], f"{t} is not the oldest waiting"
            self.buffered.pop(0)
            assert not active, f"a waiting tick {t} started while {active} ran"
            assert not (self.suspended or self.stopped or self.paused)
            deadline = self.spec.starting_deadline_seconds
            if deadline:
                assert ev.fired_at < t + timedelta(seconds=deadline), "waited past the deadline"
            if self.last_scheduled is None or t > self.last_scheduled:
                self.last_scheduled = t
            return
        assert trigger in ("schedule", "catchup"), trigger
        assert not (self.suspended or self.stopped), f"tick {t} ran while suspended/stopped"
        assert not self.paused, f"tick {t} ran while paused after failures"
        assert t == self.next_tick(), (
            f"fired {t}, but the next undecided tick is {self.next_tick()}"
        )
        self.cursor = t
        assert t <= ev.fired_at, "a tick fired before its time"
        # Concurrency policy, judged from the runs the log says are active.
        policy = self.spec.concurrency_policy
        if policy == "Forbid":
            assert not active, f"Forbid started {name} while {active} ran"
        if policy == "Replace":
            # Every run still active gets terminated; a run named before may be named again
            # (terminating a finished run is not an error, Argo #11377).
            assert set(ev.replaced) <= set(active), f"{ev.replaced} are not active"
            escaped = set(active) - self.replaced - set(ev.replaced)
            assert not escaped, f"Replace left {escaped} running"
            self.replaced |= set(ev.replaced)
        else:
            assert ev.replaced == [], f"{policy} replaced {ev.replaced}"
        if trigger == "schedule":
            assert ev.fired_at - t < DEFAULT_LATE_TOLERANCE, "a late tick fired as on time"
        else:
            deadline = self.spec.starting_deadline_seconds or 0
            assert ev.fired_at < t + timedelta(seconds=deadline), "catch-up past the deadline"
        # Invariant 2: lastScheduledTime is the latest schedule/catchup fire.
        if self.last_scheduled is None or t > self.last_scheduled:
            self.last_scheduled = t
        if self.resumed_at is not None and t < self.resumed_at:
            self.runs_since_resume += 1
            assert self.runs_since_resume <= 1, "a resume started more than one run"

    def _on_ScheduleSkipped(self, ev: Any) -> None:
        first, last, count = ev.scheduled_time, ev.last_scheduled_time, ev.count
        if first in self.buffered:
            # A waiting tick decided at last without running: its deadline passed or the
            # schedule changed.
            assert first == last and count == 1
            assert ev.reason in ("DeadlineExceeded", "ScheduleChanged"), ev.reason
            self.buffered.remove(first)
            return
        assert first == self.next_tick(), (
            f"skip range starts at {first}, but the next undecided tick is {self.next_tick()}"
        )
        assert self.schedule is not None
        ticks = list(self.schedule.ticks_between(self.cursor, last))
        assert ticks and ticks[-1] == last, f"skip range ends at a non-tick {last}"
        assert len(ticks) == count, f"skip range {first}..{last} says {count}, has {len(ticks)}"
        assert last <= ev.at
        if ev.reason in ("Suspended", "Stopped", "PausedAfterFailures"):
            # While suspended, stopped or paused (a schedule change closes those ticks), or
            # ticks of the last suspension, which the scheduler decides after the resume.
            assert (
                self.suspended
                or self.stopped
                or self.paused
                or (self.resumed_at is not None and last < self.resumed_at)
            ), f"{ev.reason} skip of {first}..{last} outside a suspension"
        else:
            held = self.suspended or self.stopped or self.paused
            assert not held, f"{ev.reason} skip while suspended"
        self.cursor = last

    def _on_RunCompleted(self, ev: Any) -> None:
        assert ev.workflow_name in self.active, f"{ev.workflow_name} completed while not active"
        self.active.remove(ev.workflow_name)
        self.finished.append((ev.workflow_name, ev.phase, ev.finished_at))
        self.prune_due = True
        if self.threshold is None or ev.phase == "Succeeded":
            self.streak = []
        else:
            self.streak.append(ev.workflow_name)
            self.pause_due = not self.paused and len(self.streak) >= self.threshold

    def _on_PausedAfterFailures(self, ev: Any) -> None:
        assert self.pause_due, "paused without N failures in a row just ended"
        assert self.threshold is not None and ev.threshold == self.threshold
        assert ev.workflows == self.streak[-self.threshold :], (ev.workflows, self.streak)
        self.paused, self.pause_due = True, False

    def _on_FailureCountReset(self, ev: Any) -> None:
        assert ev.unpaused == self.paused
        if self.paused and not (self.suspended or self.stopped):
            self.resumed_at = ev.timestamp
            self.runs_since_resume = 0
        self.streak, self.paused = [], False

    def _on_RunVanished(self, ev: Any) -> None:
        if ev.workflow_name in self.active:
            self.active.remove(ev.workflow_name)
        self.finished = [f for f in self.finished if f[0] != ev.workflow_name]

    def _on_HistoryPruned(self, ev: Any) -> None:
        assert self.prune_due, "history pruned without a run completing"
        gone = set(ev.workflow_names)
        assert gone <= {f[0] for f in self.finished}, f"pruned unfinished runs {gone}"
        kept = [f for f in self.finished if f[0] not in gone]
        for f in self.finished:
            if f[0] in gone:
                # The oldest go first, by finish time, within their group.
                ok = f[1] == "Succeeded"
                assert all(f[2] <= k[2] for k in kept if (k[1] == "Succeeded") == ok)
        self.finished = kept

    def check_history_limits(self) -> None:
        """Right after a completion (and its pruning), each group is within its limit."""
        if not self.prune_due:
            return
        self.prune_due = False
        assert self.spec is not None
        keep_ok = self.spec.successful_jobs_history_limit
        keep_bad = self.spec.failed_jobs_history_limit
        ok = sum(f[1] == "Succeeded" for f in self.finished)
        assert ok <= (3 if keep_ok is None else keep_ok), f"{ok} successes kept"
        bad = len(self.finished) - ok
        assert bad <= (1 if keep_bad is None else keep_bad), f"{bad} failures kept"

    def _on_Suspended(self, ev: Any) -> None:
        self.suspended = True

    def _on_Stopped(self, ev: Any) -> None:
        self.stopped = True

    def _on_Resumed(self, ev: Any) -> None:
        self.suspended = self.stopped = self.paused = False
        self.streak = []
        self.resumed_at = ev.timestamp
        self.runs_since_resume = 0

    def _on_CronWorkflowDeleted(self, ev: Any) -> None:
        self.deleted = True


# --------------------------------------------------------------------------- the state machine


class CronWorkflowMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.svc = CronService(env=MEMORY)
        self.peer = CronService(env=MEMORY, recorder=self.svc.recorder)
        self.now = START
        self.live: dict[str, UUID] = {}  # name -> its current (not deleted) stream
        self.audits: dict[UUID, StreamAudit] = {}
        self.seen_last_scheduled: dict[UUID, datetime | None] = {}
        self.requests: dict[UUID, set[str]] = {}
        self.incarnations: dict[str, int] = {}

    # ---------------------------------------------------------------- helpers

    def audit(self) -> None:
        for stream, audit in self.audits.items():
            for ev in self.svc.events.get(stream, gt=audit.version or None):
                audit.feed(ev)
            audit.check_history_limits()

    def load(self, name: str) -> CronWorkflow:
        return self.svc.load(self.live[name])

    def new_events(self, stream: UUID, since: int) -> list[Any]:
        return list(self.svc.events.get(stream, gt=since or None))

    def check_decided_up_to_now(self, name: str) -> None:
        """After a tick at `now`, a live CronWorkflow has decided every tick up to now, unless
        Forbid with a deadline makes the first one wait for the active run; and it is next
        due after now (the scheduler never sleeps past a due tick)."""
        agg = self.load(name)
        audit = self.audits[agg.id]
        if not agg.is_live:
            assert agg.next_due() is None
            return
        pol = agg.policy()
        waiting = pol.concurrency == "Forbid" and pol.deadline is not None and agg.active
        assert len(agg.buffered) <= max(1, scheduling_options(agg.annotations).max_buffer)
        if agg.buffered and not agg.active:
            # Waiting ticks with no run left: none can be due later than the oldest.
            assert agg.next_due() == agg.buffered[0]
            return
        if not waiting:
            assert audit.next_tick() > self.now, f"tick {audit.next_tick()} left undecided"
        due = agg.next_due()
        assert due is not None and due > self.now

    # ---------------------------------------------------------------- rules

    @initialize(spec=SPECS, annotations=ANNOTATIONS)
    def create_first(self, spec: dict[str, Any], annotations: dict[str, str]) -> None:
        self._create("alpha", spec, annotations)

    def _create(self, name: str, spec: dict[str, Any], annotations: dict[str, str]) -> None:
        stream, outcome = self.svc.apply(manifest(name, spec, annotations), self.now)
        assert outcome == "created"
        assert stream not in self.audits, "a re-created CronWorkflow reused an old stream"
        agg = self.svc.load(stream)
        assert agg.incarnation == self.incarnations.get(name, 0)
        self.incarnations[name] = agg.incarnation + 1
        self.live[name] = stream
        self.audits[stream] = StreamAudit(stream)
        self.requests[stream] = set()

    @precondition(lambda self: len(self.live) < len(NAMES))
    @rule(data=st.data(), spec=SPECS, annotations=ANNOTATIONS)
    def create(self, data: st.DataObject, spec: dict[str, Any], annotations: dict[str, str]):
        name = data.draw(st.sampled_from([n for n in NAMES if n not in self.live]))
        self._create(name, spec, annotations)

    @rule(step=STEPS)
    def advance(self, step: timedelta) -> None:
        self.now += step

    @precondition(lambda self: self.live)
    @rule(step=STEPS, data=st.data())
    def advance_and_tick(self, step: timedelta, data: st.DataObject) -> None:
        self.now += step
        self.tick(data)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def tick(self, data: st.DataObject) -> None:
        names = data.draw(
            st.lists(st.sampled_from(sorted(self.live)), min_size=1, unique=True), label="tick"
        )
        self.svc.tick([self.live[n] for n in names], self.now)
        self.audit()
        for n in names:
            self.check_decided_up_to_now(n)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def suspend(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        self.svc.suspend(self.live[name], self.now, by="test")
        assert self.load(name).suspended

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        stream = self.live[name]
        before = self.svc.load(stream).version
        self.svc.resume(stream, self.now, by="test")
        fires = [e for e in self.new_events(stream, before) if event_type(e) == "ScheduleFired"]
        assert len(fires) <= 1 and all(e.trigger == "catchup" for e in fires)
        agg = self.svc.load(stream)
        assert not (agg.suspended or agg.stopped)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), spec=SPECS, annotations=ANNOTATIONS)
    def apply_changed_spec(
        self, data: st.DataObject, spec: dict[str, Any], annotations: dict[str, str]
    ) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        stream = self.live[name]
        before = self.svc.load(stream).version
        new = manifest(name, spec, annotations)
        _, outcome = self.svc.apply(new, self.now)
        assert outcome in ("updated", "unchanged")
        added = self.new_events(stream, before)
        resets = [e for e in added if event_type(e) == "SpecUpdated" and e.reset_baseline]
        fires = [e for e in added if event_type(e) == "ScheduleFired"]
        if resets:
            # A schedule change starts nothing and catches nothing up (Argo #7182): the only
            # runs are old-schedule ticks that were still on time.
            for e in fires:
                assert e.trigger == "schedule" and e.scheduled_time < self.now, e
        assert self.svc.load(stream).suspended == new.spec.suspend

    @precondition(lambda self: self.live)
    @rule(data=st.data(), phase=st.sampled_from(["Succeeded", "Failed", "Error"]))
    def complete_a_run(self, data: st.DataObject, phase: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        agg = self.load(name)
        if not agg.active:
            return
        run = data.draw(st.sampled_from(sorted(agg.active)), label="run")
        self.svc.run_completed(agg.id, run, phase, self.now, self.now)  # type: ignore[arg-type]
        assert run not in self.load(name).active

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def vanish_a_run(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        agg = self.load(name)
        runs = sorted(set(agg.active) | {f[0] for f in agg.finished})
        if not runs:
            return
        run = data.draw(st.sampled_from(runs), label="run")
        self.svc.run_vanished(agg.id, run, self.now)
        assert run not in self.load(name).active

    @precondition(lambda self: self.live)
    @rule(data=st.data(), request=st.sampled_from(["r1", "r2", "r3"]))
    def trigger(self, data: st.DataObject, request: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        stream = self.live[name]
        before = self.svc.load(stream).version
        run = self.svc.trigger(stream, self.now, request)
        added = self.new_events(stream, before)
        if request in self.requests[stream]:
            assert run is None and added == [], "a retried trigger request started a run"
        else:
            assert run is not None
            assert [(event_type(e), e.workflow_name, e.trigger) for e in added] == [
                ("ScheduleFired", run, "manual")
            ]
            self.requests[stream].add(request)

    @precondition(lambda self: self.live)
    @rule(
        data=st.data(),
        back=st.integers(0, 6 * 3600).map(lambda s: timedelta(seconds=s)),
        length=st.integers(0, 6 * 3600).map(lambda s: timedelta(seconds=s)),
    )
    def backfill(self, data: st.DataObject, back: timedelta, length: timedelta) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        stream = self.live[name]
        self.audit()
        audit = self.audits[stream]
        fired_before = set(audit.fired)
        start, end = self.now - back, self.now - back + length
        done = self.svc.backfill(stream, start, end, self.now, batch=7)
        assert not fired_before & set(done), "backfill re-fired a tick that already fired"
        self.audit()
        # Every decided tick of the range has fired now, whatever was decided for it before.
        agg = self.svc.load(stream)
        expected = agg.schedule.ticks_between(start - MICRO, min(end, audit.cursor))
        # (A tick waiting in the buffer is left to it: it fires from there, or is skipped.)
        missing = [t for t in expected if t not in audit.fired and t not in audit.buffered]
        assert not missing, f"backfill left {missing[:3]} unfired"

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        stream = self.live.pop(name)
        self.svc.delete(stream, self.now)
        assert self.svc.load(stream).deleted

    @precondition(lambda self: self.live)
    @rule(data=st.data(), peer_first=st.booleans())
    def replicas_decide_the_same_instant(self, data: st.DataObject, peer_first: bool) -> None:
        """Both instances decide every live CronWorkflow at `now` before either saves."""
        streams = list(self.live.values())
        mine = self.svc.decide_batch(streams, self.now)
        theirs = self.peer.decide_batch(streams, self.now)
        first, second = (self.peer, self.svc) if peer_first else (self.svc, self.peer)
        first_aggs, second_aggs = (theirs, mine) if peer_first else (mine, theirs)
        self._race(first, lambda: first.commit_batch(first_aggs, self.now), second_aggs)
        self.audit()
        for n in self.live:
            self.check_decided_up_to_now(n)

    @precondition(lambda self: self.live)
    @rule(
        data=st.data(),
        command=st.sampled_from(["tick", "suspend", "resume", "complete", "trigger"]),
    )
    def stale_peer_saves_after_a_command(self, data: st.DataObject, command: str) -> None:
        """The peer decides a tick, the first instance runs a command, then the peer saves."""
        streams = list(self.live.values())
        stale = self.peer.decide_batch(streams, self.now)
        name = data.draw(st.sampled_from(sorted(self.live)))
        stream = self.live[name]

        def act() -> None:
            if command == "tick":
                self.svc.tick(streams, self.now)
            elif command == "suspend":
                self.svc.suspend(stream, self.now)
            elif command == "resume":
                self.svc.resume(stream, self.now)
            elif command == "complete":
                active = sorted(self.svc.load(stream).active)
                if active:
                    run = data.draw(st.sampled_from(active), label="run")
                    self.svc.run_completed(stream, run, "Failed", self.now, self.now)
            else:
                self.svc.trigger(stream, self.now, f"race-{self.now.timestamp()}")

        self._race(self.svc, act, stale)
        self.audit()
        if command == "tick":
            for n in self.live:
                self.check_decided_up_to_now(n)

    def _race(self, winner: CronService, winner_saves: Any, loser_aggs: list[CronWorkflow]) -> None:
        """`winner_saves` writes first; then the loser saves `loser_aggs`, decided before."""
        loser = self.peer if winner is self.svc else self.svc
        versions = {s: self.svc.load(s).version for s in self.audits}
        stale = {a.id: [event_key(e) for e in a.pending_events] for a in loser_aggs}
        stale = {s: keys for s, keys in stale.items() if keys}
        winner_saves()
        won = {s: [event_key(e) for e in self.new_events(s, v)] for s, v in versions.items()}
        rejected_before = loser.rejected_writes

        report = loser.commit_batch(loser_aggs, self.now)

        # One transaction for the batch: any stream written since the loser loaded it makes
        # the store refuse the whole batch.
        conflicted = any(won[s] for s in stale)
        assert report.rejected == int(conflicted)
        assert loser.rejected_writes == rejected_before + int(conflicted)
        for stream, v in versions.items():
            after = [event_key(e) for e in self.new_events(stream, v)]
            # Invariant 6: the winner's events stand first, as saved ...
            assert after[: len(won[stream])] == won[stream]
            rest = after[len(won[stream]) :]
            if stream not in stale:
                assert rest == [], "the loser wrote to a stream it had not decided"
            elif not conflicted:
                assert rest == stale[stream]
            else:
                # ... and the rejected batch left nothing: what follows is exactly a fresh
                # decision on the state the winner left.
                fresh = self.svc.repository.get(stream, version=v + len(won[stream]))
                fresh.tick(self.now, self.svc.late_tolerance)
                assert rest == [event_key(e) for e in fresh.pending_events]

    # ---------------------------------------------------------------- invariants

    @invariant()
    def the_log_keeps_the_invariants(self) -> None:
        self.audit()
        for stream, audit in self.audits.items():
            agg = self.svc.load(stream)
            assert agg.version == audit.version
            # Invariant 2: derived from events, equal to the latest schedule/catchup fire,
            # never decreasing.
            assert agg.last_scheduled_time == audit.last_scheduled
            seen = self.seen_last_scheduled.get(stream)
            if seen is not None:
                assert agg.last_scheduled_time is not None and agg.last_scheduled_time >= seen
            self.seen_last_scheduled[stream] = agg.last_scheduled_time
            assert agg.decided_until == audit.cursor
            assert agg.buffered == audit.buffered
            assert sorted(agg.active) == sorted(audit.active)
            # The peer's view of the stream agrees once it reloads.
            assert self.peer.load(stream).version == agg.version


CronWorkflowMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestCronWorkflowMachine = CronWorkflowMachine.TestCase
