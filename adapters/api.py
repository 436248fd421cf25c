"""The operations behind the HTTP API, free of HTTP: commands (the version policy itself is
the service's: `CronService.command`'s `expected_version`), the read queries over the read
model, request-side time parsing and the audit's vocabulary (event types, skip reasons).

The shapes answered (adapters/objects.py), label selectors (adapters/selectors.py), "why did
it run at T" (adapters/explain.py) and timeline arithmetic (adapters/http/timeline.py) are
modules of their own.

The read queries use the SQL read model's own connection (`SqlReadModel._query`): the audit
filters the API needs (reason, scheduled-time ranges) are not part of its public methods yet.
They are read-only and use only columns of the documented tables (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, get_args
from uuid import UUID

from adapters.engine import Engine
from adapters.sqlview import AUDIT_COLUMNS, STATUS_COLUMNS, audit_from_row
from domain.backfill import BackfillPlan, BackfillTooLarge, Overlap
from domain.cronworkflow import CronWorkflow
from domain.decisions import SkipReason
from domain.manifest import CronWorkflowManifest
from domain.service import AlreadyExists, StaleVersion, topic_type
from domain.timestamps import TimestampError, parse_timestamp
from projections.readmodel import AuditRow

T = TypeVar("T")

_TICK = timedelta(microseconds=1)
DECISION_TYPES = ("ScheduleFired", "ScheduleSkipped")
#: Every event type of the audit log, read from the aggregate's event classes, and every
#: skip reason: a filter naming anything else is a typo, refused rather than answered empty.
EVENT_TYPES: tuple[str, ...] = tuple(
    sorted(
        topic_type(v.TOPIC)
        for v in vars(CronWorkflow).values()
        if isinstance(v, type) and hasattr(v, "TOPIC") and v is not CronWorkflow
    )
)
SKIP_REASONS: tuple[str, ...] = get_args(SkipReason)


class FieldError(ValueError):
    """Bad input, naming the field (camelCase, as the client wrote it) and where it was."""

    def __init__(self, field: str, message: str, location: str = "query") -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.location = location


def parse_time(value: str, field: str) -> datetime:
    """RFC 3339 (a `Z` or an offset; no offset means UTC), within the bounds of
    domain/timestamps.py, as a FieldError for the API's problem responses."""
    try:
        return parse_timestamp(value, field, naive_is_utc=True)
    except TimestampError as e:
        raise FieldError(field, e.reason) from None


def _ts(t: datetime) -> float:
    return t.timestamp()


# ---------------------------------------------------------------------- read queries


@dataclass(frozen=True)
class EventFilter:
    namespace: str | None = None
    name: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    types: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    after: int = 0
    limit: int = 100


