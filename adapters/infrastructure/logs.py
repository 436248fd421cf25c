"""Structured logs: JSON lines when stderr is not a terminal, readable text when it is.

Scheduling lines carry `cronWorkflow` (namespace/name), `tick` (the scheduled time, RFC 3339)
and `version` (the aggregate version the decision was saved at) as fields, so a log search for
one CronWorkflow or one tick finds every line about it:

    log.info("fired", extra=scheduling_fields("default", "nightly", tick, 7, workflow=w))

Each scheduler replica logs the decisions it saved itself, with `decidedBy` (its identity), as
soon as the store took them (adapters/runtime/scheduler.py): a decision the store refused (a
stale replica) was never made and never logged. `DecisionLog` writes one such line per other
event from the audit view (the committed log), on the projector: runs completed, submissions
failed, changes, and the decisions that name no replica (manual runs, backfills, events written
before `decidedBy` existed).

`run` adds its replica identity to every line (`replica_filter`), so the lines of several
replicas can be told apart.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

from cronsource.adapters.infrastructure.readside.queries import Queries
from cronsource.projections.readmodel import rfc3339

_MARK = "_cronsource_handler"
#: LogRecord attributes that are not fields of the line (everything else given in `extra=` is).
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's ANSI-coloured copy of msg
}


def scheduling_fields(
    namespace: str,
    name: str,
    tick: datetime | None,
    version: int | None,
    **more: Any,
) -> dict[str, Any]:
    """The `extra=` of a scheduling line: cronWorkflow, tick and version, plus `more`."""
    fields: dict[str, Any] = {
        "cronWorkflow": f"{namespace}/{name}",
        "tick": rfc3339(tick),
        "version": version,
    }
    fields.update({k: v for k, v in more.items() if v is not None})
    return fields


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def _plain(v: Any) -> Any:
    if isinstance(v, datetime):
        return rfc3339(v)
    return v


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in _fields(record).items():
            out[k] = _plain(v)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """`time level logger: message key=value ...` for people at a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = " ".join(f"{k}={_plain(v)}" for k, v in _fields(record).items())
        if extra:
            head, sep, tail = line.partition("\n")  # keep a traceback below the fields
            line = f"{head} {extra}{sep}{tail}"
        return line


class ReplicaFilter(logging.Filter):
    """Adds `replica` (this process's replica identity) to every record that has none, so
    that each line of `run` says which replica wrote it."""

    def __init__(self, replica: str) -> None:
        super().__init__()
        self.replica = replica

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "replica"):
            record.replica = self.replica
        return True


def replica_filter(handler: logging.Handler, replica: str) -> None:
    """Name `replica` on every line `handler` writes (replacing a filter set before)."""
    for f in list(handler.filters):
        if isinstance(f, ReplicaFilter):
            handler.removeFilter(f)
    handler.addFilter(ReplicaFilter(replica))


def configure_logging(
    level: int | str = logging.INFO,
    *,
    stream: IO[str] | None = None,
    json_lines: bool | None = None,
) -> logging.Handler:
    """Log to `stream` (default stderr) from the root logger: JSON lines unless the stream is
    a terminal (`json_lines` forces either). Calling it again replaces the handler it installed
    before, and leaves other handlers (pytest's, say) alone. Returns the handler."""
    stream = stream or sys.stderr
    if json_lines is None:
        isatty = getattr(stream, "isatty", None)
        json_lines = not (isatty is not None and isatty())
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    setattr(handler, _MARK, True)
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _MARK, False):
            root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level)
    # uvicorn's loggers: no handlers of their own, so their lines come out in our format
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
    return handler


class DecisionLog:
    """One log line per committed event, read from the audit view after a position.

    Starts at the current end of the audit log (history is in the audit log; logging it again
    at every restart would only repeat it). `emit_new()` returns how many lines it wrote.
    """

    def __init__(
        self, view: Queries, logger: logging.Logger | None = None, page: int = 1000
    ) -> None:
        self.view = view
        self.log = logger or logging.getLogger("cronsource.decisions")
        self.page = page
        self.position = view.audit_head()

    def emit_new(self) -> int:
        written = 0
        while True:
            rows = self.view.audit(after_position=self.position, limit=self.page)
            for row in rows:
                self._emit(row)
                self.position = row.notification_id
            written += len(rows)
            if len(rows) < self.page:
                return written

    def _emit(self, row: Any) -> None:
        d = row.detail
        if row.type in ("ScheduleFired", "ScheduleSkipped") and d.get("decidedBy"):
            return  # logged by the replica that decided it, when it decided
        fields = scheduling_fields(
            row.namespace,
            row.name,
            row.scheduled_time,
            row.version,
            event=row.type,
            reason=row.reason,
            workflow=row.workflow,
            trigger=d.get("trigger"),
            count=d.get("count"),
            lastTick=d.get("lastScheduledTime"),
            phase=d.get("phase"),
            position=row.notification_id,
        )
        level = (
            logging.WARNING if row.type in ("SubmissionFailed", "SpecRejected") else logging.INFO
        )
        self.log.log(level, _summary(row), extra=fields)


def _summary(row: Any) -> str:
    what = {
        "ScheduleFired": f"fired {row.workflow}",
        "ScheduleSkipped": f"skipped ({row.reason})",
        "RunCompleted": f"run {row.workflow} {row.detail.get('phase', '')}".rstrip(),
        "SubmissionFailed": f"submission of {row.workflow} failed"
        + (f" ({row.reason})" if row.reason else "")
        + f": {row.detail.get('message')}",
        "SubmissionRecovered": f"{row.workflow} created after"
        f" {row.detail.get('attempts')} attempts",
    }.get(row.type, row.type)
    return f"{row.namespace}/{row.name} {what}"
