"""Why a CronWorkflow did or did not run at a time, from the decisions recorded for that
tick and, when there are none, from the live aggregate (`cronsource why`, GET .../decision)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from cronsource.adapters.application.objects import event_object
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.schedule import DstShift
from cronsource.domain.timestamps import SMALLEST_STEP
from cronsource.projections.readmodel import AuditRow, rfc3339, rfc3339_exact


def _values(detail: dict[str, Any]) -> str:
    values = detail.get("values") or {}
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "no variables"


def removed_before(kept_from: datetime) -> str:
    """The one line `history`, `why` and the HTTP audit queries say for a time before the
    retained window (`run --retain`)."""
    return (
        f"events before {rfc3339(kept_from)} were removed by retention: the log keeps them"
        " from then"
    )


def dst_words(shift: DstShift) -> str:
    """`03:00 EDT (02:30 does not exist on 2027-03-14)`: the tick in its zone and what DST
    did to it, as `why` says it."""
    local = shift.tick.astimezone(ZoneInfo(shift.zone))
    return f"{local:%H:%M} {local.tzname()} ({shift.note})"


def explain(
    agg: CronWorkflow | None,
    t: datetime,
    decisions: list[AuditRow],
    kept_from: datetime | None = None,
    shift: DstShift | None = None,
    then: CronWorkflow | None = None,
) -> dict[str, Any]:
    """Why the CronWorkflow did or did not run at `t`, and what DST did to that tick (`dst`):
    `shift` is given when the time asked was a wall time inside a gap and `t` the tick that
    ran for it; otherwise it is read from the live schedule. `then`: the CronWorkflow as it
    was at `t`, when `t` is at or before its last schedule change (its schedule then judges
    whether `t` was a tick)."""
    if shift is None and agg is not None:
        shift = agg.schedule.dst_shift(t)
    out = _explain(agg, t, decisions, kept_from, then)
    if shift is not None:
        out["dst"] = shift.as_dict()
        out["explanation"] = f"DST: the tick at {dst_words(shift)}; {out['explanation']}"
    return out


def _explain(
    agg: CronWorkflow | None,
    t: datetime,
    decisions: list[AuditRow],
    kept_from: datetime | None = None,
    then: CronWorkflow | None = None,
) -> dict[str, Any]:
    """Why the CronWorkflow did or did not run at `t`.

    `outcome` is Fired or Skipped when a decision for that tick is recorded, NotStarted when
    it fired and its Workflow was not created by its starting deadline. Otherwise it
    says why there is none: Pending (not decided yet: due, waiting for a resume, or waiting
    in the buffer for the active run),
    NotScheduled (at or before the creation or the last schedule change, whose ticks are
    never decided), NotATick (the schedule has no tick at `t`; `nextTick` names the next),
    or Unknown (no live CronWorkflow to ask, or a schedule that has changed since), or
    Removed (`t` is before `kept_from`: retention removed what was decided then).
    """
    if decisions and agg is not None and _between_skipped_ticks(agg, then, t, decisions):
        decisions = []  # judged below as any time without a decision: NotATick
    out: dict[str, Any] = {
        "at": rfc3339_exact(t),
        "decisions": [event_object(r) for r in decisions],
        "nextTick": None,
    }
    if decisions:
        fires = [r for r in decisions if r.type == "ScheduleFired"]
        if fires:
            f = fires[-1]
            out["outcome"] = "Fired"
            out["explanation"] = (
                f"fired ({f.detail.get('trigger', 'schedule')}) at {rfc3339(f.at)}"
                f" as workflow {f.workflow}"
            )
            skips = [r for r in decisions if r.type == "ScheduleSkipped"]
            if skips:
                out["explanation"] += f", after first being skipped ({skips[0].reason})"
            failed = [r for r in decisions if r.type == "SubmissionFailed"]
            if failed:
                last = failed[-1]
                retried = [r for r in failed if r.detail.get("transient")]
                if retried:
                    out["explanation"] += (
                        f"; its create failed with a transient error at {rfc3339(retried[0].at)}"
                        " and was retried"
                    )
                if not last.detail.get("transient"):
                    out["outcome"] = "SubmissionFailed"
                    out["reason"] = last.reason
                    out["explanation"] += (
                        f"; failed to submit (recorded at {rfc3339(last.at)}):"
                        f" {last.detail.get('message')}"
                    )
            not_started = [r for r in decisions if r.type == "RunNotStarted"]
            if not_started:
                n = not_started[-1]
                out["outcome"] = "NotStarted"
                out["reason"] = n.reason
                out["explanation"] += (
                    f"; not started (recorded at {rfc3339(n.at)}): {n.detail.get('message')}"
                )
        else:
            # A RunNotStarted always follows its fire; the skip is the decision here.
            s = next((r for r in reversed(decisions) if r.type == "ScheduleSkipped"), decisions[-1])
            count = s.detail.get("count", 1)
            span = (
                f"ticks {rfc3339(s.scheduled_time)}..{s.detail.get('lastScheduledTime')}"
                f" ({count} ticks)"
                if count > 1
                else f"tick {rfc3339(s.scheduled_time)}"
            )
            message = s.detail.get("message")
            out["outcome"] = "Skipped"
            out["reason"] = s.reason
            out["explanation"] = f"skipped: {s.reason}, decided at {rfc3339(s.at)} for {span}" + (
                f": {message}" if message else ""
            )
            expression = s.detail.get("expression")
            if expression:
                # Recorded since ScheduleSkipped v2: what `when` saw when it said false.
                out["explanation"] += f"; when {expression!r} read {_values(s.detail)}"
        return out
    # A tick a backfill still holds in its queue is kept whatever its age: Pending, below.
    if kept_from is not None and t < kept_from and (agg is None or t not in agg.backfill_queue):
        out["outcome"] = "Removed"
        out["explanation"] = removed_before(kept_from)
        return out
    if agg is None:
        out["outcome"] = "Unknown"
        out["explanation"] = "no decision is recorded for this time and no live CronWorkflow"
        return out
    if then is not None and t <= agg.baseline:
        if then.baseline < t:
            return _under_old_schedule(out, then, t, agg.baseline)
        agg = then  # at or before its baseline then: NotScheduled names that one
    is_tick = agg.schedule.next_after(t - SMALLEST_STEP) == t
    if is_tick and t in agg.backfill_queue:
        out["outcome"] = "Pending"
        out["explanation"] = (
            "queued by a backfill: it runs when the backfill runs before it have ended"
        )
        return out
    if not is_tick:
        nxt = agg.schedule.next_after(t)
        out["outcome"] = "NotATick"
        out["nextTick"] = rfc3339_exact(nxt)
        out["explanation"] = (
            f"the schedule has no tick at this time; the next is {rfc3339_exact(nxt)}"
        )
    elif t <= agg.baseline:
        out["outcome"] = "NotScheduled"
        out["explanation"] = (
            f"{_not_scheduled_since(agg, t)}: the scheduler never runs ticks before that;"
            " a backfill can (cronsource backfill, POST .../backfill)"
        )
    elif t > agg.decided_until:
        out["outcome"] = "Pending"
        if agg.suspended:
            out["explanation"] = "not decided yet: suspended, the tick is decided on resume"
        elif agg.failure_pause is not None:
            out["explanation"] = (
                f"not decided yet: paused after {len(agg.failure_pause)} consecutive failed"
                f" runs ({', '.join(agg.failure_pause)}); the tick is decided on resume, as"
                " PausedAfterFailures unless it runs as the catch-up"
            )
        elif agg.spec_error:
            out["explanation"] = f"not decided yet: the spec was rejected ({agg.spec_error})"
        else:
            out["explanation"] = "not decided yet: the scheduler decides it when it is due"
        skip = agg.exclusion_at(t)
        if skip is not None and not agg.suspended:
            # What the calendars say now; the decision reads them as they are then.
            out["excluded"] = {"reason": skip.reason, "message": skip.message, **dict(skip.detail)}
            out["explanation"] += f"; as the calendars are now it will be skipped ({skip.reason}:"
            out["explanation"] += f" {skip.message})"
    elif t in agg.buffered:
        out["outcome"] = "Pending"
        out["explanation"] = _buffered(agg, t)
    else:
        out["outcome"] = "Unknown"
        out["explanation"] = "no decision is recorded for this tick"
    return out


def _between_skipped_ticks(
    agg: CronWorkflow, then: CronWorkflow | None, t: datetime, decisions: list[AuditRow]
) -> bool:
    """Whether the only decisions found are ranges of skipped ticks (one ScheduleSkipped for a
    suspension's, a deadline's many) that `t` lies inside without being one of their ticks:
    `why` said Skipped for 01:05 of a `*/10` schedule while suspended, and NotATick beside a
    fire. The schedule in force then judges (`then`, for a time before the last change)."""
    if any(r.type != "ScheduleSkipped" or r.scheduled_time == t for r in decisions):
        return False
    judge = then if then is not None and t <= agg.baseline else agg
    return bool(judge.schedule.next_after(t - SMALLEST_STEP) != t)


def _not_scheduled_since(agg: CronWorkflow, t: datetime) -> str:
    """When the scheduler's first tick after `t` came: the creation when `t` is before it or
    nothing moved the baseline since (it said "created or its schedule last changed" for
    a time years before the CronWorkflow existed)."""
    created = agg.created_on
    if t < created:
        return f"before {rfc3339(created)}, when the CronWorkflow was created"
    if agg.baseline == created:
        return f"at {rfc3339(created)}, when the CronWorkflow was created"
    return (
        f"at or before {rfc3339(agg.baseline)}, when its schedule last changed (or Argo's"
        " cron controller last ran it, for one handed over)"
    )


def _under_old_schedule(
    out: dict[str, Any], then: CronWorkflow, t: datetime, changed: datetime
) -> dict[str, Any]:
    """`t` lies before the schedule last changed (at `changed`), under the one then in force:
    whether it was a tick is that schedule's to say, not today's."""
    nxt = then.schedule.next_after(t - SMALLEST_STEP)
    if nxt != t:
        nxt = then.schedule.next_after(t)
        out["outcome"] = "NotATick"
        out["nextTick"] = rfc3339_exact(nxt) if nxt <= changed else None
        out["explanation"] = "the schedule in force then had no tick at this time; " + (
            f"its next was {rfc3339_exact(nxt)}"
            if nxt <= changed
            else f"it changed at {rfc3339(changed)} before its next"
        )
        return out
    out["outcome"] = "Unknown"
    out["explanation"] = (
        "no decision is recorded for this tick of the schedule in force then (it changed at"
        f" {rfc3339(changed)})"
    )
    return out


def _buffered(agg: CronWorkflow, t: datetime) -> str:
    """A tick waiting in the buffer (buffered overlap): what it waits for, and until when."""
    runs = ", ".join(sorted(agg.active)) or "no run: it starts at the scheduler's next turn"
    deadline = agg.policy().deadline
    until = (
        f"; skipped (DeadlineExceeded) if still waiting at {rfc3339(t + deadline)}"
        if deadline
        else ""
    )
    return (
        "not decided yet: waiting in the buffer (cronsource.io/overlap:"
        f" {agg.annotations.get('cronsource.io/overlap')}) for {runs}; it starts when no run"
        f" is active, oldest first{until}"
    )
