"""The operations behind the HTTP API, free of HTTP: commands with an expected version, and the
read queries (objects, audit pages, "why did it run at T", timelines) over the read model.

Kept apart from `adapters/http.py` so the rules (what a stale `If-Match` means, how a skipped
range covers a tick) are plain functions a test or the CLI can call without a server.

The read queries themselves (status, audit pages, decisions at a tick, timeline windows) are
in adapters/readside/queries.py.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, get_args
from uuid import UUID
from zoneinfo import ZoneInfo

from eventsourcing.persistence import IntegrityError

from adapters.engine import Engine
from adapters.readside.queries import Window
from adapters.readside.rows import skip_last
from domain.backfill import BackfillPlan, BackfillTooLarge, Overlap
from domain.cronworkflow import CronWorkflow, workflow_name
from domain.decisions import SkipReason
from domain.manifest import CronWorkflowManifest
from domain.service import AlreadyExists, NotFound, topic_type
from projections.readmodel import AuditRow, StatusRow, rfc3339

T = TypeVar("T")

#: Times the API accepts. Cron arithmetic far outside this range overflows `datetime` (year
#: 9999) or walks millions of ticks, and no schedule question needs it.
TIME_MIN = datetime(1970, 1, 1, tzinfo=UTC)
TIME_MAX = datetime(2200, 1, 1, tzinfo=UTC)
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


class StaleVersion(RuntimeError):
    """The client's expected version is not the aggregate's: someone wrote in between."""

    def __init__(self, expected: int | None, current: int | None) -> None:
        super().__init__(f"expected version {expected}, current version is {current}")
        self.expected = expected
        self.current = current


def parse_time(value: str, field: str) -> datetime:
    """RFC 3339 (a `Z` or an offset; no offset means UTC), within TIME_MIN..TIME_MAX."""
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise FieldError(
            field, f"{value!r} is not an RFC 3339 time (e.g. 2026-05-04T10:00:00Z)"
        ) from None
    try:
        t = t.astimezone(UTC) if t.tzinfo else t.replace(tzinfo=UTC)
    except (OverflowError, ValueError):
        raise FieldError(field, f"{value!r} is out of range") from None
    if not TIME_MIN <= t < TIME_MAX:
        raise FieldError(field, f"{value!r} must be between 1970-01-01 and 2199-12-31")
    return t


def _ts(t: datetime) -> float:
    return t.timestamp()


# ---------------------------------------------------------------------- objects


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
        "alreadyFired": len(plan.already),
        "items": [
            {"scheduledTime": rfc3339(t), "workflow": workflow_name(name, t), "action": a}
            for t, a in sorted(actions)
        ],
    }


def next_fire_times(agg: CronWorkflow, now: datetime, count: int) -> list[dict[str, str | None]]:
    """The next `count` fire times after now (or after the last decided tick, if later), in
    the CronWorkflow's zone and in UTC; the same as `cronsource next`."""
    zone = ZoneInfo(agg.spec_model.timezone or "UTC")
    t = max(now, agg.decided_until)
    out = []
    for _ in range(count):
        t = agg.schedule.next_after(t)
        out.append({"local": t.astimezone(zone).isoformat(), "utc": rfc3339(t)})
    return out


# ---------------------------------------------------------------------- label selectors