class ReadQueries:
    """Queries over the read model tables (status and audit) that the API needs."""

    def __init__(self, engine: Engine) -> None:
        self.view = engine.view

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self.view.query(sql, args)

    def status(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The live CronWorkflow of that name as the read model shows it, or None."""
        rows = self._query(
            f"SELECT {STATUS_COLUMNS} FROM cronsource_status"
            " WHERE namespace = ? AND name = ? AND deleted = 0",
            (namespace, name),
        )
        return self.view.status_from_row(rows[0]) if rows else None

    def ever_existed(self, namespace: str, name: str) -> bool:
        rows = self._query(
            "SELECT 1 FROM cronsource_audit WHERE namespace = ? AND name = ? LIMIT 1",
            (namespace, name),
        )
        return bool(rows)

    def events(self, f: EventFilter) -> list[AuditRow]:
        """One page of the audit log in log order, after position `f.after`."""
        sql = f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit WHERE notification_id > ?"
        args: list[Any] = [f.after]
        for column, value in (("namespace", f.namespace), ("name", f.name)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        if f.since is not None:
            sql += " AND at >= ?"
            args.append(_ts(f.since))
        if f.until is not None:
            sql += " AND at <= ?"
            args.append(_ts(f.until))
        for column, values in (("type", f.types), ("reason", f.reasons)):
            if values:
                sql += f" AND {column} IN (" + ", ".join("?" for _ in values) + ")"
                args.extend(values)
        sql += " ORDER BY notification_id LIMIT ?"
        args.append(f.limit)
        return [audit_from_row(r) for r in self._query(sql, args)]

    def decisions_at(self, namespace: str, name: str, t: datetime) -> list[AuditRow]:
        """The decisions recorded for the tick at `t`: a ScheduleFired for exactly `t`, or a
        ScheduleSkipped whose range of ticks covers `t`, in log order (a skipped tick may
        be backfilled later, so both can appear).

        A decision is always recorded at or after its tick, so `at >= t` bounds the scan to
        the decisions made since then that started at or before `t`.
        """
        rows = self._query(
            f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit WHERE namespace = ? AND name = ?"
            " AND type IN ('ScheduleFired', 'ScheduleSkipped')"
            " AND scheduled_time <= ? AND at >= ? ORDER BY notification_id",
            (namespace, name, _ts(t) + 0.0005, _ts(t) - 0.0005),
        )
        out = []
        for row in map(audit_from_row, rows):
            assert row.scheduled_time is not None
            if row.type == "ScheduleFired":
                if abs((row.scheduled_time - t).total_seconds()) < 0.001:
                    out.append(row)
            elif row.scheduled_time <= t <= skip_last(row):
                out.append(row)
        return out

    def _json(self, column: str, key: str) -> str:
        """A field of a JSON `detail` column, in this database's dialect."""
        if self.view.is_sqlite:  # SQLite
            return f"json_extract({column}, '$.{key}')"
        return f"({column}::json ->> '{key}')"

    def _cell(self, column: str) -> str:
        """The timeline cell of a time column: floor((t - since) / step), given t >= since."""
        if self.view.is_sqlite:
            return f"CAST(({column} - ?) / ? AS INTEGER)"  # truncation is floor here
        return f"FLOOR(({column} - ?) / ?)::bigint"

    def window(
        self,
        namespace: str | None,
        name: str | None,
        since: datetime,
        until: datetime,
        step: timedelta,
    ) -> Window:
        """What a timeline of [since, until) in cells of `step` needs. Fires and failed runs
        are counted per cell by the database (an every-minute CronWorkflow has 10,080 fires
        a week: they never travel as rows); skipped ranges and refused submissions, which
        are few, come as rows."""
        where, scope = "", []
        for column, value in (("namespace", namespace), ("name", name)):
            if value is not None:
                where += f" AND f.{column} = ?"
                scope.append(value)
        s, u, w = _ts(since), _ts(until), step.total_seconds()
        fired = self._query(
            f"SELECT f.namespace, f.name, {self._cell('f.scheduled_time')}, COUNT(*)"
            " FROM cronsource_audit f WHERE f.type = 'ScheduleFired'"
            f" AND f.scheduled_time >= ? AND f.scheduled_time < ?{where}"
            " GROUP BY 1, 2, 3",
            [s, w, s, u, *scope],
        )
        phase = self._json("r.detail", "phase")
        failed = self._query(
            f"SELECT f.namespace, f.name, {self._cell('f.scheduled_time')}, COUNT(*)"
            " FROM cronsource_audit f JOIN cronsource_audit r"
            " ON r.namespace = f.namespace AND r.name = f.name AND r.workflow = f.workflow"
            " AND r.type = 'RunCompleted'"
            f" WHERE f.type = 'ScheduleFired' AND {phase} IN ('Failed', 'Error')"
            f" AND f.scheduled_time >= ? AND f.scheduled_time < ?{where}"
            " GROUP BY 1, 2, 3",
            [s, w, s, u, *scope],
        )
        rows = self._query(
            f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit f WHERE"
            " ((f.type = 'ScheduleSkipped' AND f.scheduled_time < ? AND f.at >= ?)"
            " OR (f.type = 'SubmissionFailed' AND f.scheduled_time >= ? AND f.scheduled_time < ?))"
            f"{where} ORDER BY notification_id",
            [u, s, s, u, *scope],
        )
        return Window(
            fired=[(r[0], r[1], int(r[2]), int(r[3])) for r in fired],
            failed=[(r[0], r[1], int(r[2]), int(r[3])) for r in failed],
            events=[audit_from_row(r) for r in rows],
        )


@dataclass(frozen=True)
class Window:
    """Timeline inputs: (namespace, name, cell, count) of fires and of failed runs, and the
    skipped ranges and refused submissions as audit rows."""

    fired: list[tuple[str, str, int, int]]
    failed: list[tuple[str, str, int, int]]
    events: list[AuditRow]


def skip_last(row: AuditRow) -> datetime:
    """The last tick of a skipped range (stored to the second, so its whole second counts)."""
    last = row.detail.get("lastScheduledTime")
    assert row.scheduled_time is not None
    if not last:
        return row.scheduled_time
    return parse_time(last, "lastScheduledTime") + timedelta(seconds=1) - _TICK


# ---------------------------------------------------------------------- commands


class Operations:
    """Commands over the engine as the API offers them.

    Without an expected version a command behaves as the CLI's: on a lost race the service
    re-decides on fresh state. With one (`If-Match`) the service holds the aggregate to
    exactly that version (`CronService.command`'s `expected_version`); a refusal is
    counted here, for the metrics.

    Commands take no lock of their own: two requests race on the store's version check as
    two processes would. Each command's response reflects its own write: it waits for the
    projections to pass its receipt (`Projector.settle`), and only the projector moves them.
    """

    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self.engine = engine
        self.clock = clock
        self.if_match_rejections = 0

    @property
    def service(self) -> Any:
        return self.engine.service

    def refresh(self) -> None:
        """Before a read: project what is new if no projector runs anywhere, else read what
        the projector has reached (no write of the reader's own is at stake)."""
        self.engine.projector.settle(wait=False)

    @contextmanager
    def _settled(self) -> Iterator[None]:
        """Run a command, then wait until the read model shows what it wrote."""
        with self.service.receipt() as wrote:
            yield
        self.engine.projector.settle(wrote)

    def find(self, namespace: str, name: str) -> CronWorkflow:
        agg: CronWorkflow = self.service.find(namespace, name)
        return agg

    @contextmanager
    def _counting_stale(self) -> Iterator[None]:
        try:
            yield
        except StaleVersion:
            self.if_match_rejections += 1
            raise

    def apply(
        self,
        manifest: CronWorkflowManifest,
        *,
        expected: int | None = None,
        must_exist: bool = False,
        must_not_exist: bool = False,
    ) -> tuple[UUID, str]:
        """Create or update; returns (id, created|updated|unchanged)."""
        meta = manifest.metadata
        at = self.clock()
        with self._settled():
            if must_not_exist:
                return self._create(manifest, expected, at)
            if must_exist:
                self.service.find(meta.namespace, meta.name, meta.uid or "")  # NotFound: 404
            with self._counting_stale():
                result: tuple[UUID, str] = self.service.apply(manifest, at, expected)
        return result

    def _create(
        self, manifest: CronWorkflowManifest, expected: int | None, at: datetime
    ) -> tuple[UUID, str]:
        """Create only (`If-None-Match: *`), decided by the store (`CronService.create`), so
        two replicas creating one name at once get one 201 and one AlreadyExists.

        A live object of that name under another uid (one the Kubernetes watch synced) counts
        as existing too; that check reads the read model, caught up first.
        """
        meta = manifest.metadata
        if expected is not None:
            raise FieldError(
                "If-None-Match",
                "'*' (create only) cannot be combined with If-Match or metadata.resourceVersion",
                "header",
            )
        self.engine.projector.settle()
        row = ReadQueries(self.engine).status(meta.namespace, meta.name)
        if row is not None:
            raise AlreadyExists(meta.namespace, meta.name, int(row["version"]))
        cron_id: UUID = self.service.create(manifest, at)
        return cron_id, "created"

    def command(
        self,
        namespace: str,
        name: str,
        do: Callable[[CronWorkflow, datetime], T],
        expected: int | None = None,
    ) -> tuple[T, int]:
        """Run `do(aggregate, now)` on the live CronWorkflow; returns (result, new version)."""
        at = self.clock()
        with self._settled():
            agg = self.service.find(namespace, name)
            box: list[int] = []

            def attempt(a: CronWorkflow) -> T:
                r = do(a, at)
                box[:] = [a.version]
                return r

            with self._counting_stale():
                result: T = self.service.command(agg.id, attempt, expected)
        return result, box[0]

    def backfill(
        self,
        namespace: str,
        name: str,
        start: datetime,
        end: datetime,
        dry_run: bool,
        max_ticks: int,
        *,
        overlap: Overlap | None = None,
        parallel: int | None = None,
    ) -> BackfillPlan:
        """Backfill [start, end] as domain/backfill.py rules (overlap default: the
        CronWorkflow's concurrencyPolicy). More than `max_ticks` ticks is refused before
        anything is computed in full."""
        at = self.clock()
        with self._settled():
            agg = self.service.find(namespace, name)
            try:
                plan: BackfillPlan = self.service.run_backfill(
                    agg.id,
                    start,
                    end,
                    at,
                    overlap=overlap,
                    parallel=parallel,
                    max_ticks=max_ticks,
                    dry_run=dry_run,
                )
            except BackfillTooLarge as e:
                raise FieldError("end", str(e), "body") from None
        return plan
