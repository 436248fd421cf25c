"""`cronsource.open(store_url)`: the domain API in process, for a Python service that creates,
suspends or questions CronWorkflows without a server in between.

A thin layer over the facade the CLI and the HTTP API call (adapters/application/operations.py):
it checks the arguments (cronsource/arguments.py), calls the facade, and answers with the HTTP
API's own pydantic models, so a value read here and one read through `cronsource.Client`
compare equal. Errors are those of cronsource/errors.py.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Literal, cast

from cronsource import arguments
from cronsource.adapters.application.admission import admit, admit_calendar, resource_version
from cronsource.adapters.application.documents import (
    DocumentError,
    from_client,
    load_yaml,
)
from cronsource.adapters.application.inputs import FieldError, FieldErrors
from cronsource.adapters.application.models import (
    BackfillResult,
    CalendarObject,
    CronWorkflowList,
    CronWorkflowObject,
    Decision,
    Deleted,
    EventList,
    NextTimes,
    Triggered,
)
from cronsource.adapters.application.objects import backfill_result
from cronsource.adapters.application.operations import Operations
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import Clock
from cronsource.adapters.infrastructure.store.check import StoreUnavailable, check_store
from cronsource.adapters.infrastructure.store.config import StoreConfig, StoreURLError
from cronsource.domain import service
from cronsource.domain.backfill import DEFAULT_MAX_BACKFILL_TICKS
from cronsource.domain.cronworkflow import manual_workflow_name
from cronsource.domain.manifest import ManifestError
from cronsource.errors import (
    AlreadyExists,
    Conflict,
    CronsourceError,
    Invalid,
    NotFound,
    Unavailable,
)

Overlap = Literal["Allow", "Forbid", "Replace", "Queue"]
#: Who a suspend or resume is recorded as, unless the caller says (the HTTP API's default).
DEFAULT_BY = "api"


def open(store_url: str | None = None, *, clock: Clock | None = None) -> Cronsource:  # noqa: A001
    """The API over the store at `store_url` (None: $CRONSOURCE_STORE, else the embedded
    SQLite default `./cronsource.db`), which must be migrated (`cronsource migrate`; an
    embedded store is created on first use). Close it, or use it as a context manager."""
    if store_url is not None and not isinstance(store_url, str):
        raise Invalid("store_url", f"must be a store URL (a string) or None, not {store_url!r}")
    try:
        config = StoreConfig.parse(store_url)
        check_store(config)
    except StoreURLError as e:
        raise Invalid("store_url", str(e)) from None
    except StoreUnavailable as e:
        raise Unavailable(str(e)) from None
    engine = bootstrap(config) if clock is None else bootstrap(config, clock=clock)
    return Cronsource(Operations(engine))


@contextmanager
def _translated() -> Iterator[None]:
    """The facade's and the domain's errors as the Python API's."""
    try:
        yield
    except CronsourceError:
        raise
    except service.NotFound as e:
        raise NotFound(str(e)) from None
    except service.AlreadyExists as e:
        raise AlreadyExists(str(e), e.version) from None
    except service.StaleVersion as e:
        raise Conflict(str(e), e.current, e.expected) from None
    except service.Conflict as e:
        raise Conflict(f"{e}; try again") from None
    except FieldError as e:
        raise Invalid(e.field, e.message) from None
    except FieldErrors as e:
        first = e.errors[0]
        raise Invalid(
            first["field"], first["message"], [(x["field"], x["message"]) for x in e.errors]
        ) from None
    except ManifestError as e:
        problems = [p.partition(": ") for p in e.problems] or [("manifest", "", str(e))]
        errors = [(f, m or f) for f, _, m in problems]
        raise Invalid(errors[0][0], errors[0][1], errors) from None
    except DocumentError as e:
        # Its text names the document already (`manifest: not valid YAML ...`).
        raise Invalid("manifest", str(e).removeprefix("manifest: ")) from None
    except StoreUnavailable as e:
        raise Unavailable(str(e)) from None


