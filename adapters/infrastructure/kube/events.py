"""Kubernetes Events on the CronWorkflow: what `kubectl describe cronworkflow` and
`kubectl get events` show (fires, skips with their reason, submission failures, pauses,
resumes), written as client-go's event recorder writes them.

Best effort and off the hot path: `EventRecorder.emit` puts the event on a bounded queue and
returns at once; a thread of the recorder's own writes them (through the client's loop). A
full queue drops the event and counts it (`dropped`, the metric
`cronsource_kube_events_total{outcome="dropped"}`); a write the API server refuses or does not
answer is retried a few times, then dropped and counted (`failed`). Nothing an Event does
blocks or fails a fire.

So that 10,000 CronWorkflows do not flood the API server, every event goes through
`EventCorrelator`, a port of client-go's (k8s.io/client-go/tools/record/events_cache.go, the
defaults of `NewEventCorrelatorWithOptions`):

- aggregation: events that differ only in their message (same source, object, type and
  reason) are counted per 10-minute window; from the 10th distinct message on, they are one
  Event whose message starts `(combined from similar events): `;
- deduplication: an event equal to one already written (same key, message included) is a
  patch of that Event's `count` and `lastTimestamp`, not a new object;
- spam filter: a token bucket per source and object (and type), burst 25, refilled 1 per
  5 minutes; an event beyond it is not written (`rate_limited`).

The caches are in memory and bounded (LRU, 4096 keys, as client-go's): a restart starts them
empty, as a restarted controller does.

What each event of the log becomes is `event_for` (fed from the audit log by
adapters/runtime/kube/events.py) and `created_event` (told by the dispatcher). The reasons
are Argo's and Kubernetes CronJob's words where either has one: `SuccessfulCreate`,
`MissSchedule`, `JobAlreadyActive`, `SawCompletedJob`, `UnexpectedJob`, `MissingJob`,
`SuccessfulDelete` (CronJob's controller); `SubmissionError`, `TransientSubmissionError`,
`SpecError` (Argo's condition types, which Argo's PR #16233 emits as Warning reasons; Argo
v4.0.5's cron controller emits no Event but `Malformed`, and none named
`WorkflowSubmissionFailed`). A skip for another reason carries that reason (`WhenFalse`,
`Suspended`, ...); suspend, resume and pause are `Suspended`, `Resumed`,
`PausedAfterFailures`.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from cronsource.adapters.clock import SYSTEM_CLOCK, Clock
from cronsource.adapters.infrastructure.kube.port import ApiError

log = logging.getLogger("cronsource.adapters.infrastructure.kube.events")

T = TypeVar("T")

NORMAL, WARNING = "Normal", "Warning"
#: `source.component` of every Event (Argo's controller says `workflow-controller`).
COMPONENT = "cronsource"
#: client-go's defaults (events_cache.go).
MAX_LRU_CACHE_ENTRIES = 4096
MAX_EVENTS_PER_AGGREGATE = 10
AGGREGATE_INTERVAL_SECONDS = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
COMBINED_PREFIX = "(combined from similar events): "
#: Events waiting to be written. At 25 per object per burst, the queue holds a full burst of
#: 40 CronWorkflows; more than that waiting means the API server is not keeping up, and
#: events are dropped (counted) rather than held in memory.
QUEUE_SIZE = 1000
#: Tries of one write (a create, or a patch then a create) before it is dropped.
WRITE_TRIES = 3
#: The longest the writer holds back while Workflows are being created (`yield_to`), in one
#: stretch of creations: a burst of 10,000 takes about 10 s on the test API server. A longer
#: stretch (more fires than the server takes, for minutes) then shares the server with the
#: Events, which are at most this late.
YIELD_AT_MOST = 30.0
#: The longest message an Event keeps (the API server refuses more than 1 KiB in an
#: events.k8s.io note; core v1 is laxer, but `kubectl describe` is not a log).
MESSAGE_LIMIT = 1024


class EventsApi(Protocol):
    """What the recorder needs of the API: core v1 Events, and the client's loop."""

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def patch_event(
        self, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]: ...

    def run(self, coro: Coroutine[Any, Any, T]) -> T: ...


@dataclass(frozen=True)
class ObjectRef:
    """The Event's `involvedObject`: a CronWorkflow."""

    namespace: str
    name: str
    uid: str = ""
    kind: str = "CronWorkflow"
    api_version: str = "argoproj.io/v1alpha1"

    def as_dict(self) -> dict[str, str]:
        d = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }
        if self.uid:
            d["uid"] = self.uid
        return d


