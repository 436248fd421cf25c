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

from cronsource.domain.cronworkflow import CronWorkflow

#: Copies kept; the least recently decided go first. Warming reloads what is due within a
#: minute, so this only needs to hold about one burst (about 5 KB per aggregate).
CACHE_SIZE = 50_000

LoadMany = Callable[[Mapping[UUID, int | None]], dict[UUID, CronWorkflow]]
FastForward = Callable[[CronWorkflow], CronWorkflow]


class DecisionCache:
    """`load_many` loads whole aggregates; `fast_forward` brings a held copy up to date
    from the events after it (CronService.fast_forward): commands such as run completions
    save without going through this cache, so its copies go stale one event at a time."""

    def __init__(
        self, load_many: LoadMany, fast_forward: FastForward, size: int = CACHE_SIZE
    ) -> None:
        self._load_many = load_many
        self._fast_forward = fast_forward
        self._size = size
        self._copies: dict[UUID, CronWorkflow] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._copies)

    def take(self, seen: Mapping[UUID, int], ids: Iterable[UUID]) -> dict[UUID, CronWorkflow]:
        """Take out the copies of `ids`, as new as `seen` (the due index's versions): a copy
        older than that is brought up to date first; ids without a copy are left out.

        Taken out, not copied (a copy was a fifth of a hot burst): `keep` puts them back once
        saved; if the save fails or never comes, the next decision loads afresh."""
        out: dict[UUID, CronWorkflow] = {}
        stale: list[CronWorkflow] = []
        with self._lock:
            for cron_id in ids:
                copy = self._copies.pop(cron_id, None)
                if copy is None:
                    continue
                if seen.get(cron_id, copy.version + 1) <= copy.version:
                    out[cron_id] = copy
                else:
                    stale.append(copy)
        for copy in stale:
            fresh = self._fast_forward(copy)
            if seen.get(fresh.id, fresh.version + 1) <= fresh.version:
                out[fresh.id] = fresh
        return out

    def saved(self, aggs: Iterable[CronWorkflow]) -> None:
        """Aggregates this process just saved (CronService.on_saved): kept as the copies,
        unless a newer one is held (a copy taken out to decide on, and saved, comes back by
        `keep`). A run completion this process recorded thus costs the next decision no
        reload; beyond the size, the oldest copies go as with `keep`."""
        with self._lock:
            self._put_newer(aggs)

    def _put_newer(self, aggs: Iterable[CronWorkflow]) -> None:
        """Each aggregate as the copy unless a newer one is held; then trim to the size (the
        oldest go). Under the lock."""
        copies = self._copies
        for a in aggs:
            held = copies.get(a.id)
            if held is None or held.version < a.version:
                copies[a.id] = a
        while len(copies) > self._size:
            del copies[next(iter(copies))]

    def held(self) -> list[CronWorkflow]:
        """The copies held now, as saved or loaded (a copy taken out to decide on is not
        among them until it is put back)."""
        with self._lock:
            return list(self._copies.values())

    def clear(self) -> None:
        with self._lock:
            self._copies.clear()

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
        and not held at that version, so the decision at the instant reads nothing: missing
        ones loaded, stale ones brought up to date. Returns how many were read."""
        with self._lock:
            missing: list[UUID] = []
            stale: list[CronWorkflow] = []
            for cron_id, seen in versions.items():
                copy = self._copies.get(cron_id)
                if copy is None:
                    missing.append(cron_id)
                elif copy.version < seen:
                    stale.append(self._copies.pop(cron_id))  # out while it is brought up
                if len(missing) + len(stale) >= limit:
                    break
        loaded = list(self._load_many(dict.fromkeys(missing)).values()) if missing else []
        loaded += [self._fast_forward(copy) for copy in stale]
        for agg in loaded:
            agg.next_due()  # parses the spec and schedule now rather than at the instant
        with self._lock:
            self._put_newer(loaded)  # never over a newer copy the commits put back meanwhile
        return len(missing) + len(stale)
