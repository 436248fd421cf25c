"""JSON the status page needs beyond the resource API: is any scheduler deciding, and which
Workflows a CronWorkflow made with their phases.

Its router is adapters/entrypoints/http/routers/statuspage.py; the page's queries live here, next to
each other, so the resource API stays what docs/http-api.md documents.

Whether a scheduler is alive is read from what the store records, not from a heartbeat (a
heartbeat is only logged): the due index (`cronsource_status.next_due`) says when each
CronWorkflow next needs a decision. A tick due longer ago than the late tolerance that no one has
decided means no scheduler is deciding it: a live one decides a tick within the tolerance, or
the tick would be recorded as missed. That holds whatever the schedules are (a daily schedule has
no decision for hours and is still fine), and it is exactly the case in which the page would
otherwise show a "next run" in the past. The time of the latest scheduled decision and the number
of `cronsource run` processes holding the store (adapters/application/presence.py: their member
locks on PostgreSQL, the projector file lock on SQLite; the CLI reads the same) are shown beside it
to say why.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from cronsource.adapters.application.presence import replicas, schedulers_running
from cronsource.adapters.infrastructure.readside.queries import Queries
from cronsource.adapters.runtime.engine import Engine
from cronsource.projections.readmodel import AuditRow, rfc3339

#: How many overdue CronWorkflows the answer names (the count covers all of them).
OVERDUE_LISTED = 20
#: Fires by a person or a backfill are not the scheduler deciding.
_NOT_SCHEDULER = ("manual", "backfill")


def scheduler_health(engine: Engine, now: datetime) -> dict[str, Any]:
    view = engine.view
    tolerance = engine.service.late_tolerance
    count, overdue = view.overdue(now - tolerance, OVERDUE_LISTED)
    return {
        "now": rfc3339(now),
        "lateToleranceSeconds": tolerance.total_seconds(),
        "stale": count > 0,
        "overdueCount": count,
        "overdue": [{"namespace": ns, "name": n, "dueAt": rfc3339(due)} for ns, n, due in overdue],
        "lastDecisionAt": _last_decision(view),
        "schedulers": schedulers_running(engine),
        "replicas": [
            {k: r[k] for k in ("replica", "shards", "projector", "live")} for r in replicas(engine)
        ],
    }


def _last_decision(view: Queries) -> str | None:
    """The newest scheduled decision, read from the end of the log."""
    for row in view.latest_decisions(200):
        if row.detail.get("trigger") not in _NOT_SCHEDULER:
            return rfc3339(row.at)
    return None


def child_workflows(
    view: Queries, namespace: str, name: str, active: Sequence[str], limit: int
) -> list[dict[str, Any]]:
    """The newest `limit` Workflows fired for the CronWorkflow, with how each ended."""
    fires = view.latest_fires(namespace, name, limit)
    names = [f.workflow for f in fires if f.workflow]
    ends: dict[str, AuditRow] = {}
    for row in view.run_ends(namespace, name, names):
        if row.type == "SubmissionFailed" and row.detail.get("transient"):
            continue  # retried: not an end
        if row.workflow is not None:
            ends[row.workflow] = row
    running = set(active)
    out = []
    for f in fires:
        wf = f.workflow or ""
        end = ends.get(wf)
        item: dict[str, Any] = {
            "name": wf,
            "scheduledTime": rfc3339(f.scheduled_time),
            "createdAt": rfc3339(f.at),
            "trigger": f.detail.get("trigger", "schedule"),
        }
        if end is None:
            item["phase"] = "Active" if wf in running else "Unknown"
        elif end.type == "RunCompleted":
            item["phase"] = end.detail.get("phase", "Unknown")
            item["finishedAt"] = end.detail.get("finishedAt") or rfc3339(end.at)
        elif end.type == "SubmissionFailed":
            item["phase"] = "SubmissionFailed"
            item["message"] = end.detail.get("message")
        elif end.type == "RunNotStarted":
            item["phase"] = "NotStarted"
            item["message"] = end.detail.get("message")
        else:
            item["phase"] = "Vanished"
        out.append(item)
    return out