class Cronsource:
    """The operations of the CLI and the HTTP API, in process. Thread-safe as the service is:
    calls race on the store's version check as two processes would."""

    def __init__(self, ops: Operations) -> None:
        self._ops = ops
        self._closed = False

    @contextmanager
    def _calling(self) -> Iterator[None]:
        """A call to the facade, its errors the Python API's; after `close()`, Unavailable
        (the pool's own error had no message at all)."""
        if self._closed:
            raise Unavailable("this API is closed (close() or the end of its `with` block)")
        with _translated():
            yield

    # ------------------------------------------------------------------ commands

    def apply(
        self,
        manifest: Mapping[str, Any] | str,
        *,
        namespace: str | None = None,
        force: bool = False,
        create_only: bool = False,
        expected_version: int | None = None,
    ) -> CronWorkflowObject:
        """Create or update, as `kubectl apply` (the three-way rule: a field another writer
        changed since the last apply keeps its value unless `force`). `manifest`: a mapping,
        or YAML/JSON text. `namespace`: where it goes when the manifest names none (default:
        "default"). `create_only`: AlreadyExists if it exists. `expected_version`: Conflict
        unless it is at that version."""
        doc = _document(manifest)
        ns = arguments.namespace(namespace or _manifest_namespace(doc) or "default")
        arguments.version("expected_version", expected_version)
        arguments.flag("force", force)
        arguments.flag("create_only", create_only)
        with self._calling():
            expected = resource_version(doc, expected_version)
            m = admit(doc, ns)
            self._ops.apply(
                m, expected=expected, must_not_exist=create_only, three_way=True, force=force
            )
            return self._object(ns, m.metadata.name)

    def create(
        self, manifest: Mapping[str, Any] | str, *, namespace: str | None = None
    ) -> CronWorkflowObject:
        """Create only (the HTTP API's `POST`, Kubernetes' create): AlreadyExists when a
        live CronWorkflow has that name. The manifest is kept as the last-applied
        configuration, so the next `apply` merges three-way with it."""
        return self.apply(manifest, namespace=namespace, create_only=True)

    def suspend(
        self,
        namespace: str,
        name: str,
        *,
        by: str = DEFAULT_BY,
        note: str = "",
        expected_version: int | None = None,
    ) -> CronWorkflowObject:
        """Suspend: no tick runs until resumed. Recorded as by `by`, with `note`."""
        self._names(namespace, name)
        arguments.who(by, note)
        arguments.version("expected_version", expected_version)
        with self._calling():
            self._ops.suspend(namespace, name, by=by, note=note, expected=expected_version)
            return self._object(namespace, name)

    def resume(
        self,
        namespace: str,
        name: str,
        *,
        by: str = DEFAULT_BY,
        note: str = "",
        expected_version: int | None = None,
    ) -> CronWorkflowObject:
        """Resume: the ticks of the suspension are decided, at most one runs."""
        self._names(namespace, name)
        arguments.who(by, note)
        arguments.version("expected_version", expected_version)
        with self._calling():
            self._ops.resume(namespace, name, by=by, note=note, expected=expected_version)
            return self._object(namespace, name)

    def trigger(
        self,
        namespace: str,
        name: str,
        *,
        request_id: str | None = None,
        expected_version: int | None = None,
    ) -> Triggered:
        """Run now; a `request_id` already used starts no second run (`triggered` False)."""
        self._names(namespace, name)
        rid = arguments.request_id(request_id) or uuid.uuid4().hex
        arguments.version("expected_version", expected_version)
        with self._calling():
            wf, _ = self._ops.trigger(namespace, name, rid, expected=expected_version)
        return Triggered(
            workflow=wf or manual_workflow_name(name, rid), requestId=rid, triggered=wf is not None
        )

    def backfill(
        self,
        namespace: str,
        name: str,
        start: datetime,
        end: datetime,
        *,
        dry_run: bool = False,
        overlap: Overlap | None = None,
        parallel: int | None = None,
        max_ticks: int | None = None,
    ) -> BackfillResult:
        """Run every tick in [start, end] that never fired (`dry_run`: only list them)."""
        self._names(namespace, name)
        arguments.moment("start", start)
        arguments.moment("end", end)
        arguments.backfill(dry_run, overlap, parallel, max_ticks)
        with self._calling():
            plan = self._ops.backfill(
                namespace,
                name,
                start,
                end,
                dry_run,
                DEFAULT_MAX_BACKFILL_TICKS if max_ticks is None else max_ticks,
                overlap=overlap,
                parallel=parallel,
            )
        return BackfillResult.model_validate(backfill_result(name, plan, dry_run))

    def delete(self, namespace: str, name: str, *, expected_version: int | None = None) -> Deleted:
        """Delete; its history stays queryable."""
        self._names(namespace, name)
        arguments.version("expected_version", expected_version)
        with self._calling():
            version = self._ops.delete(namespace, name, expected=expected_version)
        return Deleted(namespace=namespace, name=name, version=version)

    # ------------------------------------------------------------------ calendars

    def apply_calendar(
        self, manifest: Mapping[str, Any] | str, *, namespace: str | None = None
    ) -> CalendarObject:
        """Create or replace a calendar: a ConfigMap labelled `cronsource.io/calendar:
        "true"` with `data.dates` and/or `data.rrule` (docs/user-guide.md, "Calendars"), as
        the HTTP API's PUT. A change is a new version, which the skips it causes name;
        `outcome` says created, updated or unchanged. `manifest`: a mapping or YAML text;
        `namespace`: where it goes when the manifest names none (default: "default")."""
        doc = _document(manifest, "a calendar ConfigMap")
        ns = arguments.namespace(namespace or _manifest_namespace(doc) or "default")
        with self._calling():
            spec = admit_calendar(doc, ns)
            _, outcome = self._ops.apply_calendar(spec)
            found = self._ops.calendar(ns, spec.name)
        return CalendarObject.model_validate(dict(found, outcome=outcome))

    def get_calendar(self, namespace: str, name: str) -> CalendarObject:
        """A calendar as it is now, with its version; NotFound when there is none (or it
        was deleted)."""
        self._names(namespace, name)
        with self._calling():
            return CalendarObject.model_validate(self._ops.calendar(namespace, name, live=True))

    def delete_calendar(self, namespace: str, name: str) -> CalendarObject:
        """Delete a calendar (its stream and versions stay). A CronWorkflow that still names
        it skips its ticks as SpecError, naming it, until it exists again."""
        self._names(namespace, name)
        with self._calling():
            self._ops.delete_calendar(namespace, name)
            return CalendarObject.model_validate(self._ops.calendar(namespace, name))

    # ------------------------------------------------------------------ reads

    def get(self, namespace: str, name: str) -> CronWorkflowObject:
        self._names(namespace, name)
        with self._calling():
            return self._object(namespace, name)

    def list(
        self, namespace: str | None = None, *, selector: str | None = None
    ) -> CronWorkflowList:
        """The CronWorkflows of `namespace` (None: every namespace) matching a Kubernetes
        label selector. A namespace that never held one is Invalid, not an empty list."""
        if selector is not None:
            arguments.text("selector", selector, arguments.MAX_SELECTOR)
        if namespace is not None:
            self._known(namespace)
        with self._calling():
            rows = self._ops.statuses(namespace, selector=selector)
        return CronWorkflowList(
            items=[CronWorkflowObject.model_validate(r.as_object()) for r in rows]
        )

    def next(self, namespace: str, name: str, count: int = 5) -> NextTimes:
        """The next `count` fire times, in the CronWorkflow's zone and in UTC."""
        self._names(namespace, name)
        arguments.bounded("count", count, 1, arguments.MAX_COUNT)
        with self._calling():
            timezone, items, held = self._ops.next_times(namespace, name, count)
        return NextTimes.model_validate({"timezone": timezone, "items": items, "heldBy": held})

    def history(
        self,
        namespace: str,
        name: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        types: Sequence[str] = (),
        reasons: Sequence[str] = (),
        after: int = 0,
        limit: int = 100,
    ) -> EventList:
        """One page of a CronWorkflow's audit (every incarnation): page on with
        `after=page.nextAfter` until it is None."""
        self._names(namespace, name)
        return self._events(namespace, name, since, until, types, reasons, after, limit)

    def events(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        types: Sequence[str] = (),
        reasons: Sequence[str] = (),
        after: int = 0,
        limit: int = 100,
    ) -> EventList:
        """One page of the whole audit log, filtered."""
        if namespace is not None:
            self._known(namespace)
        if name is not None:
            arguments.name("name", name)
        return self._events(namespace, name, since, until, types, reasons, after, limit)

    def why(self, namespace: str, name: str, at: datetime) -> Decision:
        """Why did (or didn't) it run at `at`: the decision covering it, and its event."""
        self._names(namespace, name)
        arguments.moment("at", at)
        with self._calling():
            return Decision.model_validate(self._ops.why(namespace, name, at, wall=at))

    def wait(self, timeout: float = 10.0) -> bool:
        """Wait until the read side (status, audit) has caught up with the log as it is now;
        True when it has. Every call here already waits for its own write."""
        arguments.seconds("timeout", timeout)
        with self._calling():
            return self._ops.engine.projector.settle(None, timeout=timeout)

    # ------------------------------------------------------------------ the rest

    def close(self) -> None:
        self._closed = True
        self._ops.engine.close()

    def __enter__(self) -> Cronsource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _object(self, namespace: str, name: str) -> CronWorkflowObject:
        return CronWorkflowObject.model_validate(self._ops.status(namespace, name).as_object())

    def _names(self, namespace: str, name: str) -> None:
        arguments.namespace(namespace)
        arguments.name("name", name)

    def _known(self, namespace: str) -> None:
        arguments.namespace(namespace)
        with self._calling():
            known = self._ops.namespaces()
        if namespace not in known:
            raise Invalid("namespace", f"{namespace!r} never held a CronWorkflow")

    def _events(
        self,
        namespace: str | None,
        name: str | None,
        since: datetime | None,
        until: datetime | None,
        types: Sequence[str],
        reasons: Sequence[str],
        after: int,
        limit: int,
    ) -> EventList:
        arguments.window(since, until)
        arguments.bounded("after", after, 0, arguments.MAX_AFTER)
        arguments.bounded("limit", limit, 1, arguments.MAX_LIMIT)
        types, reasons = arguments.words("types", types), arguments.words("reasons", reasons)
        with self._calling():
            page = self._ops.events_page(
                namespace,
                name,
                since=arguments.rfc3339(since) if since else None,
                until=arguments.rfc3339(until) if until else None,
                types=list(types),
                reasons=list(reasons),
                after=after,
                limit=limit,
            )
        return EventList.model_validate({"items": page.items, "nextAfter": page.next_after})


def _document(
    manifest: Mapping[str, Any] | str, what: str = "a CronWorkflow manifest"
) -> dict[str, Any]:
    """The manifest as data the admission takes (a copy: admission fills in and removes
    fields), through the same loader and client rules as the HTTP API's bodies."""
    with _translated():
        if isinstance(manifest, str):
            docs = load_yaml(manifest, "manifest")
            if len(docs) != 1:
                raise Invalid("manifest", f"{len(docs)} YAML documents, give one")
            doc = docs[0]
        elif isinstance(manifest, Mapping):
            doc = copy.deepcopy(dict(manifest))
        else:
            raise Invalid(
                "manifest", f"must be a mapping or YAML text, not {type(manifest).__name__}"
            )
        doc = from_client(doc)
    if not isinstance(doc, dict):
        raise Invalid("manifest", f"must be a mapping ({what})")
    return cast(dict[str, Any], doc)


def _manifest_namespace(doc: Mapping[str, Any]) -> str | None:
    meta = doc.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    return ns if isinstance(ns, str) and ns else None
