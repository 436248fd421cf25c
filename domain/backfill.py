"""What a backfill does with the ticks it is given: pure rules, no clock, no store.

A backfill asks for runs of past ticks, all at one instant. Without an overlap rule that is
hundreds of runs at once, whatever `concurrencyPolicy` says; Temporal's backfills take the
schedule's overlap policy unless told otherwise, and so do ours:

- `Allow`: every tick runs now (with `parallel`, at most that many at once; the rest wait).
- `Forbid`: a tick whose turn comes while a run is active is skipped, as the scheduler does; in
  one instant that leaves the earliest tick (and none while a run is already active).
- `Replace`: each run replaces the one before, so only the latest tick runs, replacing what is
  active (creating the others only to terminate them at once would change nothing).
- `Queue`: one after another (`parallel` at a time, default 1), each starting when a backfill
  run ends (Temporal's BufferAll).

Which ticks qualify is one rule everywhere (CLI, HTTP, the decision query, the docs): every
tick of the current schedule in [start, end] that is already decided (at or before the
aggregate's watermark, so never one the scheduler is still to decide) and never fired,
including ticks before the CronWorkflow existed or its schedule last changed (the scheduler
never runs those; running them is what a backfill is for). A tick that fired, or is queued
by an earlier backfill, is never started again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

Overlap = Literal["Allow", "Forbid", "Replace", "Queue"]
OVERLAPS: tuple[str, ...] = get_args(Overlap)

#: Ticks one backfill may cover unless the caller raises it: 10,000 runs are about a week of
#: an every-minute schedule, more than anyone means to start by mistake in one command.
DEFAULT_MAX_BACKFILL_TICKS = 10_000
#: The most `--max-ticks` (`maxTicks`) may raise it to. Finding a range's ticks takes about
#: 65 us each (croniter), and a dry run lists them all: 10,000,000 took 8 minutes and 4.4 GB
#: in one command, and held an HTTP worker as long after its client had gone. 100,000 (a
#: quarter of a year of an every-minute schedule) is found in seconds; a longer range is
#: backfilled in parts.
MAX_BACKFILL_TICKS = 100_000


class BackfillTooLarge(ValueError):
    """The range holds more ticks than allowed; `count` is a lower bound (counting stops)."""

    def __init__(self, count: int, cap: int) -> None:
        super().__init__(
            f"the range holds more than {cap} ticks; split it into smaller ranges or raise"
            " the limit"
        )
        self.count = count
        self.cap = cap


class HistoryRemoved(ValueError):
    """The range starts before the oldest instant the log keeps (retention removed the
    events before it): which of its ticks fired cannot be known, so none is fired again."""

    def __init__(self, kept_from: str) -> None:
        super().__init__(
            f"the log keeps events from {kept_from} only (retention removed the ones before):"
            " start the backfill at or after it"
        )
        self.kept_from = kept_from


@dataclass(frozen=True)
class BackfillPlan:
    """What to do with each qualifying tick, in tick order.

    `already`: ticks that fired (or are queued) before, never run again; `queued_before`
    those of them still waiting in the queue of an earlier backfill. `fire`: start now,
    the first of them replacing `replaces` (Replace). `queue`: start later, one by one as
    backfill runs end. `skip`: not run, for `skip_reason`; their earlier decision stands.
    """

    overlap: Overlap
    parallel: int | None
    candidates: int
    already: tuple[datetime, ...] = ()
    queued_before: tuple[datetime, ...] = ()
    fire: tuple[datetime, ...] = ()
    replaces: tuple[str, ...] = ()
    queue: tuple[datetime, ...] = ()
    skip: tuple[datetime, ...] = ()
    skip_reason: str = ""

    @property
    def fired_before(self) -> tuple[datetime, ...]:
        """The ticks of `already` that ran (the rest wait in an earlier backfill's queue)."""
        return tuple(t for t in self.already if t not in self.queued_before)

    @property
    def runs(self) -> tuple[datetime, ...]:
        """Every tick this backfill starts, now or later."""
        return tuple(sorted(self.fire + self.queue))


def plan_backfill(
    ticks: Sequence[datetime],
    done: Collection[datetime],
    overlap: Overlap,
    parallel: int | None,
    active: Sequence[str],
    running_backfills: int,
    waiting: Collection[datetime] = (),
) -> BackfillPlan:
    """Decide, for ticks (ascending) given all at one instant, which run now, which wait and
    which are skipped. `active`: runs active now; `running_backfills`: how many of them are
    backfill runs (the ones `parallel` limits); `waiting`: the ticks of `done` an earlier
    backfill queued and has not started yet (said apart: they have not fired)."""
    already = tuple(t for t in ticks if t in done)
    todo = [t for t in ticks if t not in done]
    queued_before = tuple(t for t in already if t in waiting)
    base = BackfillPlan(overlap, parallel, len(ticks), already, queued_before)
    if not todo:
        return base
    if overlap == "Forbid":
        if active:
            return _with(base, skip=tuple(todo), skip_reason="a run is active")
        return _with(
            base,
            fire=(todo[0],),
            skip=tuple(todo[1:]),
            skip_reason="they would overlap the first",
        )
    if overlap == "Replace":
        if already and already[-1] > todo[-1]:
            # A later tick of the range ran already: under Replace the newest run is the one
            # kept, and starting an older tick would replace it (a second backfill of a wider
            # range started the 4th, replacing the 5th's run).
            return _with(base, skip=tuple(todo), skip_reason="a later tick of the range ran")
        return _with(
            base,
            fire=(todo[-1],),
            replaces=tuple(active),
            skip=tuple(todo[:-1]),
            skip_reason="a later tick replaces them",
        )
    limit = parallel if parallel is not None else (1 if overlap == "Queue" else None)
    if limit is None:
        return _with(base, fire=tuple(todo))
    slots = max(0, limit - running_backfills)
    return _with(base, parallel=limit, fire=tuple(todo[:slots]), queue=tuple(todo[slots:]))


def _with(plan: BackfillPlan, **changes: object) -> BackfillPlan:
    fields = {**plan.__dict__, **changes}
    return BackfillPlan(**fields)


def start_from_queue(
    queue: Iterable[datetime], parallel: int, running_backfills: int
) -> list[datetime]:
    """The queued ticks to start now: the earliest, as many as free slots allow."""
    slots = max(0, parallel - running_backfills)
    return sorted(queue)[:slots] if slots else []
