"""The scheduling rules as one pure function: state and time in, one decision per tick out.

Temporal keeps its overlap and catch-up logic in one pure function for the same reason we do:
the rules (docs/design.md section 4) are the hard part, and keeping them free of I/O and clocks
lets property tests drive them over any interleaving. The aggregate turns the decisions into
events; nothing here logs, saves or reads a clock.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

SkipReason = Literal[
    "Suspended",
    "ConcurrencyForbid",
    "DeadlineExceeded",
    "Stopped",
    "WhenFalse",
    "CatchupLimit",
    "SpecError",
    "ScheduleChanged",
    "PausedAfterFailures",
    "BufferFull",
    "Excluded",
]
#: What holds a CronWorkflow's ticks until it runs again: its ticks of that time are decided
#: when it does, by the resume rule, and skipped for this reason.
HoldReason = Literal["Suspended", "Stopped", "PausedAfterFailures"]
Trigger = Literal["schedule", "catchup", "manual", "backfill", "buffer"]
ConcurrencyPolicy = Literal["Allow", "Forbid", "Replace"]

DEFAULT_LATE_TOLERANCE = timedelta(seconds=30)


@dataclass(frozen=True)
class Fire:
    """Start a run for `scheduled_time`; `replaces` are the active runs Replace terminates."""

    scheduled_time: datetime
    trigger: Trigger
    replaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skip:
    """Do not run the ticks `first`..`last` (`count` of them, all for `reason`)."""

    first: datetime
    last: datetime
    count: int
    reason: SkipReason
    message: str = ""
    #: What an Excluded skip names: {calendar, version, date} (recorded as the event's values).
    detail: tuple[tuple[str, str], ...] = ()


Decision = Fire | Skip


@dataclass(frozen=True)
class TickPolicy:
    """What the spec says about running ticks; read from the spec once per decision."""

    concurrency: ConcurrencyPolicy = "Allow"
    deadline: timedelta | None = None  # startingDeadlineSeconds; None or 0 = no catch-up
    catchup_all: bool = False
    max_catchup: int = 10
    late_tolerance: timedelta = DEFAULT_LATE_TOLERANCE


@dataclass(frozen=True)
class RunState:
    """What is running; comes from RunCompleted/RunVanished events, never a cached list."""

    active: tuple[str, ...] = ()
    last_finished_at: datetime | None = None


@dataclass(frozen=True)
class Outcome:
    """Decisions in tick order, and the new watermark: every tick <= it has a decision."""

    decisions: list[Decision] = field(default_factory=list)
    decided_until: datetime | None = None
    waiting: bool = False  # Forbid with a deadline: the rest wait for the active run to end


def _fold(skips: Iterable[tuple[datetime, SkipReason]], message: str = "") -> list[Skip]:
    """Fold consecutive skips with one reason into one range, so an outage is one event."""
    out: list[Skip] = []
    for t, reason in skips:
        if out and out[-1].reason == reason:
            prev = out[-1]
            out[-1] = Skip(prev.first, t, prev.count + 1, reason, prev.message)
        else:
            out.append(Skip(t, t, 1, reason, message if reason == "WhenFalse" else ""))
    return out


def decide_ticks(
    ticks: Sequence[datetime],
    now: datetime,
    policy: TickPolicy,
    runs: RunState,
    *,
    suspension: HoldReason | None = None,
    when: bool | str = True,
    run_name: Callable[[datetime], str] = lambda t: t.isoformat(),
    superseded: bool = False,
    excluded: Callable[[datetime], Skip | None] | None = None,
) -> Outcome:
    """Decide every undecided tick in `ticks` (ascending, all <= now) as of `now`.

    `excluded` gives the Excluded skip of a tick a calendar excludes (None: it is not): such
    a tick never runs and never counts as a run, but it is still a tick of the schedule, so
    older ticks it follows are not its catch-up (as if it had run). The rest are decided by
    the rules below; the Excluded skips join them in tick order.

    `suspension` set means these are the ticks of a suspension being resumed: the latest may
    run as a catch-up within the deadline, the others are skipped for that reason, so a resume
    creates at most one run. `when` is the evaluated `spec.when`: True, False, or an error
    message (then the tick is skipped as WhenFalse carrying the message, never a crash).
    """
    if not ticks:
        return Outcome()
    if excluded is not None:
        marks = {t: x for t in ticks if (x := excluded(t)) is not None}
        if marks:
            return _with_exclusions(
                ticks,
                marks,
                lambda rest, later: decide_ticks(
                    rest,
                    now,
                    policy,
                    runs,
                    suspension=suspension,
                    when=when,
                    run_name=run_name,
                    superseded=superseded or later,
                ),
            )
    deadline = policy.deadline if policy.deadline and policy.deadline > timedelta(0) else None

    def within_deadline(t: datetime) -> bool:
        return deadline is not None and now < t + deadline

    def blocked(t: datetime) -> bool:
        # A tick that waited behind a run (Forbid with a deadline) and lost is a
        # ConcurrencyForbid skip, not an outage skip: the audit log must say why. Only when
        # a scheduler reached it by the end of its wait, though: one decided long after
        # (the scheduler was down) was not decided in time, whatever ran meanwhile.
        return (
            policy.concurrency == "Forbid"
            and deadline is not None
            and now - (t + deadline) < policy.late_tolerance
            and (
                bool(runs.active)
                or (runs.last_finished_at is not None and t < runs.last_finished_at)
            )
        )

    # Only the latest due tick can be on time: the late tolerance says how late the latest
    # may be. Several ticks due at one decision (a stall shorter than the tolerance, of a
    # schedule faster than it) are otherwise missed ticks, as Argo and Kubernetes count
    # them: the older ones follow the missed-tick rules, so a stall never fires a burst.
    # `superseded`: a later tick than these is due and already decided (a recovered run): none
    # of them is the latest, so none is on time, and none runs as the latest missed one.
    if suspension is None and not superseded and now - ticks[-1] < policy.late_tolerance:
        missed, on_time = list(ticks[:-1]), [ticks[-1]]
    else:
        missed, on_time = list(ticks), []

    eligible = [t for t in missed if within_deadline(t)]
    if suspension is None and policy.catchup_all:
        chosen = eligible[-policy.max_catchup :]
    elif on_time or superseded:
        chosen = []  # a later tick runs: the missed ones before it are CatchupLimit
    else:
        chosen = eligible[-1:]
    chosen_set = set(chosen)

    skipped: list[tuple[datetime, SkipReason]] = []
    for t in missed:
        if t in chosen_set:
            continue
        if suspension is not None:
            skipped.append((t, suspension))
        elif blocked(t):
            skipped.append((t, "ConcurrencyForbid"))
        elif within_deadline(t):
            skipped.append((t, "CatchupLimit"))
        else:
            skipped.append((t, "DeadlineExceeded"))

    candidates: list[tuple[datetime, Trigger]] = [(t, "catchup") for t in chosen]
    candidates += [(t, "schedule") for t in on_time]
    if policy.concurrency == "Forbid" and len(candidates) > 1:
        # Forbid runs one at a time, and the one to run is the latest (Kubernetes CronJob):
        # running an older one first would leave the newer waiting behind it.
        # Without a deadline these are on-time ticks that one run blocks (ConcurrencyForbid);
        # with one, older catch-up candidates lose to the latest (CatchupLimit).
        for t, _ in candidates[:-1]:
            forbid = blocked(t) or deadline is None
            skipped.append((t, "ConcurrencyForbid" if forbid else "CatchupLimit"))
        candidates = candidates[-1:]

    decided: list[tuple[datetime, Fire | tuple[datetime, SkipReason]]] = [
        (s[0], s) for s in skipped
    ]
    active = list(runs.active)
    waiting = False
    for t, trigger in candidates:
        if when is not True:
            decided.append((t, (t, "WhenFalse")))
            continue
        if policy.concurrency == "Forbid" and active:
            if deadline is not None and now < t + deadline:
                waiting = True
                break
            decided.append((t, (t, "ConcurrencyForbid")))
            continue
        replaces = tuple(active) if policy.concurrency == "Replace" else ()
        decided.append((t, Fire(t, trigger, replaces)))
        active = [] if replaces else active
        active.append(run_name(t))

    decided.sort(key=lambda d: d[0])
    message = when if isinstance(when, str) else ""
    decisions: list[Decision] = []
    run: list[tuple[datetime, SkipReason]] = []
    for _, d in decided:
        if isinstance(d, Fire):
            decisions += _fold(run, message)
            run = []
            decisions.append(d)
        else:
            run.append(d)
    decisions += _fold(run, message)
    last = decided[-1][0] if decided else None
    return Outcome(decisions, last, waiting)


def _any_between(excluded: Sequence[datetime], a: datetime, b: datetime) -> bool:
    """Whether a tick of the sorted `excluded` lies strictly between a and b."""
    return bisect.bisect_right(excluded, a) < bisect.bisect_left(excluded, b)


def _with_exclusions(
    ticks: Sequence[datetime],
    marks: dict[datetime, Skip],
    decide: Callable[[list[datetime], bool], Outcome],
) -> Outcome:
    """Decide the ticks no calendar excludes (`decide(rest, superseded)`: superseded when an
    excluded tick comes after them), then add the Excluded skips of the excluded ticks up
    to where that decided: a tick waiting for a run (Forbid with a deadline) stops the
    decisions there, and excluded ticks after it wait with it, so the watermark never
    passes an undecided tick."""
    rest = [t for t in ticks if t not in marks]
    inner = decide(rest, bool(rest) and max(marks) > rest[-1]) if rest else Outcome()
    if inner.waiting:
        waiting_tick = next(
            t for t in rest if inner.decided_until is None or t > inner.decided_until
        )
        marked = [t for t in sorted(marks) if t < waiting_tick]
    else:
        marked = sorted(marks)
    skips: list[Skip] = []
    for t in marked:
        x = marks[t]
        prev = skips[-1] if skips else None
        if (
            prev is not None
            and (prev.reason, prev.message, prev.detail) == (x.reason, x.message, x.detail)
            # no tick decided otherwise lies between them
            and bisect.bisect_left(rest, t) == bisect.bisect_right(rest, prev.last)
        ):
            skips[-1] = Skip(prev.first, t, prev.count + 1, x.reason, x.message, x.detail)
        else:
            skips.append(x)
    # A skip of the rest spans its ticks only: where an excluded tick lies inside its range,
    # it is split there, so that every tick (read by range) has one decision.
    split: list[Decision] = []
    ordered = sorted(marks)
    for d in inner.decisions:
        if isinstance(d, Fire) or d.count == 1:
            split.append(d)
            continue
        span = rest[bisect.bisect_left(rest, d.first) : bisect.bisect_right(rest, d.last)]
        start = 0
        for k in range(1, len(span) + 1):
            if k == len(span) or _any_between(ordered, span[k - 1], span[k]):
                part = span[start:k]
                split.append(Skip(part[0], part[-1], len(part), d.reason, d.message, d.detail))
                start = k
    decisions = sorted(
        [*split, *skips],
        key=lambda d: d.scheduled_time if isinstance(d, Fire) else d.first,
    )
    ends = [d.scheduled_time if isinstance(d, Fire) else d.last for d in decisions]
    return Outcome(decisions, max(ends, default=None), inner.waiting)


# ---------------------------------------------------------------- pause after failures
#
# A circuit breaker (`cronsource.io/pause-after-failures: "N"`): after N consecutive runs end
# Failed or Error the CronWorkflow pauses, and no tick runs until `resume` (or a spec change,
# with `cronsource.io/pause-reset-on-spec-change: "true"`). Argo's stopStrategy counts totals
# and stops for good (argoproj/argo-workflows #5659, #7291); Temporal's schedules have
# `pause_on_failure`. Runs count in the order their ends are recorded, whatever started them.


def failure_streak(
    streak: Sequence[str], workflow: str, phase: str, threshold: int | None
) -> list[str]:
    """The consecutive failed runs after `workflow` ended with `phase`: a success ends the
    streak, a failure (Failed, Error) adds to it. Only the last `threshold` are kept, all a
    pause names; without a threshold nothing is counted, so a breaker set later counts
    from then (and a snapshot taken before breakers existed needs no history to be exact)."""
    if threshold is None or phase == "Succeeded":
        return []
    return [*streak, workflow][-threshold:]


def runs_that_pause(streak: Sequence[str], threshold: int | None) -> tuple[str, ...] | None:
    """The runs that pause the CronWorkflow now: the last `threshold` of the streak once it
    is that long; None while it is shorter or no breaker is set."""
    if threshold is None or len(streak) < threshold:
        return None
    return tuple(streak[-threshold:])


# ---------------------------------------------------------------- buffered overlap
#
# `cronsource.io/overlap: BufferOne | BufferAll` with `concurrencyPolicy: Forbid` (Temporal's
# overlap policies of those names): a tick that comes while a run is active waits in a buffer
# and starts when the run ends, oldest first, one at a time, with its own scheduled time;
# Forbid alone drops it (ConcurrencyForbid). BufferOne keeps the first waiting tick and skips
# later ones while it waits, as Temporal does; BufferAll keeps up to `cronsource.io/max-buffer`.
# `startingDeadlineSeconds` bounds the wait: a tick still waiting past it is skipped
# (DeadlineExceeded). A tick is taken into the buffer only when it could run now: the latest
# due tick within the late tolerance, or any within its deadline.


@dataclass(frozen=True)
class BufferOutcome:
    """What happens to newly due ticks while the buffer applies: `buffered` join the buffer
    in tick order; `skipped` are decisions (BufferFull, DeadlineExceeded), in tick order."""

    buffered: list[datetime] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)


def buffer_ticks(
    ticks: Sequence[datetime],
    now: datetime,
    policy: TickPolicy,
    waiting: int,
    mode: str,
    cap: int,
) -> BufferOutcome:
    """Decide `ticks` (ascending, all <= now, undecided) for a buffer that holds `waiting`
    ticks already: each joins it while there is room (`cap`), else is skipped as BufferFull
    with a message naming the cap; one that could not run now any more (past its deadline,
    or an older tick without one) is DeadlineExceeded, as it would be without a buffer."""
    deadline = policy.deadline if policy.deadline and policy.deadline > timedelta(0) else None
    out = BufferOutcome()
    room = max(0, cap - waiting)
    folding = False  # the last decision was a skip: a skip of the same reason extends it
    for i, t in enumerate(ticks):
        latest_on_time = i == len(ticks) - 1 and now - t < policy.late_tolerance
        if not (latest_on_time or (deadline is not None and now < t + deadline)):
            skip = Skip(t, t, 1, "DeadlineExceeded")
        elif room > 0:
            out.buffered.append(t)
            room -= 1
            folding = False
            continue
        else:
            skip = Skip(t, t, 1, "BufferFull", buffer_full_message(mode, cap))
        prev = out.skipped[-1] if out.skipped else None
        if folding and prev is not None and prev.reason == skip.reason:
            out.skipped[-1] = Skip(prev.first, t, prev.count + 1, prev.reason, prev.message)
        else:
            out.skipped.append(skip)
        folding = True
    return out


def buffer_full_message(mode: str, cap: int) -> str:
    """Why a tick did not join the buffer, naming the rule and the cap."""
    if mode == "BufferOne":
        return "cronsource.io/overlap: BufferOne: a tick already waits for the active run"
    return (
        f"cronsource.io/overlap: BufferAll: {cap} ticks already wait"
        f" (cronsource.io/max-buffer: {cap})"
    )


def expired_buffer(
    buffered: Sequence[datetime], now: datetime, deadline: timedelta | None
) -> list[datetime]:
    """The waiting ticks whose starting deadline has passed at `now`: they are skipped
    (DeadlineExceeded). Without a deadline a tick waits until the run ends."""
    if deadline is None or deadline <= timedelta(0):
        return []
    return [t for t in buffered if now >= t + deadline]
