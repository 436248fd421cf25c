"""The one facade every entrypoint calls: the CLI, the HTTP API, the Python library
(`cronsource.open`) and `simulate`. Commands (the version policy itself is the service's:
`CronService.command`'s `expected_version`), the reads they answer from, request-side time
parsing, the backfill rules, and the audit's vocabulary (event types, skip reasons), each once.

The shapes answered (adapters/application/objects.py), label selectors
(adapters/application/selectors.py), "why did it run at T" (adapters/application/explain.py) and
timeline arithmetic (adapters/entrypoints/http/timeline.py) are modules of their own.

The read queries themselves (status, audit pages, decisions at a tick, timeline windows) are
in adapters/infrastructure/readside/queries.py.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from cronsource.adapters.application.audit import AuditReads
from cronsource.adapters.application.inputs import (
    FieldError,
    check_backfill,
)
from cronsource.adapters.application.objects import next_fire_times
from cronsource.adapters.application.presence import replicas, schedulers_running
from cronsource.adapters.application.selectors import parse_label_selector, select
from cronsource.adapters.clock import Clock
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.backfill import BackfillPlan, BackfillTooLarge, HistoryRemoved, Overlap
from cronsource.domain.calendars import (
    ANNOTATION_CALENDARS,
    CALENDAR_LABEL,
    Calendar,
    CalendarSpec,
    calendar_names,
)
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.lastapplied import DEFAULT_MANAGER
from cronsource.domain.manifest import CronWorkflowManifest, ManifestError
from cronsource.domain.schedule import local_zone
from cronsource.domain.service import AlreadyExists, Applied, Conflict, NotFound, StaleVersion
from cronsource.projections.readmodel import StatusRow, status_row

T = TypeVar("T")

#: How often a patch reads and patches again when another write lands between its read and
#: its write, before it answers Conflict (try again).
PATCH_ATTEMPTS = 5


def _ts(t: datetime) -> float:
    return t.timestamp()


# ---------------------------------------------------------------------- commands


class Operations(AuditReads):
    """Commands over the engine as the API offers them.

    Without an expected version a command behaves as the CLI's: on a lost race the service
    re-decides on fresh state. With one (`If-Match`) the service holds the aggregate to
    exactly that version (`CronService.command`'s `expected_version`); a refusal is
    counted here, for the metrics.

    Commands take no lock of their own: two requests race on the store's version check as
    two processes would. Each command's response reflects its own write: it waits for the
    projections to pass its receipt (`Projector.settle`), and only the projector moves them.
    """

    def __init__(
        self, engine: Engine, clock: Clock | None = None, *, settle_each: bool = True
    ) -> None:
        """`clock`: the engine's unless given. `settle_each=False`: a command does not wait
        for the read model to show its write (the CLI waits once, for all its commands,
        before it exits: adapters/entrypoints/cli/context.py)."""
        self.engine = engine
        self.clock = clock if clock is not None else engine.clock
        self.settle_each = settle_each
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
        if self.settle_each:
            self.engine.projector.settle(wrote)

    def find(self, namespace: str, name: str, uid: str = "") -> CronWorkflow:
        """The live CronWorkflow of that name (with `uid`: of that incarnation); NotFound."""
        agg: CronWorkflow = self.service.find(namespace, name, uid)
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
        dry_run: bool = False,
        manager: str = DEFAULT_MANAGER,
        pending_calendars: Collection[tuple[str, str]] = (),
    ) -> Applied:
        """Create or update. A CronWorkflow naming a calendar that does not exist is
        refused (ManifestError naming it), unless it is among `pending_calendars`
        ((namespace, name) of calendars applied in the same batch, before it).
        `three_way`: a file applied, as `kubectl apply` (`cronsource
        apply`, the library's `apply`, HTTP's server-side apply: fields other writers changed
        since the last apply keep their values unless `force`); else the writer's values as
        they are (PUT). `manager` (three-way): the field manager applying; an apply by
        another manager than the last one is refused where it changes that one's fields
        (ApplyConflict) unless `force`. `dry_run` (three-way only): decide the merge and
        validate it, save nothing."""
        meta = manifest.metadata
        at = self.clock.now()
        self.check_calendars(manifest, pending_calendars)
        if dry_run:
            if not three_way:
                raise FieldError("dryRun", "applies to a three-way apply only")
            dry: Applied = self.service.apply_config(
                manifest, at, force=force, dry_run=True, manager=manager
            )
            return dry
        with self._settled():
            if must_not_exist:
                return Applied(self._create(manifest, expected, at, applied=three_way), "created")
            if must_exist:
                self.service.find(meta.namespace, meta.name, meta.uid or "")  # NotFound: 404
            with self._counting_stale():
                if three_way:
                    result: Applied = self.service.apply_config(
                        manifest, at, expected, force=force, manager=manager
                    )
                else:
                    cron_id, what = self.service.apply(manifest, at, expected)
                    result = Applied(cron_id, what)
        return result

    def check_calendars(
        self, manifest: CronWorkflowManifest, pending: Collection[tuple[str, str]] = ()
    ) -> None:
        """Admission of `cronsource.io/calendars`: every calendar it names exists in the
        CronWorkflow's namespace (or comes in the same batch); else ManifestError naming
        the first that does not."""
        ns = manifest.metadata.namespace
        named = calendar_names(manifest.metadata.annotations)
        # A calendar the live object names already (deleted since) does not block a change
        # of anything else: its ticks skip as SpecError, naming it, and every PATCH, PUT or
        # apply that kept the annotation was a 422 until someone removed it.
        kept = set(self._live_calendars(ns, manifest.metadata.name)) if named else set()
        for name in named:
            if (ns, name) in pending or name in kept:
                continue
            cal = self.service.calendar(ns, name)
            if cal is None or cal.deleted:
                raise ManifestError(
                    [
                        f"metadata.annotations: {ANNOTATION_CALENDARS}: calendar {name!r} not"
                        f" found in namespace {ns} (a ConfigMap labelled {CALENDAR_LABEL}:"
                        ' "true")'
                    ],
                    f"{ns}/{manifest.metadata.name}",
                )

    def _live_calendars(self, namespace: str, name: str) -> tuple[str, ...]:
        try:
            return calendar_names(self.service.find(namespace, name).annotations)
        except NotFound:
            return ()

    def calendar_users(self, namespace: str, name: str) -> list[str]:
        """The live CronWorkflows of `namespace` whose `cronsource.io/calendars` names the
        calendar `name`, by name."""
        return [
            row.name
            for row in self.statuses(namespace)
            if name in calendar_names(row.metadata.get("annotations") or {})
        ]

    def calendar_deleted_warnings(self, namespace: str, name: str) -> list[str]:
        """What a delete of calendar `name` says beside its answer (CLI and HTTP): the
        delete itself is silent, and the ticks of every CronWorkflow that names it skip
        from now on."""
        users = self.calendar_users(namespace, name)
        if not users:
            return []
        return [
            f"calendar {name} is named by {len(users)} CronWorkflow(s) ({', '.join(users)}):"
            " their ticks are skipped as SpecError until it exists again or the annotation goes"
        ]

    def apply_calendar(self, spec: CalendarSpec, *, expected: int | None = None) -> tuple[int, str]:
        """Create or update a calendar; (its version, created/updated/unchanged).
        `expected`: StaleVersion unless it is at that version now."""
        with self._settled():
            applied: tuple[int, str] = self.service.apply_calendar(spec, self.clock.now(), expected)
        return applied

    def delete_calendar(self, namespace: str, name: str, *, expected: int | None = None) -> int:
        """Delete a calendar; its version after. NotFound when there is none, StaleVersion
        when it is not at `expected`."""
        with self._settled():
            version: int = self.service.delete_calendar(namespace, name, self.clock.now(), expected)
        return version

    def calendars(
        self, namespace: str | None, names: Iterable[str] | None = None
    ) -> list[dict[str, Any]]:
        """The named calendars (None: every calendar of the namespace, or of all when
        `namespace` is None, deleted ones too) as they are now: namespace, name, version,
        deleted, dates, rrule."""
        if names is None:
            known = self.service.known_calendars()
            return [
                self._calendar_object(c)
                for c in sorted(known, key=lambda c: (c.namespace, c.name))
                if namespace is None or c.namespace == namespace
            ]
        assert namespace is not None
        out = []
        for name in names:
            cal = self.service.calendar(namespace, name)
            if cal is not None:
                out.append(self._calendar_object(cal))
        return out

    def calendar(self, namespace: str, name: str, *, live: bool = False) -> dict[str, Any]:
        """One calendar as `calendars` shows it; NotFound when there is none, or (`live`)
        when it is deleted."""
        cal = self.service.calendar(namespace, name)
        if cal is None or (live and cal.deleted):
            raise NotFound(f"calendar {namespace}/{name} not found")
        return self._calendar_object(cal)

    @staticmethod
    def _calendar_object(cal: Calendar) -> dict[str, Any]:
        return {
            "namespace": cal.namespace,
            "name": cal.name,
            "version": cal.version,
            "deleted": cal.deleted,
            "dates": cal.dates,
            "rrule": cal.rrule,
        }

    def _create(
        self, manifest: CronWorkflowManifest, expected: int | None, at: datetime, applied: bool
    ) -> UUID:
        """Create only (HTTP's POST, `create_only`), decided by the store (`CronService.create`), so
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

    def patch(
        self,
        namespace: str,
        name: str,
        edit: Callable[[dict[str, Any]], tuple[CronWorkflowManifest, int | None]],
    ) -> Applied:
        """A patch (RFC 7386 merge patch, RFC 6902 JSON patch) of the live CronWorkflow:
        `edit` gets the live object as the API shows it (`metadata.resourceVersion` its
        version) and returns the manifest it becomes and the version the client demanded
        (If-Match, or a `resourceVersion` the patch set; None: none). The result replaces
        the live object as a PUT does (two-way; the last-applied record stays).

        Without a demanded version the write is held to the version that was read, and a
        write in between makes it read and patch again (as the Kubernetes API server
        retries a patch), so a patch never overwrites what it did not see. With one, a
        write in between is the client's StaleVersion. NotFound if there is no live one."""
        with self._settled():
            for _ in range(PATCH_ATTEMPTS):
                agg = self.find(namespace, name)
                live = status_row(agg).as_object()
                # Its own labels: the completed label a stop shows is derived, not the
                # object's, and written back it would outlive the stop.
                live["metadata"]["labels"] = dict(agg.labels)
                manifest, demanded = edit(live)
                self.check_calendars(manifest)
                try:
                    with self._counting_stale() if demanded is not None else nullcontext():
                        _, what = self.service.apply(
                            manifest,
                            self.clock.now(),
                            demanded if demanded is not None else agg.version,
                        )
                except StaleVersion:
                    if demanded is not None:
                        raise
                    continue
                return Applied(agg.id, what)
        raise Conflict(f"cronworkflow {namespace}/{name} kept changing while it was patched")

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
                if a.deleted:
                    # Deleted by another writer after the lookup (the retry after a stale
                    # write reads it so): as if looked up after that delete. Six DELETEs
                    # at once answered 200 three times for one CronWorkflowDeleted.
                    raise NotFound(f"cronworkflow {namespace}/{name} not found")
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
        progress: Callable[[int, int], None] | None = None,
        expected: int | None = None,
    ) -> BackfillPlan:
        """Backfill [start, end] as domain/backfill.py rules (overlap default: the
        CronWorkflow's concurrencyPolicy). More than `max_ticks` ticks is refused before
        anything is computed in full. `expected`: StaleVersion unless it is at that version."""
        check_backfill(start, end, overlap, parallel, max_ticks=max_ticks)
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
                    progress=progress,
                    expected=expected,
                )
            except BackfillTooLarge as e:
                raise FieldError("end", str(e), "body") from None
            except HistoryRemoved as e:
                raise FieldError("start", str(e), "body") from None
        return plan

    def cancel_backfill(self, namespace: str, name: str) -> int:
        """Drop the ticks queued by earlier backfills; returns how many."""
        at = self.clock.now()
        with self._settled():
            agg = self.service.find(namespace, name)
            n: int = self.service.cancel_backfill(agg.id, at)
        return n

    def plan_backfill(
        self,
        namespace: str,
        name: str,
        start: datetime,
        end: datetime,
        max_ticks: int,
        *,
        overlap: Overlap | None = None,
        parallel: int | None = None,
    ) -> BackfillPlan:
        """What `backfill` would do, changing nothing (the rules of `backfill`)."""
        check_backfill(start, end, overlap, parallel)
        agg = self.service.find(namespace, name)
        try:
            plan: BackfillPlan = self.service.plan_backfill(
                agg.id, start, end, overlap=overlap, parallel=parallel, max_ticks=max_ticks
            )
        except BackfillTooLarge as e:
            raise FieldError("end", str(e), "body") from None
        except HistoryRemoved as e:
            raise FieldError("start", str(e), "body") from None
        return plan

    # ------------------------------------------------------------------ named commands

    def suspend(
        self,
        namespace: str,
        name: str,
        *,
        by: str = "",
        note: str = "",
        expected: int | None = None,
    ) -> tuple[bool, int]:
        """Suspend; returns (whether it was running before, the new version)."""

        def do(a: CronWorkflow, at: datetime) -> bool:
            was = not a.suspended
            a.suspend(at, by=by, note=note)
            return was

        return self.command(namespace, name, do, expected)

    def resume(
        self,
        namespace: str,
        name: str,
        *,
        by: str = "",
        note: str = "",
        expected: int | None = None,
    ) -> tuple[bool, int]:
        """Resume; returns (whether it was suspended, stopped or paused after failures
        before, the new version)."""

        def do(a: CronWorkflow, at: datetime) -> bool:
            was = a.suspended or a.stopped or a.failure_pause is not None
            a.resume(at, by=by, note=note)
            return was

        return self.command(namespace, name, do, expected)

    def delete(self, namespace: str, name: str, *, expected: int | None = None) -> int:
        """Delete (its history stays queryable); returns the new version."""
        _, version = self.command(namespace, name, lambda a, at: a.delete(at), expected)
        return version

    def trigger(
        self, namespace: str, name: str, request_id: str, *, expected: int | None = None
    ) -> tuple[str | None, int]:
        """Run now; returns (the run's Workflow, or None when this request id already ran,
        the new version)."""
        return self.command(namespace, name, lambda a, at: a.trigger(at, request_id), expected)

    # ------------------------------------------------------------------ reads

    def statuses(
        self,
        namespace: str | None,
        *,
        selector: str | None = None,
        include_deleted: bool = False,
    ) -> list[StatusRow]:
        """The CronWorkflows of a namespace (None: every one) matching a label selector
        (FieldError `labelSelector` when it is malformed)."""
        parsed = parse_label_selector(selector)
        self.refresh()
        rows = self.engine.view.statuses(namespace, include_deleted=include_deleted)
        return select(rows, parsed)

    def status(self, namespace: str, name: str) -> StatusRow:
        """The status row of the live CronWorkflow, or NotFound."""
        self.refresh()
        row = self.engine.view.status(namespace, name)
        if row is None:
            raise NotFound(f"cronworkflow {namespace}/{name} not found")
        return row

    def schedulers_running(self) -> int | None:
        """How many `cronsource run` replicas hold this store now; None when the store cannot
        say (adapters/application/presence.py)."""
        return schedulers_running(self.engine)

    def replicas(self) -> list[dict[str, Any]]:
        """The `run` replicas on this store: identity, shards, projector, lease
        (adapters/application/presence.py `replicas`)."""
        return replicas(self.engine)

    def namespaces(self) -> list[str]:
        """Every namespace that ever held a CronWorkflow."""
        return self.engine.view.audit_namespaces()

    def has_namespace(self, namespace: str) -> bool:
        """Whether this namespace ever held a CronWorkflow (an index search)."""
        return self.engine.view.has_namespace(namespace)

    def time_zone(self, namespace: str, name: str) -> str | None:
        """The time zone a date alone means midnight in for this CronWorkflow (inputs.py
        `parse_time`): its zone (`spec.timezone`, or the one its schedules name with
        `CRON_TZ=`; `local_zone`), or its last one if it was deleted; None (UTC) when it has
        none or never existed (the caller's NotFound says so)."""
        try:
            spec: dict[str, Any] = self.find(namespace, name).spec
        except NotFound:
            rows = self.engine.view.statuses(namespace, include_deleted=True)
            spec = next((row.spec for row in rows if row.name == name), {})
        zone = local_zone(spec)
        return None if zone == "UTC" else zone

    def ever_existed(self, namespace: str, name: str) -> bool:
        return self.engine.view.ever_existed(namespace, name)

    def next_times(
        self, namespace: str, name: str, count: int, at: datetime | None = None
    ) -> tuple[str, list[dict[str, Any]], str | None]:
        """(the CronWorkflow's zone, its next `count` fire times after `at` (now), why none
        of them runs until a resume: `held_by`, None while it is live)."""
        agg = self.find(namespace, name)
        items = next_fire_times(agg, at or self.clock.now(), count)
        return local_zone(agg.spec), items, agg.held_by
