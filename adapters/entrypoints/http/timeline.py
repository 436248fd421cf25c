"""Timeline arithmetic: the window and cells of a timeline, and the counts placed in them
(fires and failures per cell from the database, skipped ranges by their ticks, or spread by
share of time where those cannot be named)."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from cronsource.adapters.infrastructure.readside.observations import Window
from cronsource.adapters.infrastructure.readside.rows import skip_last
from cronsource.domain.manifest import scheduling_options
from cronsource.domain.schedule import (
    CompiledSchedule,
    ScheduleError,
    compile_schedule,
    needs_anchor,
    resolve_schedules,
)
from cronsource.domain.timestamps import SMALLEST_STEP
from cronsource.projections.readmodel import StatusRow

#: The most ticks of one skipped range placed one by one; a longer range is spread by share
#: of time (off by at most one a cell, which beside hundreds is no lie).
PLACED_AT_MOST = 2000


def window_bounds(now: datetime, days: float, buckets: int) -> tuple[datetime, datetime, timedelta]:
    """(since, until, bucket) of a timeline of `buckets` cells over about `days` days ending
    with the cell that holds `now`: cells are at least a minute and aligned to their own
    length, so a page polling the timeline sees the same cells until the next one starts."""
    bucket = timedelta(seconds=max(60, round(days * 86400 / buckets)))
    step = bucket.total_seconds()
    until = datetime.fromtimestamp((now.timestamp() // step + 1) * step, UTC)
    return until - bucket * buckets, until, bucket


def timeline(
    rows: list[StatusRow],
    window: Window,
    since: datetime,
    until: datetime,
    bucket: timedelta,
) -> list[dict[str, Any]]:
    """Per CronWorkflow, one cell per `bucket` of [since, until): ticks fired, of which
    failed (the run ended Failed/Error, its submission was refused for good, or it was not
    started by its deadline), and ticks skipped by reason. Fires and failures are placed by
    the tick's scheduled time. A skipped range stores its first and last tick and its count,
    not each tick: its ticks are named by the CronWorkflow's schedule where that schedule
    gives exactly them (spread by share of time, a */10 schedule showed 7 skipped ticks in
    an hour), else spread over the cells it spans in proportion to time."""
    n = max(1, math.ceil((until - since) / bucket))
    cells: dict[str, list[dict[str, Any]]] = {
        f"{r.namespace}/{r.name}": [{} for _ in range(n)] for r in rows
    }
    schedules: dict[str, CompiledSchedule | None] = {}
    by_key = {f"{r.namespace}/{r.name}": r for r in rows}

    def add(key: str, i: int, field: str, k: int, reason: str | None = None) -> None:
        if not 0 <= i < n or key not in cells:
            return
        cell: dict[str, Any] = cells[key][i]
        if reason is None:
            cell[field] = cell.get(field, 0) + k
        else:
            cell.setdefault(field, {})
            cell[field][reason] = cell[field].get(reason, 0) + k

    for ns, name, i, k in window.fired:
        add(f"{ns}/{name}", i, "fired", k)
    for ns, name, i, k in window.failed:
        add(f"{ns}/{name}", i, "failed", k)
    for e in window.events:
        key, t = f"{e.namespace}/{e.name}", e.scheduled_time
        if t is None:
            continue
        if e.type == "ScheduleSkipped":
            count, last = e.detail.get("count", 1), skip_last(e)
            if key not in schedules and key in by_key:
                schedules[key] = _schedule_of(by_key[key])
            ticks = _ticks_of(schedules.get(key), t, last, count)
            placed = (
                [(math.floor((tick - since) / bucket), 1) for tick in ticks]
                if ticks is not None
                else _spread(t, last, count, since, bucket, n)
            )
            for i, k in placed:
                add(key, i, "skipped", k, e.reason or "Unknown")
        elif e.type == "RunNotStarted" or (
            e.type == "SubmissionFailed" and not e.detail.get("transient")
        ):
            add(key, math.floor((t - since) / bucket), "failed", 1)
    return [
        {
            "namespace": r.namespace,
            "name": r.name,
            "cells": cells[f"{r.namespace}/{r.name}"],
        }
        for r in rows
    ]


def _schedule_of(row: StatusRow) -> CompiledSchedule | None:
    """The CronWorkflow's schedule as it is now; None where it names no ticks by itself (an
    `@every`, whose ticks count from its creation) or cannot be compiled."""
    spec = row.spec
    expressions = [
        *(spec.get("schedules") or []),
        *([spec["schedule"]] if spec.get("schedule") else []),
    ]
    policy = scheduling_options(dict(row.metadata.get("annotations") or {})).dst_policy
    try:
        resolved = resolve_schedules(expressions, row.namespace, row.name)
        if not resolved or needs_anchor(resolved):
            return None
        return compile_schedule(resolved, spec.get("timezone") or "", policy)
    except (ScheduleError, ValueError):
        return None


def _ticks_of(
    schedule: CompiledSchedule | None, first: datetime, last: datetime, count: int
) -> list[datetime] | None:
    """The `count` ticks of a skipped range [first, last] (`last` to the end of its second),
    when `schedule` gives exactly those: the same first, last and number. None otherwise (the
    schedule changed since, or the range is longer than PLACED_AT_MOST)."""
    if schedule is None or count > PLACED_AT_MOST:
        return None
    ticks = list(itertools.islice(schedule.ticks_between(first - SMALLEST_STEP, last), count + 1))
    if len(ticks) != count or ticks[0] != first or ticks[-1] <= last - timedelta(seconds=1):
        return None
    return ticks


def _spread(
    first: datetime, last: datetime, count: int, since: datetime, bucket: timedelta, n: int
) -> list[tuple[int, int]]:
    """Split the `count` ticks of a skipped range [first, last] over the cells it overlaps,
    by share of time (ticks outside the window are dropped); the cells of the first and last
    tick, when inside the window, always get one."""

    def index(t: datetime) -> int:
        return math.floor((t - since) / bucket)

    a, b = index(first), index(last)
    if count <= 1 or last <= first or a == b:
        return [(a, count)] if 0 <= a < n else []
    lo, hi = max(a, 0), min(b, n - 1)
    if lo > hi:
        return []
    span = (last - first).total_seconds()
    exact = []
    for i in range(lo, hi + 1):
        c0 = since + i * bucket
        overlap = (min(last, c0 + bucket) - max(first, c0)).total_seconds()
        exact.append(max(overlap, 0.0) / span * count)
    total = min(count, max(1, round(sum(exact))))
    shares = [math.floor(x) for x in exact]
    for j in sorted(range(len(exact)), key=lambda j: exact[j] - shares[j], reverse=True):
        if sum(shares) >= total:
            break
        shares[j] += 1
    for i in (a, b):
        j = i - lo
        if lo <= i <= hi and shares[j] == 0:
            shares[j] = 1
            biggest = max(range(len(shares)), key=lambda k: shares[k])
            if shares[biggest] > 1 and sum(shares) > total:
                shares[biggest] -= 1
    return [(lo + j, k) for j, k in enumerate(shares) if k > 0]