@dataclass
class Event:
    """One event as the correlator sees it (the fields of a core v1 Event it reads)."""

    ref: ObjectRef
    type: str
    reason: str
    message: str
    at: datetime
    count: int = 1
    first: datetime | None = None
    name: str = ""

    def body(self, instance: str = "") -> dict[str, Any]:
        first = self.first or self.at
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": self.name, "namespace": self.ref.namespace},
            "involvedObject": self.ref.as_dict(),
            "reason": self.reason,
            "message": self.message,
            "type": self.type,
            "source": {"component": COMPONENT, **({"host": instance} if instance else {})},
            "firstTimestamp": _time(first),
            "lastTimestamp": _time(self.at),
            "count": self.count,
        }
        return body


def _time(t: datetime) -> str:
    """metav1.Time: RFC 3339 to the second, UTC."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Lru(OrderedDict[str, Any]):
    """client-go's `lru.New(maxLruCacheEntries)`."""

    def __init__(self, size: int = MAX_LRU_CACHE_ENTRIES) -> None:
        super().__init__()
        self.size = size

    def get_recent(self, key: str) -> Any:
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


@dataclass
class _Aggregate:
    local_keys: set[str]
    last: float


@dataclass
class _Observed:
    count: int
    first: datetime
    name: str


@dataclass
class _Bucket:
    tokens: float
    last: float


@dataclass
class Correlated:
    """What to write for one event: a new Event (`patch` False) or a patch of the count of
    one written before (`patch` True, `event.name` names it); `skip` when rate limited."""

    event: Event
    patch: bool = False
    skip: bool = False


def _source_object(e: Event) -> list[str]:
    r = e.ref
    return [COMPONENT, r.kind, r.namespace, r.name, r.uid, r.api_version]


@dataclass
class EventCorrelator:
    """client-go's EventCorrelator: aggregate, deduplicate, rate-limit. `monotonic` seconds
    and wall times are passed in, so tests step them."""

    max_events: int = MAX_EVENTS_PER_AGGREGATE
    interval: float = AGGREGATE_INTERVAL_SECONDS
    burst: int = SPAM_BURST
    qps: float = SPAM_QPS
    _aggregates: _Lru = field(default_factory=_Lru)
    _observed: _Lru = field(default_factory=_Lru)
    _spam: _Lru = field(default_factory=_Lru)
    _names: int = 0

    def correlate(self, e: Event, monotonic: float) -> Correlated:
        event, key = self._aggregate(e, monotonic)
        patch = self._observe(event, key)
        if self._filtered(event, monotonic):
            return Correlated(event, patch, skip=True)
        return Correlated(event, patch)

    def _aggregate(self, e: Event, now: float) -> tuple[Event, str]:
        """EventAggregator.EventAggregate: the key to deduplicate on, and the event (its
        message combined once similar events are too many)."""
        aggregate_key = "\x00".join([*_source_object(e), e.type, e.reason])
        event_key = aggregate_key + "\x00" + e.message
        record: _Aggregate | None = self._aggregates.get_recent(aggregate_key)
        if record is None or now - record.last > self.interval:
            record = _Aggregate(set(), now)
        record.local_keys.add(e.message)
        record.last = now
        self._aggregates.put(aggregate_key, record)
        if len(record.local_keys) < self.max_events:
            return e, event_key
        combined = Event(e.ref, e.type, e.reason, COMBINED_PREFIX + e.message, e.at)
        return combined, aggregate_key

    def _observe(self, e: Event, key: str) -> bool:
        """eventLogger.eventObserve: a second sight of a key counts up on the first Event."""
        seen: _Observed | None = self._observed.get_recent(key)
        if seen is not None:
            e.count, e.first, e.name = seen.count + 1, seen.first, seen.name
            patch = True
        else:
            e.count, e.first = 1, e.at
            e.name = e.name or self._name(e)
            patch = False
        self._observed.put(key, _Observed(e.count, e.first or e.at, e.name))
        return patch

    def _name(self, e: Event) -> str:
        """`<object>.<hex>` as client-go names Events (it uses the time in nanoseconds; a
        counter keeps two events of one instant apart)."""
        self._names += 1
        stamp = int(e.at.timestamp() * 1e9) + self._names
        return f"{e.ref.name}.{stamp:x}"

    def _filtered(self, e: Event, now: float) -> bool:
        """EventSourceObjectSpamFilter: a token bucket per source, object and type."""
        key = "\x00".join([*_source_object(e), e.type])
        bucket: _Bucket | None = self._spam.get_recent(key)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.last) * self.qps)
        bucket.last = now
        self._spam.put(key, bucket)
        if bucket.tokens < 1.0:
            return True
        bucket.tokens -= 1.0
        return False

    def forget_name(self, e: Event) -> None:
        """The Event a patch was for is gone (expired, deleted): the next sight creates it
        again under a new name (client-go's "patch failed, create it")."""
        for key, seen in list(self._observed.items()):
            if seen.name == e.name:
                del self._observed[key]


