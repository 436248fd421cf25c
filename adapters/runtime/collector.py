"""The garbage collector's pace in a long-running replica (`cronsource run`).

A replica keeps many long-lived objects: the scheduler's copies of the aggregates (up to
50,000), each projection follower's (up to 20,000 each), the repository's cache. CPython's
full collection walks every one of them, and with its default thresholds it ran often enough
to take about a third of the projections' CPU (bench.project, 20,000 events: the read model
3.0 s -> 2.0 s, the dispatcher 2.5 s -> 1.7 s of user CPU; docs/performance.md). Full
collections only become rarer: the young generations, where the short-lived garbage of a
turn dies, are collected exactly as before, and a full collection still comes (Python also
waits for the long-lived objects to grow by a quarter since the last one). `simulate` freezes
its state out of the collector's sight instead (adapters/entrypoints/simulate/orchestrator.py),
because it knows when its objects stop changing; a replica's aggregates change every turn.
"""

from __future__ import annotations

import gc

#: Collections of the middle generation between two full collections (CPython's default: 10).
FULL_COLLECTION_EVERY = 1000


def pace_collector() -> None:
    """Make full collections rare for the rest of the process (module docstring); the
    thresholds of the young generations stay as they are."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
