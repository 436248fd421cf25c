"""The operations behind the HTTP API, free of HTTP: commands (the version policy itself is
the service's: `CronService.command`'s `expected_version`), request-side time parsing and
the audit's vocabulary (event types, skip reasons).

The shapes answered (adapters/application/objects.py), label selectors
(adapters/application/selectors.py), "why did it run at T" (adapters/application/explain.py) and
timeline arithmetic (adapters/entrypoints/http/timeline.py) are modules of their own.

The read queries themselves (status, audit pages, decisions at a tick, timeline windows) are
in adapters/infrastructure/readside/queries.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar, get_args
from uuid import UUID

from cronsource.adapters.clock import Clock
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.backfill import BackfillPlan, BackfillTooLarge, HistoryRemoved, Overlap
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.decisions import SkipReason
from cronsource.domain.manifest import CronWorkflowManifest
from cronsource.domain.service import AlreadyExists, Applied, StaleVersion, topic_type
from cronsource.domain.timestamps import TimestampError, parse_timestamp

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

    def __init__(self, engine: Engine, clock: Clock | None = None) -> None:
        """`clock`: the engine's unless given."""
        self.engine = engine
        self.clock = clock if clock is not None else engine.clock
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
        three_way: bool = False,
        force: bool = False,
    ) -> Applied:
        """Create or update. `three_way`: a file applied, as `kubectl apply` (the POST
        route, as `cronsource apply`: fields other writers changed since the last apply keep
        their values unless `force`); else the writer's values as they are (PUT)."""
        meta = manifest.metadata
        at = self.clock.now()
        with self._settled():
            if must_not_exist:
                return Applied(self._create(manifest, expected, at, applied=three_way), "created")
            if must_exist:
                self.service.find(meta.namespace, meta.name, meta.uid or "")  # NotFound: 404
            with self._counting_stale():
                if three_way:
                    result: Applied = self.service.apply_config(manifest, at, expected, force=force)
                else:
                    cron_id, what = self.service.apply(manifest, at, expected)
                    result = Applied(cron_id, what)
        return result

    def _create(
        self, manifest: CronWorkflowManifest, expected: int | None, at: datetime, applied: bool
    ) -> UUID:
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
        row = self.engine.view.status(meta.namespace, meta.name)
        if row is not None:
            raise AlreadyExists(meta.namespace, meta.name, row.version)
        cron_id: UUID = self.service.create(manifest, at, applied=applied)
        return cron_id

    def command(
        self,
        namespace: str,
        name: str,
        do: Callable[[CronWorkflow, datetime], T],
        expected: int | None = None,
    ) -> tuple[T, int]:
        """Run `do(aggregate, now)` on the live CronWorkflow; returns (result, new version)."""
        at = self.clock.now()
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
        at = self.clock.now()
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
            except HistoryRemoved as e:
                raise FieldError("start", str(e), "body") from None
        return plan
