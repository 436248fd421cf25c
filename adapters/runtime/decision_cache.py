"""The scheduler's copies of aggregates, kept between instants so a burst needs no reads.

The deciding thread takes copies out, the committing thread puts saved ones back and the
warm-up adds loaded ones: all of it under one lock, so they never race. A copy is handed out
only where it is at least as new as the version the caller saw in the due index; if it is
stale after all (someone else saved since), the store refuses the save and the scheduler
decides again on fresh state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from uuid import UUID

from domain.cronworkflow import CronWorkflow

#: Copies kept; the least recently decided go first. Warming reloads what is due within a
#: minute, so this only needs to hold about one burst (about 5 KB per aggregate).
CACHE_SIZE = 50_000

LoadMany = Callable[[Mapping[UUID, int | None]], dict[UUID, CronWorkflow]]


class DecisionCache:
    def __init__(self, load_many: LoadMany, size: int = CACHE_SIZE) -> None:
        self._load_many = load_many
        self._size = size
        self._copies: dict[UUID, CronWorkflow] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._copies)

    def take(self, seen: Mapping[UUID, int], ids: Iterable[UUID]) -> dict[UUID, CronWorkflow]:
        """Take out the copies of `ids` that are as new as `seen` (the due index's versions).

        Taken out, not copied (a copy was a fifth of a hot burst): `keep` puts them back once
        saved; if the save fails or never comes, the next decision loads afresh. A copy older
        than what the due index shows is dropped."""
        out: dict[UUID, CronWorkflow] = {}
        with self._lock:
            for cron_id in ids:
                copy = self._copies.pop(cron_id, None)
                if copy is not None and seen.get(cron_id, copy.version + 1) <= copy.version:
                    out[cron_id] = copy
        return out

    def keep(self, aggs: Iterable[CronWorkflow]) -> None:
        """Remember saved (or freshly loaded) aggregates; beyond the size, the oldest go (a
        dict keeps insertion order, and a decision takes a copy out and puts it back)."""
        with self._lock:
            copies = self._copies
            for a in aggs:
                copies[a.id] = a
            while len(copies) > self._size:
                del copies[next(iter(copies))]

    def warm(self, versions: Mapping[UUID, int], limit: int) -> int:
        """Load ahead of time what is about to be due (`versions`: what the due index shows)
        and not held at that version, so the decision at the instant reads nothing. Returns
        how many were loaded."""
        with self._lock:
            todo = [
                cron_id
                for cron_id, seen in versions.items()
                if (copy := self._copies.get(cron_id)) is None or copy.version < seen
            ][:limit]
        if not todo:
            return 0
        loaded = self._load_many(dict.fromkeys(todo))
        for agg in loaded.values():
            agg.next_due()  # parses the spec and schedule now rather than at the instant
        with self._lock:
            # Never over a newer copy the committing thread put back meanwhile.
            copies = self._copies
            for agg in loaded.values():
                held = copies.get(agg.id)
                if held is None or held.version < agg.version:
                    copies[agg.id] = agg
            while len(copies) > self._size:
                del copies[next(iter(copies))]
        return len(todo)
