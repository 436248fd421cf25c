"""What the recorders of every store share: the last-version check's refusal, the commit
deadline, and the shapes of their batch queries (see the package's docstring)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast
from uuid import UUID

from eventsourcing.persistence import (
    IntegrityError,
    OperationalError,
    StoredEvent,
)

from cronsource.adapters.clock import SYSTEM_CLOCK

#: Streams per query: bounds the statement's parameter and the rows held at once.
MANY_CHUNK = 1000
#: (stream, first version) pairs per SQLite check query: two host parameters each, well
#: below SQLite's default limit of 32,766.
CHECK_CHUNK = 400


#: Versions missing inside a stream: (stream, the version before the hole, the one after it).
#: A hole can only come from a writer of an older cronsource (before every append checked the
#: last version) saving on top of a log that had lost its tail; `cronsource check` reports
#: them and `--repair` records the missing versions as lost (adapters/application/loggaps.py).
_GAPS = (
    "SELECT originator_id, prev, v FROM (SELECT originator_id, originator_version AS v,"
    " lag(originator_version, 1, 0) OVER (PARTITION BY originator_id"
    " ORDER BY originator_version) AS prev FROM {table}) g WHERE v - prev > 1"
    " ORDER BY originator_id, v"
)


class StaleAppend(IntegrityError):
    """A save whose stream in the log does not end where the writer's copy did: the log is
    ahead of the copy (another writer saved first) or behind it (the log lost its tail). Either
    way the writer reloads and decides again; nothing of the save was written.

    `stale` maps each such stream to (the save's first version, the log's last version), and
    `streams` names them, so the writer drops exactly those cached copies."""

    def __init__(self, stale: Mapping[UUID, tuple[int, int | None]]) -> None:
        parts = [
            f"stream {oid}: the log ends at version {last or 0}, the save starts at {first}"
            for oid, (first, last) in list(stale.items())[:3]
        ]
        more = f" (and {len(stale) - 3} more)" if len(stale) > 3 else ""
        super().__init__("stale append: " + "; ".join(parts) + more)
        self.stale = dict(stale)
        self.streams = frozenset(stale)


class CommitTooLate(OperationalError):
    """A save that could not be committed by its deadline (`commit_within`): it was not written,
    and its decisions are to be made again on the time it is now."""


_deadline = threading.local()


@contextmanager
def commit_within(seconds: float | None) -> Iterator[None]:
    """Saves of this thread inside the block commit within `seconds` from now, or not at all
    (CommitTooLate): a store that is slow, locked or reconnecting cannot turn a decision made
    on time into a fire committed late as if it were on time. None: no deadline. (Counted on
    this process's monotonic clock, which the store's timeouts count in too.)"""
    previous = getattr(_deadline, "value", None)
    _deadline.value = None if seconds is None else SYSTEM_CLOCK.monotonic() + seconds
    try:
        yield
    finally:
        _deadline.value = previous


def _seconds_left() -> float | None:
    """Seconds before this thread's commit deadline; CommitTooLate once it has passed."""
    deadline: float | None = getattr(_deadline, "value", None)
    if deadline is None:
        return None
    left = deadline - SYSTEM_CLOCK.monotonic()
    if left <= 0:
        raise CommitTooLate(f"the commit deadline passed {-left:.1f}s ago; nothing was written")
    return left


def _past_deadline() -> bool:
    """Whether this thread's commit deadline has passed (give or take the 50 ms a timeout
    set from it may fire early by rounding)."""
    deadline: float | None = getattr(_deadline, "value", None)
    return deadline is not None and SYSTEM_CLOCK.monotonic() >= deadline - 0.05


@contextmanager
def _deadline_errors() -> Iterator[None]:
    """A store error once the deadline has passed is the deadline's doing (a statement or
    lock timeout, SQLite's busy timeout): say so, so that the caller decides again instead of
    backing off as from a broken store."""
    try:
        yield
    except OperationalError as e:
        if _past_deadline():
            raise CommitTooLate(f"not committed by its deadline ({e}); nothing was written") from e
        raise


def _columns(stored_events: Sequence[StoredEvent]) -> tuple[list[Any], ...]:
    """The events as four arrays (`unnest(uuid[], bigint[], text[], bytea[])`)."""
    return (
        [e.originator_id for e in stored_events],
        [e.originator_version for e in stored_events],
        [e.topic for e in stored_events],
        [e.state for e in stored_events],
    )


def first_versions(stored_events: Sequence[StoredEvent]) -> dict[UUID, int]:
    """The first new version of each stream in a save (a save holds consecutive versions)."""
    firsts: dict[UUID, int] = {}
    for e in stored_events:
        oid = cast(UUID, e.originator_id)
        if oid not in firsts or e.originator_version < firsts[oid]:
            firsts[oid] = e.originator_version
    return firsts


def _unwrapped(method: Callable[..., Any]) -> Callable[..., Any]:
    """The library method without its retry decorator (eventsourcing.utils.retry keeps the
    original as `__wrapped__`)."""
    return cast(Callable[..., Any], getattr(method, "__wrapped__", method))


# ---------------------------------------------------------------------------- snapshots
#
# Snapshots live in the library's aggregate recorders (table `<app>_snapshots`), with one
# addition: the latest snapshot of many streams in one query, so that a batch load (the
# scheduler's warm-up, the projections' prefetch) reads a snapshot and the events after it
# per stream instead of whole streams.

_NO_LIMIT = 2**62  # "any version" for the per-stream upper bound of a snapshot