@dataclass
class RecorderStats:
    """What became of the events emitted: the metric's outcomes."""

    created: int = 0
    patched: int = 0
    rate_limited: int = 0
    dropped: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class EventRecorder:
    """Emit without blocking; write from a thread of its own (`start`) or by `drain`."""

    def __init__(
        self,
        api: EventsApi,
        *,
        clock: Clock = SYSTEM_CLOCK,
        instance: str = "",
        queue_size: int = QUEUE_SIZE,
        correlator: EventCorrelator | None = None,
        yield_to: threading.Event | None = None,
        yield_at_most: float = YIELD_AT_MOST,
    ) -> None:
        """`yield_to`: set while the API server may have the writer's requests; the thread
        waits for it before each write, for at most `yield_at_most` seconds in one stretch
        (`_yield`). Events are what a burst's creations can best do without: each is a
        create the server pays as much for as for a Workflow, and a burst's SuccessfulCreate
        Events, written one by one beside its creations, took that much capacity from them."""
        self.api = api
        self.clock = clock
        self.instance = instance
        self.correlator = correlator or EventCorrelator()
        self.stats = RecorderStats()
        self._queue: queue.Queue[Event | None] = queue.Queue(queue_size)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # the correlator and the stats: drain vs the thread
        self.yield_to = yield_to
        self.yield_at_most = yield_at_most
        #: When the writer began to hold back for the stretch of creations going on now.
        self._held_since: float | None = None

    # -- the hot path -------------------------------------------------------------------------

    def emit(self, ref: ObjectRef, type_: str, reason: str, message: str, at: datetime) -> bool:
        """Queue one event; False (and counted) when the queue is full. Never blocks."""
        if len(message) > MESSAGE_LIMIT:
            message = message[: MESSAGE_LIMIT - 3] + "..."
        try:
            self._queue.put_nowait(Event(ref, type_, reason, message, at))
            return True
        except queue.Full:
            with self._lock:
                self.stats.dropped += 1
            return False

    # -- the writer ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="kube-events", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued, then end the thread; at most `timeout` seconds in all (what
        is still queued then is lost with the process: best effort)."""
        if self._thread is None:
            return
        deadline = self.clock.monotonic() + timeout
        try:
            self._queue.put(None, timeout=timeout / 2)
        except queue.Full:
            pass
        self._thread.join(max(0.0, deadline - self.clock.monotonic()))
        self._thread = None

    def pending(self) -> int:
        return self._queue.qsize()

    def drain(self) -> int:
        """Write everything queued now, on the caller's thread (tests; `run` has the thread).
        Returns how many events were taken."""
        n = 0
        while True:
            try:
                e = self._queue.get_nowait()
            except queue.Empty:
                return n
            if e is not None:
                self._write(e)
                n += 1

    def _main(self) -> None:
        while True:
            e = self._queue.get()
            if e is None:
                return
            try:
                self._yield()
                self._write(e)
            except Exception:  # pragma: no cover - best effort: never let the thread die
                log.exception("writing an Event failed")

    def _yield(self) -> None:
        """Wait until `yield_to` is set, or until this stretch of waiting has lasted
        `yield_at_most`; past that, write without waiting until it is seen set again."""
        if self.yield_to is None or self.yield_to.is_set():
            self._held_since = None
            return
        now = self.clock.monotonic()
        if self._held_since is None:
            self._held_since = now
        left = self._held_since + self.yield_at_most - now
        if left > 0 and self.yield_to.wait(left):
            self._held_since = None

    def _write(self, e: Event) -> None:
        with self._lock:
            c = self.correlator.correlate(e, self.clock.monotonic())
            if c.skip:
                self.stats.rate_limited += 1
                return
        for _ in range(WRITE_TRIES):
            try:
                outcome = self.api.run(self._send(c))
            except ApiError as err:
                if err.status in (400, 403, 422):  # refused for good: do not insist
                    log.debug("Event %s refused: %s", c.event.reason, err)
                    break
                continue
            with self._lock:
                if outcome == "patched":
                    self.stats.patched += 1
                else:
                    self.stats.created += 1
            return
        with self._lock:
            self.stats.failed += 1

    async def _send(self, c: Correlated) -> str:
        e = c.event
        if c.patch:
            body = {
                "count": e.count,
                "lastTimestamp": _time(e.at),
                "message": e.message,
            }
            try:
                await self.api.patch_event(e.ref.namespace, e.name, body)
                return "patched"
            except ApiError as err:
                if err.status != 404:
                    raise
                # Gone (events expire after an hour by default): a new Event, as client-go.
                with self._lock:
                    self.correlator.forget_name(e)
                    e.name = self.correlator._name(e)
                    e.count, e.first = 1, e.at
        try:
            await self.api.create_event(e.ref.namespace, e.body(self.instance))
        except ApiError as err:
            if err.status != 409:  # already there: a retry of a create whose answer was lost
                raise
        return "created"


# -- what the log's events become -----------------------------------------------------------

#: The audit types that become Kubernetes Events (ScheduleFired becomes `SuccessfulCreate`
#: when its Workflow is created: the dispatcher says so, `created_event`).
AUDIT_TYPES = (
    "ScheduleSkipped",
    "SubmissionFailed",
    "RunNotStarted",
    "RunCompleted",
    "RunVanished",
    "RunRecovered",
    "HistoryPruned",
    "Suspended",
    "Resumed",
    "PausedAfterFailures",
    "FailureCountReset",
    "Stopped",
    "SpecRejected",
)


def _stamp(t: datetime | None) -> str:
    return "" if t is None else _time(t)


def created_event(workflow: str) -> tuple[str, str, str]:
    """CronJob's `SuccessfulCreate` ("Created job NAME"), for a Workflow."""
    return NORMAL, "SuccessfulCreate", f"Created workflow {workflow}"