_KEY = r"[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)?"
_EXISTS = re.compile(rf"(?P<neg>!)?\s*(?P<key>{_KEY})")
_EQUALITY = re.compile(rf"(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})")
_SET = re.compile(rf"(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "exists" | "!exists" | "=" | "!=" | "in" | "notin"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # "!=", "notin"


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Kubernetes label selector syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
    `a`, `!a`, comma-separated (all must hold)."""
    if text is None or not text.strip():
        return []
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    out = []
    for raw in parts:
        part = raw.strip()
        if m := _SET.fullmatch(part):
            values = [v.strip() for v in m["values"].split(",")]
            if not all(re.fullmatch(_VALUE, v) for v in values):
                raise FieldError("labelSelector", f"bad value in {part!r}")
            out.append(Requirement(m["key"], m["op"], frozenset(values)))
        elif m := _EQUALITY.fullmatch(part):
            op = "!=" if m["op"] == "!=" else "="
            out.append(Requirement(m["key"], op, frozenset([m["value"]])))
        elif m := _EXISTS.fullmatch(part):
            out.append(Requirement(m["key"], "!exists" if m["neg"] else "exists"))
        else:
            raise FieldError(
                "labelSelector",
                f"cannot parse {part!r} (use key=value, key!=value, key in (a,b), key, !key)",
            )
    return out


def select(rows: list[StatusRow], selector: list[Requirement]) -> list[StatusRow]:
    return [r for r in rows if all(req.matches(r.metadata.get("labels") or {}) for req in selector)]


# ---------------------------------------------------------------------- decisions


def explain(agg: CronWorkflow | None, t: datetime, decisions: list[AuditRow]) -> dict[str, Any]:
    """Why the CronWorkflow did or did not run at `t`.

    `outcome` is Fired or Skipped when a decision for that tick is recorded. Otherwise it
    says why there is none: Pending (not decided yet: due, or waiting for a resume),
    NotScheduled (at or before the creation or the last schedule change, whose ticks are
    never decided), NotATick (the schedule has no tick at `t`; `nextTick` names the next),
    or Unknown (no live CronWorkflow to ask, or a schedule that has changed since).
    """
    out: dict[str, Any] = {
        "at": rfc3339(t),
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
        else:
            s = decisions[-1]
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
        return out
    if agg is None:
        out["outcome"] = "Unknown"
        out["explanation"] = "no decision is recorded for this time and no live CronWorkflow"
        return out
    is_tick = agg.schedule.next_after(t - _TICK) == t
    if is_tick and t in agg.backfill_queue:
        out["outcome"] = "Pending"
        out["explanation"] = (
            "queued by a backfill: it runs when the backfill runs before it have ended"
        )
        return out
    if not is_tick:
        nxt = agg.schedule.next_after(t)
        out["outcome"] = "NotATick"
        out["nextTick"] = rfc3339(nxt)
        out["explanation"] = f"the schedule has no tick at this time; the next is {rfc3339(nxt)}"
    elif t <= agg.baseline:
        out["outcome"] = "NotScheduled"
        out["explanation"] = (
            f"at or before {rfc3339(agg.baseline)}, when the CronWorkflow was created or its"
            " schedule last changed: the scheduler never runs ticks before that; a backfill"
            " can (cronsource backfill, POST .../backfill)"
        )
    elif t > agg.decided_until:
        out["outcome"] = "Pending"
        if agg.suspended:
            out["explanation"] = "not decided yet: suspended, the tick is decided on resume"
        elif agg.spec_error:
            out["explanation"] = f"not decided yet: the spec was rejected ({agg.spec_error})"
        else:
            out["explanation"] = "not decided yet: the scheduler decides it when it is due"
    else:
        out["outcome"] = "Unknown"
        out["explanation"] = "no decision is recorded for this tick"
    return out


# ---------------------------------------------------------------------- timeline


def timeline(
    rows: list[StatusRow],
    window: Window,
    since: datetime,
    until: datetime,
    bucket: timedelta,
) -> list[dict[str, Any]]:
    """Per CronWorkflow, one cell per `bucket` of [since, until): ticks fired, of which
    failed (the run ended Failed/Error, or its submission was refused for good), and ticks
    skipped by reason. Fires and failures are placed by the tick's scheduled time. A skipped
    range's ticks are spread over the cells it spans in proportion to time (the event stores
    the range and its count, not each tick)."""
    n = max(1, math.ceil((until - since) / bucket))
    cells: dict[str, list[dict[str, Any]]] = {
        f"{r.namespace}/{r.name}": [{} for _ in range(n)] for r in rows
    }

    def add(key: str, i: int, field: str, k: int, reason: str | None = None) -> None:
        if not 0 <= i < n or key not in cells:
            return
        cell: dict[str, Any] = cells[key][i]
        if reason is None:
            cell[field] = cell.get(field, 0) + k
        else:
            cell.setdefault(field, {})
            cell[field][reason] = cell[field].get(reason, 0) + k

    for ns, name, i, k in window.fired:
        add(f"{ns}/{name}", i, "fired", k)
    for ns, name, i, k in window.failed:
        add(f"{ns}/{name}", i, "failed", k)
    for e in window.events:
        key, t = f"{e.namespace}/{e.name}", e.scheduled_time
        if t is None:
            continue
        if e.type == "ScheduleSkipped":
            for i, k in _spread(t, skip_last(e), e.detail.get("count", 1), since, bucket, n):
                add(key, i, "skipped", k, e.reason or "Unknown")
        elif e.type == "SubmissionFailed" and not e.detail.get("transient"):
            add(key, math.floor((t - since) / bucket), "failed", 1)
    return [
        {
            "namespace": r.namespace,
            "name": r.name,
            "cells": cells[f"{r.namespace}/{r.name}"],
        }
        for r in rows
    ]


def _spread(
    first: datetime, last: datetime, count: int, since: datetime, bucket: timedelta, n: int
) -> list[tuple[int, int]]:
    """Split the `count` ticks of a skipped range [first, last] over the cells it overlaps,
    by share of time (ticks outside the window are dropped); the cells of the first and last
    tick, when inside the window, always get one."""

    def index(t: datetime) -> int:
        return math.floor((t - since) / bucket)

    a, b = index(first), index(last)
    if count <= 1 or last <= first or a == b:
        return [(a, count)] if 0 <= a < n else []
    lo, hi = max(a, 0), min(b, n - 1)
    if lo > hi:
        return []
    span = (last - first).total_seconds()
    exact = []
    for i in range(lo, hi + 1):
        c0 = since + i * bucket
        overlap = (min(last, c0 + bucket) - max(first, c0)).total_seconds()
        exact.append(max(overlap, 0.0) / span * count)
    total = min(count, max(1, round(sum(exact))))
    shares = [math.floor(x) for x in exact]
    for j in sorted(range(len(exact)), key=lambda j: exact[j] - shares[j], reverse=True):
        if sum(shares) >= total:
            break
        shares[j] += 1
    for i in (a, b):
        j = i - lo
        if lo <= i <= hi and shares[j] == 0:
            shares[j] = 1
            biggest = max(range(len(shares)), key=lambda k: shares[k])
            if shares[biggest] > 1 and sum(shares) > total:
                shares[biggest] -= 1
    return [(lo + j, k) for j, k in enumerate(shares) if k > 0]


# ---------------------------------------------------------------------- commands


class Operations:
    """Commands over the engine as the API offers them.

    Without an expected version a command behaves as the CLI's: on a lost race the service
    re-decides on fresh state. With one (`If-Match`), the aggregate must be at exactly that
    version, and the save carries it: if anyone appended in between, the store refuses the
    save (the same version check that stops a stale scheduler) and the client gets the
    current version back, rather than a decision made on state it never saw.

    One lock serialises commands and projection catch-up in this process: the projection
    follows aggregates in an in-memory cache that two threads must not evolve at once.
    Correctness between processes still comes from the store's version check alone.
    """

    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self.engine = engine
        self.clock = clock
        self.lock = threading.RLock()
        self.if_match_rejections = 0
        self.on_stale: Callable[[], None] = lambda: None

    @property
    def service(self) -> Any:
        return self.engine.service

    def catch_up(self, wait: bool = True) -> None:
        """Project what is new. Readers pass wait=False: if a command is already catching up,
        they read without waiting (that command's own response will be current)."""
        if self.lock.acquire(blocking=wait):
            try:
                self.engine.catch_up(self.clock())
            finally:
                self.lock.release()

    def find(self, namespace: str, name: str) -> CronWorkflow:
        with self.lock:
            agg: CronWorkflow = self.service.find(namespace, name)
            return agg

    def _stale(self, expected: int | None, current: int | None) -> StaleVersion:
        self.if_match_rejections += 1
        self.on_stale()
        return StaleVersion(expected, current)

    def _current_version(self, namespace: str, name: str) -> int | None:
        try:
            return int(self.service.find(namespace, name).version)
        except NotFound:
            return None

    def _save_expected(self, agg: CronWorkflow, expected: int) -> None:
        try:
            self.service.save(agg)
        except IntegrityError:
            raise self._stale(expected, self._current_version(agg.namespace, agg.name)) from None

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
        with self.lock:
            if must_not_exist:
                return self._create(manifest, expected, at)
            try:
                current = self.service.find(meta.namespace, meta.name, meta.uid or "")
            except NotFound:
                current = None
            if current is None:
                if must_exist:
                    raise NotFound(f"cronworkflow {meta.namespace}/{meta.name} not found")
                if expected is not None:
                    raise self._stale(expected, None)
                result: tuple[UUID, str] = self.service.apply(manifest, at)
            elif expected is None:
                result = self.service.apply(manifest, at)
            else:
                if current.version != expected:
                    raise self._stale(expected, current.version)
                before = current.version
                current.update_spec(manifest, at, self.service.late_tolerance)
                self._save_expected(current, expected)
                result = (current.id, "updated" if current.version != before else "unchanged")
            self.engine.catch_up(at)
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
        self.engine.catch_up(at)
        row = self.engine.view.status(meta.namespace, meta.name)
        if row is not None:
            raise AlreadyExists(meta.namespace, meta.name, row.version)
        cron_id: UUID = self.service.create(manifest, at)
        self.engine.catch_up(at)
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
        with self.lock:
            agg = self.service.find(namespace, name)
            if expected is None:
                box: list[int] = []

                def attempt(a: CronWorkflow) -> T:
                    r = do(a, at)
                    box[:] = [a.version]
                    return r

                result: T = self.service.command(agg.id, attempt)
                version = box[0]
            else:
                if agg.version != expected:
                    raise self._stale(expected, agg.version)
                result = do(agg, at)
                self._save_expected(agg, expected)
                version = agg.version
            self.engine.catch_up(at)
            return result, version

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
        with self.lock:
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
            if not dry_run:
                self.engine.catch_up(at)
            return plan
