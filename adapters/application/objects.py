"""The JSON shapes the CLI (`-o json`) and the HTTP API answer with: an audit event with its
log position, a backfill's outcome, the next fire times. One function each, so both
entrypoints print the same thing (a CronWorkflow as Argo's object is `StatusRow.as_object`,
beside the row type in projections/readmodel.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from cronsource.domain.backfill import BackfillPlan
from cronsource.domain.cronworkflow import CronWorkflow, workflow_name
from cronsource.domain.schedule import local_zone
from cronsource.projections.readmodel import AuditRow, rfc3339


def event_object(row: AuditRow) -> dict[str, Any]:
    """An audit row as `history -o json` prints it, plus its log `position` (for paging)."""
    out = row.as_event()
    out["position"] = row.notification_id
    return out


def backfill_result(name: str, plan: BackfillPlan, dry_run: bool) -> dict[str, Any]:
    """A backfill as `backfill -o json` and POST .../backfill answer it: the counts, and
    each tick with what happens to it (fire, queue, skip)."""
    prefix = "would " if dry_run else ""
    actions = (
        [(t, prefix + "fire") for t in plan.fire]
        + [(t, prefix + "queue") for t in plan.queue]
        + [(t, "skip") for t in plan.skip]
    )
    return {
        "dryRun": dry_run,
        "overlap": plan.overlap,
        "parallel": plan.parallel,
        "ticks": plan.candidates,
        "count": len(plan.runs),
        "fired": 0 if dry_run else len(plan.fire),
        "queued": 0 if dry_run else len(plan.queue),
        "skipped": len(plan.skip),
        "skipReason": plan.skip_reason or None,
        "alreadyFired": len(plan.fired_before),
        "alreadyQueued": len(plan.queued_before),
        "items": [
            {"scheduledTime": rfc3339(t), "workflow": workflow_name(name, t), "action": a}
            for t, a in sorted(actions)
        ],
    }


def next_fire_times(agg: CronWorkflow, now: datetime, count: int) -> list[dict[str, Any]]:
    """The next `count` fire times after now (or after the last decided tick, if later), in
    the CronWorkflow's zone and in UTC; the same as `cronsource next`. A tick that DST moved
    out of a gap, or the one run of a repeated wall time, carries `dst` (DstShift.as_dict);
    one a calendar excludes carries `excluded` (reason, message, calendar, version, date):
    it is listed, and does not run. Fewer than `count` when the rest would fall past the
    calendar's end (year 9999), where a long `@every` gets within its bound of 1,000."""
    zone = ZoneInfo(local_zone(agg.spec))
    t = max(now, agg.decided_until)
    out = []
    for _ in range(count):
        try:
            t = agg.schedule.next_after(t)
        except OverflowError:
            break  # past year 9999 (`@every 876000h`, 80 times): no tick there to list
        item: dict[str, Any] = {"local": t.astimezone(zone).isoformat(), "utc": rfc3339(t)}
        shift = agg.schedule.dst_shift(t)
        if shift is not None:
            item["dst"] = shift.as_dict()
        skip = agg.exclusion_at(t)
        if skip is not None:
            # Excluded by a calendar as it is now (a later change of it is seen when decided).
            item["excluded"] = {"reason": skip.reason, "message": skip.message, **dict(skip.detail)}
        out.append(item)
    return out