def event_for(row: Any) -> tuple[str, str, str] | None:
    """(type, reason, message) of the Kubernetes Event for one audit row (an AuditRow of
    projections/readmodel.py), None for a row that has none. The words are CronJob's
    (k8s.io/kubernetes pkg/controller/cronjob) and Argo's where either has one."""
    d: dict[str, Any] = row.detail
    t = row.type
    message = str(d.get("message") or "")
    if t == "ScheduleSkipped":
        count = int(d.get("count") or 1)
        ticks = (
            f"{count} ticks {_stamp(row.scheduled_time)}..{d.get('lastScheduledTime')}"
            if count > 1
            else f"tick {_stamp(row.scheduled_time)}"
        )
        if row.reason == "DeadlineExceeded":
            return WARNING, "MissSchedule", f"Missed scheduled time to start a workflow: {ticks}"
        if row.reason == "ConcurrencyForbid":
            return (
                NORMAL,
                "JobAlreadyActive",
                "Not starting workflow because prior execution is running and concurrency"
                f" policy is Forbid: {ticks}",
            )
        why = f": {message}" if message else ""
        return NORMAL, str(row.reason or "Skipped"), f"Skipped {ticks} ({row.reason}){why}"
    if t == "SubmissionFailed":
        attempts = int(d.get("attempts") or 1)
        if row.reason == "SubmissionError" or (not row.reason and not d.get("transient")):
            return WARNING, "SubmissionError", f"Failed to submit Workflow: {message}"
        state = "given up" if row.reason == "SubmissionRetriesExhausted" else "will retry"
        return (
            WARNING,
            "TransientSubmissionError",
            f"Failed to submit Workflow {row.workflow} (transient, {state}; {attempts}"
            f" attempt{'s' if attempts != 1 else ''}): {message}",
        )
    if t == "RunNotStarted":
        return (
            WARNING,
            "MissSchedule",
            f"Missed scheduled time to start a workflow: {_stamp(row.scheduled_time)}: {message}",
        )
    if t == "RunCompleted":
        return (
            NORMAL,
            "SawCompletedJob",
            f"Saw completed workflow: {row.workflow}, status: {d.get('phase')}",
        )
    if t == "RunVanished":
        return NORMAL, "MissingJob", f"Active workflow went missing: {row.workflow}"
    if t == "RunRecovered":
        return (
            WARNING,
            "UnexpectedJob",
            f"Saw a workflow that the controller did not create or forgot: {row.workflow}",
        )
    if t == "HistoryPruned":
        return (
            NORMAL,
            "SuccessfulDelete",
            "Deleted workflows " + ", ".join(d.get("workflows") or []),
        )
    if t in ("Suspended", "Resumed", "FailureCountReset"):
        by = f" by {d['by']}" if d.get("by") else ""
        note = f": {d['note']}" if d.get("note") else ""
        return NORMAL, t, f"{t}{by}{note}"
    if t == "PausedAfterFailures":
        runs = ", ".join(d.get("workflows") or [])
        return (
            WARNING,
            "PausedAfterFailures",
            f"Paused after {d.get('threshold')} consecutive failed runs: {runs}",
        )
    if t == "Stopped":
        return NORMAL, "Stopped", f"Stop strategy met: {row.reason or message}"
    if t == "SpecRejected":
        return WARNING, "SpecError", message
    return None
