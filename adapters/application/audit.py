"""The audit half of the facade (`Operations` inherits it): history, pages of the event log with
the removal note, the decision covering an instant, and the export's reads. A part of its own
because the audit is the product's other face, read by people and tools as much as commands
write it; the rules of its requests (times, types, reasons) are inputs.py's."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from cronsource.adapters.application.explain import explain, removed_before
from cronsource.adapters.application.inputs import check_range, event_filter
from cronsource.adapters.application.objects import event_object
from cronsource.adapters.infrastructure.readside.queries import EventFilter
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.service import NotFound
from cronsource.domain.timestamps import SMALLEST_STEP, is_date
from cronsource.projections.readmodel import AuditRow


@dataclass(frozen=True)
class EventsPage:
    """A page of the audit log: the events as objects, the position to page on from (None:
    the last page), and the note that history before some time was removed, if it was."""

    items: list[dict[str, Any]]
    next_after: int | None
    removed: str | None


class AuditReads:
    """Reads of the audit over `engine`'s read model; `refresh`, `time_zone` and
    `ever_existed` are the facade's."""

    engine: Engine

    def refresh(self) -> None:
        raise NotImplementedError

    def time_zone(self, namespace: str, name: str) -> str | None:
        raise NotImplementedError

    def ever_existed(self, namespace: str, name: str) -> bool:
        raise NotImplementedError

    def kept_from(self) -> datetime | None:
        """Since when the audit is complete (None: nothing was ever removed by retention)."""
        return self.engine.view.kept_from()

    def history(
        self,
        namespace: str | None,
        name: str | None,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        types: tuple[str, ...] = (),
    ) -> list[AuditRow]:
        """The audit of one CronWorkflow, a namespace (None: every one), in [since, until]."""
        check_range(since, until)
        return self.engine.view.audit(namespace, name, since=since, until=until, types=types)

    def events(self, page: EventFilter) -> list[AuditRow]:
        """One page of the audit log."""
        check_range(page.since, page.until)
        self.refresh()
        return self.engine.view.events(page)

    def events_page(
        self,
        namespace: str | None,
        name: str | None,
        *,
        since: str | None = None,
        until: str | None = None,
        types: Sequence[str] = (),
        reasons: Sequence[str] = (),
        after: int = 0,
        limit: int = 100,
        newest: bool = False,
    ) -> EventsPage:
        """One page of the audit log as a request gives it (times as RFC 3339 text, types and
        reasons by name, each checked: FieldError names the first that is wrong). With a
        `name`, a CronWorkflow that never existed is NotFound rather than an empty page."""
        zone = (
            self.time_zone(namespace, name)
            if name is not None and namespace is not None and (is_date(since) or is_date(until))
            else None
        )
        page = event_filter(namespace, name, since, until, types, reasons, after, limit, zone)
        if newest:
            # The status page's "newest first": the first page of a long history was its
            # oldest thousand events.
            page = dataclasses.replace(page, newest=True)
        rows = self.events(page)
        if name is not None and namespace is not None and not rows:
            if not self.ever_existed(namespace, name):
                raise NotFound(f"cronworkflow {namespace}/{name} not found")
        kept_from = self.kept_from()
        removed = (
            removed_before(kept_from)
            if kept_from is not None and (page.since is None or page.since < kept_from)
            else None
        )
        return EventsPage(
            items=[event_object(r) for r in rows],
            next_after=rows[-1].notification_id if len(rows) == page.limit and not newest else None,
            removed=removed,
        )

    def audit_until(self, until: datetime, after: int, limit: int) -> list[AuditRow]:
        """Audit rows of events before `until`, after log position `after` (export)."""
        return self.engine.view.audit(until=until, after_position=after, limit=limit)

    def why(
        self, namespace: str, name: str, at: datetime, wall: datetime | None = None
    ) -> dict[str, Any]:
        """Why did (or didn't) it run at `at`: the decision covering it and its event.

        `wall` is the time as written, wall clock and offset (inputs.written_wall; the
        Python API's datetime as given): when it is a slot of the schedule that its zone
        skips (02:30 on a spring-forward night), written in that zone's offset, the answer
        is about the tick that ran for it, at the end of the gap, not about the instant `at`.
        """
        # An instant from here on: arithmetic and comparisons of datetimes that share a
        # zone are on their wall clocks (fold ignored), which is wrong across a DST change.
        at = at.astimezone(UTC)
        self.refresh()
        queries = self.engine.view
        try:
            agg: CronWorkflow | None = self.engine.service.find(namespace, name)
        except NotFound:
            if not queries.ever_existed(namespace, name):
                raise
            agg = None
        shift = None
        if (
            agg is not None
            and wall is not None
            and agg.schedule.next_after(at - SMALLEST_STEP) != at
        ):
            shift = agg.schedule.gap_shift(wall)
            if shift is not None:
                at = shift.tick
        rows = queries.decisions_at(namespace, name, at)
        # Only asked when no decision answers (explain reads `then` only then).
        then = self._as_of(agg, at) if agg is not None and not rows and at <= agg.baseline else None
        return explain(agg, at, rows, queries.kept_from(), shift=shift, then=then)

    def _as_of(self, agg: CronWorkflow, at: datetime) -> CronWorkflow | None:
        """The CronWorkflow as it was at `at` (its last event at or before it), to judge a
        time before its schedule last changed by the schedule then in force: judged by
        today's, a tick of the old schedule was NotATick. None before its first event, or
        when the log no longer holds that version (retention). A binary search over the
        stream's event times: a few one-event reads, whatever its length."""
        svc = self.engine.service
        decode = svc.mapper.to_domain_event

        def time_of(version: int) -> datetime | None:
            stored = svc.recorder.select_events(agg.id, gt=version - 1, limit=1)
            event: Any = decode(stored[0]) if stored else None
            return cast(datetime, event.timestamp) if event is not None else None

        first = time_of(1)
        if first is None or first > at:
            return None
        low, high = 1, agg.version
        while low < high:
            mid = (low + high + 1) // 2
            t = time_of(mid)
            if t is not None and t <= at:
                low = mid
            else:
                high = mid - 1
        try:
            return cast(CronWorkflow, svc.repository.get(agg.id, version=low))
        except Exception:
            return None
