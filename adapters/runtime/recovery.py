"""Runs the world has and the log lost: recorded, so that the log matches the world again.

A fire is committed before its Workflow is created, so after a normal crash every Workflow has
its fire in the log. After a failover to an asynchronous standby it may not: the old primary
committed the fire, the dispatcher created the Workflow, and the promoted standby never got
the fire. The scheduler then decides that tick again on the log it has (as missed, usually),
and the log would say a run that exists never happened. So after start-up, and whenever the
store turns out to be another server, the runtime lists the Workflows that exist with our
label and scheduled-time annotation, and records each one the log has no event for as a
RunRecovered (domain/cronworkflow.py `recover_run`): its tick is then decided by it, never
fired again, and the run counts as active until its end is reported.

Only while the read model is at the head of the log: a fire committed but not yet projected is
not a lost one.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.service import NotFound
from cronsource.domain.timestamps import SMALLEST_STEP, TimestampError, parse_timestamp
from cronsource.projections.dispatch import ANNOTATION_SCHEDULED, LABEL_CRON

log = logging.getLogger("cronsource")

REASON = (
    "the Workflow exists and the log had no fire for it (the log lost it: a failover to a"
    " standby that had not received it?)"
)


def recover_lost_runs(engine: Engine, found: Iterable[dict[str, Any]], now: datetime) -> int | None:
    """Record every Workflow in `found` (metadata dicts) that is ours and that the log has no
    fire or recovery for; returns how many were recorded, or None when the read model is
    behind the log (look again later)."""
    projector = engine.projector
    if projector.position() < projector.head():
        return None
    by_namespace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for meta in found:
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        if labels.get(LABEL_CRON) and annotations.get(ANNOTATION_SCHEDULED) and meta.get("name"):
            by_namespace[meta.get("namespace") or "default"].append(meta)
    lost: list[tuple[datetime, str, dict[str, Any]]] = []
    for namespace, metas in by_namespace.items():
        known = engine.view.recorded_workflows(namespace, [m["name"] for m in metas])
        for meta in metas:
            if meta["name"] in known:
                continue
            # Within the times a schedule can name (1970-2199), as a user's time is: a tick of
            # year 9999 or 0001 is none of ours, and asking the schedule near either end of
            # `datetime` overflowed, which stopped every recovery while that Workflow existed.
            tick = _time(meta["annotations"][ANNOTATION_SCHEDULED], bounded=True)
            if tick is not None:
                lost.append((tick, namespace, meta))
    recorded = 0
    for tick, namespace, meta in sorted(lost, key=lambda x: (x[0], x[2]["name"])):
        cron, name = meta["labels"][LABEL_CRON], meta["name"]
        owners = {str(o.get("uid")) for o in meta.get("ownerReferences") or []}
        agg = _owner(engine, namespace, cron, owners)
        if agg is None:
            continue  # not ours: another controller's, or a CronWorkflow we do not hold
        tick = _exact_tick(agg, tick)
        trigger = "schedule" if name == workflow_name(cron, tick) else "manual"
        created = _time(meta.get("creationTimestamp")) or now
        if engine.service.recover_run(agg.id, name, tick, trigger, created, REASON, now):
            recorded += 1
            log.warning(
                "recovered run %s/%s (tick %s): its Workflow exists but the log had no fire"
                " for it; recorded as RunRecovered",
                namespace,
                name,
                tick.isoformat(),
            )
    return recorded


def _owner(engine: Engine, namespace: str, cron: str, owners: set[str]) -> Any:
    """The live CronWorkflow of that name whose uid (or stream id) owns the Workflow."""
    try:
        agg = engine.service.find(namespace, cron)
    except NotFound:
        return None
    return agg if (agg.uid or str(agg.id)) in owners else None


def _exact_tick(agg: Any, annotated: datetime) -> datetime:
    """The tick the annotation names: it keeps whole seconds (RFC 3339 as Argo writes it),
    while an `@every` tick keeps the creation time's fraction. The schedule's tick in that
    second, if there is one; else the annotated time (a manual run's). Asked from just before
    the annotated second, as the tick may come at any fraction of it: an `@every` created at
    10:00:00.27 ticks at .27 of a second. (Asked from a whole second earlier, it found the
    tick of the second before, and a fire of 10:00:05.27 was recovered as 10:00:05.)"""
    tick = agg.schedule.next_after(annotated - SMALLEST_STEP)
    if tick is not None and int(tick.timestamp()) == int(annotated.timestamp()):
        return tick  # type: ignore[no-any-return]
    return annotated


def _time(text: Any, *, bounded: bool = False) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return parse_timestamp(text, "time", naive_is_utc=True, bounded=bounded)
    except TimestampError:
        return None
