"""Prometheus metrics: one CollectorRegistry per app, nothing registered globally.

Scheduling counters come from the event log, not from the code that decided: the audit view
holds every committed event exactly once (its rows are keyed by log position), so counting its
rows counts each decision once, whichever replica made it, however often it was retried. A
decision the store refused (a stale replica) leaves no event and is not counted as a fire; it
shows up in `cronsource_rejected_writes_total` of the process that made it.

How the counters are kept (`EventTail`): at the first scrape, one aggregate query per family
over the audit rows up to the current head (a GROUP BY in the database, so a long history costs
one scan, not a Python loop); after that each scrape reads only the rows appended since, by
position. Every process that serves /metrics therefore reports the same totals for the shared
log: aggregate them across replicas with max(), not sum(). A restart starts from the whole
history again, so the counters never go backwards between scrapes of one process.

Per-CronWorkflow counters (`run --per-cronworkflow-metrics`, off by default): fires and
skipped ticks labelled namespace and name, as Argo's per-CronWorkflow metrics are. One series
per CronWorkflow (and skip reason) is too many for a fleet of thousands, hence opt-in
(docs/operator-guide.md says where the line is).

The other families are read at scrape time: projection lag (log head minus each projection's
tracking position), due-index size, rejected writes of this process, and replica ownership
from PostgreSQL's advisory locks (adapters/infrastructure/shards.py), which any process can see.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from cronsource.adapters.clock import SYSTEM_CLOCK, Clock
from cronsource.adapters.infrastructure.locks import PROJECTOR_LOCK_CLASS
from cronsource.adapters.infrastructure.readside.queries import Queries
from cronsource.adapters.runtime.engine import Engine

#: Fire skew buckets in seconds: on-time fires land in the first few (the scheduler wakes at
#: the due time), late fires within the 30 s late tolerance in the middle, catch-ups after an
#: outage in the last ones.
SKEW_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
#: Audit rows read per query while tailing, and seconds one scrape may spend tailing; a
#: backlog beyond that is read over the next scrapes.
TAIL_PAGE = 5000
TAIL_BUDGET = 2.0
COUNTED_TYPES = (
    "ScheduleFired",
    "ScheduleSkipped",
    "RunCompleted",
    "SubmissionFailed",
    "RunNotStarted",
)


def _truthy(v: Any) -> bool:
    return v in (True, 1, "1", "true", "True", "t")


class EventTail:
    """Counters over the audit log, advanced by log position (see the module docstring)."""

    def __init__(self, view: Queries, per_cronworkflow: bool = False) -> None:
        self.view = view
        self.per_cronworkflow = per_cronworkflow
        self.position: int | None = None
        self.fires: dict[tuple[str, str], float] = defaultdict(float)
        self.skip_events: dict[tuple[str, str], float] = defaultdict(float)
        self.skipped_ticks: dict[tuple[str, str], float] = defaultdict(float)
        self.runs: dict[tuple[str, str], float] = defaultdict(float)
        self.dispatch_errors: dict[str, float] = defaultdict(float)
        self.not_started: dict[tuple[str, str], float] = defaultdict(float)
        # per CronWorkflow, when per_cronworkflow: (namespace, name) and (namespace, name, reason)
        self.cron_fires: dict[tuple[str, str], float] = defaultdict(float)
        self.cron_skipped: dict[tuple[str, str, str], float] = defaultdict(float)
        # per trigger: cumulative-free bucket counts (index len(SKEW_BUCKETS) is +Inf), sum
        self.skew: dict[str, list[float]] = {}
        self.skew_sum: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def _load(self) -> None:
        head = self.view.audit_head()
        for ns, typ, reason, trigger, phase, transient, n, ticks in self.view.event_counts(
            head, COUNTED_TYPES
        ):
            self._count(ns, typ, reason, trigger, phase, transient, n, ticks)
        for trigger, n, total, cumulative in self.view.fire_skew(head, SKEW_BUCKETS):
            counts = [*cumulative, float(n)]
            buckets = [counts[0]] + [counts[i] - counts[i - 1] for i in range(1, len(counts))]
            self.skew[trigger] = buckets
            self.skew_sum[trigger] = total
        if self.per_cronworkflow:
            for ns, name, typ, reason, n, ticks in self.view.cronworkflow_counts(head):
                self._count_cronworkflow(ns, name, typ, reason, n, ticks)
        self.position = head

    def _count_cronworkflow(
        self, ns: str, name: str, typ: str, reason: str | None, n: int, ticks: int
    ) -> None:
        if typ == "ScheduleFired":
            self.cron_fires[(ns, name)] += n
        elif typ == "ScheduleSkipped":
            self.cron_skipped[(ns, name, reason or "Unknown")] += ticks

    def _count(
        self,
        ns: str,
        typ: str,
        reason: str | None,
        trigger: Any,
        phase: Any,
        transient: Any,
        n: int,
        ticks: int,
    ) -> None:
        if typ == "ScheduleFired":
            self.fires[(ns, str(trigger or "schedule"))] += n
        elif typ == "ScheduleSkipped":
            self.skip_events[(ns, reason or "Unknown")] += n
            self.skipped_ticks[(ns, reason or "Unknown")] += ticks
        elif typ == "RunCompleted":
            self.runs[(ns, str(phase or "Unknown"))] += n
        elif typ == "SubmissionFailed":
            self.dispatch_errors["transient" if _truthy(transient) else "permanent"] += n
        elif typ == "RunNotStarted":
            self.not_started[(ns, reason or "Unknown")] += n

    def _observe_skew(self, trigger: str, seconds: float) -> None:
        buckets = self.skew.setdefault(trigger, [0.0] * (len(SKEW_BUCKETS) + 1))
        for i, b in enumerate(SKEW_BUCKETS):
            if seconds <= b:
                buckets[i] += 1
                break
        else:
            buckets[-1] += 1
        self.skew_sum[trigger] += seconds

    def refresh(self, budget: float = TAIL_BUDGET) -> None:
        """Count what was appended since the last call (at the first, the whole history)."""
        with self._lock:
            if self.position is None:
                self._load()
                return
            deadline = SYSTEM_CLOCK.monotonic() + budget
            while True:
                rows = self.view.tail(self.position, COUNTED_TYPES, TAIL_PAGE)
                for r in rows:
                    detail = r.detail
                    trigger = detail.get("trigger")
                    self._count(
                        r.namespace,
                        r.type,
                        r.reason,
                        trigger,
                        detail.get("phase"),
                        detail.get("transient"),
                        1,
                        int(detail.get("count", 1)),
                    )
                    if self.per_cronworkflow:
                        self._count_cronworkflow(
                            r.namespace, r.name, r.type, r.reason, 1, int(detail.get("count", 1))
                        )
                    if r.type == "ScheduleFired" and trigger in ("schedule", "catchup"):
                        assert r.scheduled_time is not None  # a fire is for a tick
                        self._observe_skew(trigger, r.at - float(r.scheduled_time))
                    self.position = r.position
                if len(rows) < TAIL_PAGE or SYSTEM_CLOCK.monotonic() >= deadline:
                    break

    def collect(self) -> Iterable[Metric]:
        fires = CounterMetricFamily(
            "cronsource_fires",
            "ScheduleFired events in the log (each fired tick once), by trigger",
            labels=["namespace", "trigger"],
        )
        for (ns, trigger), v in sorted(self.fires.items()):
            fires.add_metric([ns, trigger], v)
        skips = CounterMetricFamily(
            "cronsource_skip_decisions",
            "ScheduleSkipped events in the log (a folded range of ticks is one), by reason",
            labels=["namespace", "reason"],
        )
        for (ns, reason), v in sorted(self.skip_events.items()):
            skips.add_metric([ns, reason], v)
        ticks = CounterMetricFamily(
            "cronsource_skipped_ticks",
            "Ticks decided as skipped (a folded range counts each of its ticks), by reason",
            labels=["namespace", "reason"],
        )
        for (ns, reason), v in sorted(self.skipped_ticks.items()):
            ticks.add_metric([ns, reason], v)
        runs = CounterMetricFamily(
            "cronsource_runs_completed",
            "RunCompleted events in the log, by phase",
            labels=["namespace", "phase"],
        )
        for (ns, phase), v in sorted(self.runs.items()):
            runs.add_metric([ns, phase], v)
        errors = CounterMetricFamily(
            "cronsource_dispatch_errors",
            "SubmissionFailed events in the log (a Workflow the target refused), by kind",
            labels=["kind"],
        )
        for kind in ("permanent", "transient"):
            errors.add_metric([kind], self.dispatch_errors.get(kind, 0.0))
        not_started = CounterMetricFamily(
            "cronsource_runs_not_started",
            "Fires whose Workflow was not created by their starting deadline (RunNotStarted)",
            labels=["namespace", "reason"],
        )
        for (ns, reason), v in sorted(self.not_started.items()):
            not_started.add_metric([ns, reason], v)
        skew = HistogramMetricFamily(
            "cronsource_fire_skew_seconds",
            "Decision time minus scheduled time of schedule and catch-up fires",
            labels=["trigger"],
        )
        for trigger, buckets in sorted(self.skew.items()):
            cumulative, acc = [], 0.0
            for b, c in zip([*map(str, SKEW_BUCKETS), "+Inf"], buckets, strict=True):
                acc += c
                cumulative.append((b, acc))
            skew.add_metric([trigger], cumulative, sum_value=self.skew_sum[trigger])
        families: list[Metric] = [fires, skips, ticks, runs, errors, not_started, skew]
        if self.per_cronworkflow:
            families += self._per_cronworkflow()
        return families

    def _per_cronworkflow(self) -> list[Metric]:
        fires = CounterMetricFamily(
            "cronsource_cronworkflow_fires",
            "ScheduleFired events in the log of each CronWorkflow (every trigger)",
            labels=["namespace", "name"],
        )
        for (ns, name), v in sorted(self.cron_fires.items()):
            fires.add_metric([ns, name], v)
        skipped = CounterMetricFamily(
            "cronsource_cronworkflow_skipped_ticks",
            "Ticks of each CronWorkflow decided as skipped (a folded range counts each of its"
            " ticks), by reason",
            labels=["namespace", "name", "reason"],
        )
        for (ns, name, reason), v in sorted(self.cron_skipped.items()):
            skipped.add_metric([ns, name, reason], v)
        return [fires, skipped]


class _EngineCollector(Collector):
    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        tail: EventTail,
        rejected_by_api: Callable[[], int],
        loop: Any = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.tail = tail
        self.rejected_by_api = rejected_by_api
        self.loop = loop

    def describe(self) -> Iterable[Metric]:
        return []  # collected lazily: describing must not touch the store

    def collect(self) -> Iterable[Metric]:
        yield from self.tail.collect()
        yield from self._engine()
        yield from self._ownership()
        yield from self._kube_events()

    def _kube_events(self) -> Iterable[Metric]:
        """What became of the Kubernetes Events this process emitted (`run --kube`):
        written (created, or a count patched on one written before), rate limited by the
        spam filter, dropped (queue full) or failed (the API refused or did not answer)."""
        feed = getattr(getattr(self.loop, "watcher", None), "events", None)
        recorder = getattr(feed, "recorder", None)
        if recorder is None:
            return
        family = CounterMetricFamily(
            "cronsource_kube_events",
            "Kubernetes Events emitted on CronWorkflows, by what became of them: created,"
            " patched (a count on an Event written before), rate_limited (client-go's spam"
            " filter), dropped (the bounded queue was full), failed (not written)",
            labels=["outcome"],
        )
        for outcome, n in sorted(recorder.stats.as_dict().items()):
            family.add_metric([outcome], float(n))
        yield family
        yield GaugeMetricFamily(
            "cronsource_kube_events_queued",
            "Kubernetes Events waiting to be written",
            value=float(recorder.pending()),
        )

    def _engine(self) -> Iterable[Metric]:

        rejected = CounterMetricFamily(
            "cronsource_rejected_writes",
            "Saves the store refused for a stale version, in this process: decisions re-made"
            " on fresh state (source=decision) and API writes with a stale If-Match"
            " (source=if_match)",
            labels=["source"],
        )
        rejected.add_metric(["decision"], float(self.engine.rejected_writes))
        rejected.add_metric(["if_match"], float(self.rejected_by_api()))
        yield rejected
        lags = GaugeMetricFamily(
            "cronsource_projection_lag_events",
            "Events in the log not yet processed by each projection",
            labels=["projection"],
        )
        for projection, behind in sorted(self.engine.projector.lag().items()):
            lags.add_metric([projection], float(behind))
        yield lags
        size, overdue = self.engine.view.due_counts(self.clock.now())
        yield GaugeMetricFamily(
            "cronsource_due_index_size",
            "Live CronWorkflows with a next due time in the due index",
            value=float(size),
        )
        yield GaugeMetricFamily(
            "cronsource_due_overdue",
            "CronWorkflows whose due time has passed and that are not decided yet",
            value=float(overdue),
        )
        counts = GaugeMetricFamily(
            "cronsource_cronworkflows",
            "Live CronWorkflows, by namespace",
            labels=["namespace"],
        )
        live = self.engine.view.live_by_namespace()
        for ns, n in live:
            counts.add_metric([ns], float(n))
        yield counts
        paused = GaugeMetricFamily(
            "cronsource_cronworkflows_paused_after_failures",
            "Live CronWorkflows paused after consecutive failed runs"
            " (cronsource.io/pause-after-failures), by namespace; resume clears it",
            labels=["namespace"],
        )
        # Every namespace with live CronWorkflows has a series (0 when none is paused), so an
        # alert on `> 0` sees the series before the first pause.
        by_ns = dict.fromkeys((ns for ns, _ in live), 0) | dict(
            self.engine.view.paused_by_namespace()
        )
        for ns, n in sorted(by_ns.items()):
            paused.add_metric([ns], float(n))
        yield paused

    def _ownership(self) -> Iterable[Metric]:
        """Replica ownership. On PostgreSQL from pg_locks (every replica's session advisory
        locks, as adapters/infrastructure/shards.py takes them); embedded stores have one process,
        which owns everything when it runs a scheduler loop."""
        from cronsource.adapters.infrastructure import shards

        if self.loop is not None:
            owned = getattr(self.loop.ownership, "owned", None)
            yield GaugeMetricFamily(
                "cronsource_local_shards_owned",
                "Shards the scheduler loop of this process owns",
                value=float(len(owned) if owned is not None else shards.SHARDS),
            )
            yield GaugeMetricFamily(
                "cronsource_local_projector",
                "1 if this process runs the projections",
                value=float(self.loop.runs_projections),
            )
            lease = getattr(self.loop.ownership, "lease", None)
            if (
                lease is not None
            ):  # PostgreSQL: this replica's lease (adapters/infrastructure/leases.py)
                age = lease.age()
                yield GaugeMetricFamily(
                    "cronsource_lease_age_seconds",
                    "Seconds since this replica last renewed its lease (NaN while it holds none)",
                    value=float("nan") if age is None else age,
                )
                yield CounterMetricFamily(
                    "cronsource_leases_lost",
                    "Times this replica gave up its shards and projector role because its lease"
                    " lapsed or its lock session was lost",
                    value=float(self.loop.ownership.leases_lost),
                )
                takeovers = CounterMetricFamily(
                    "cronsource_lease_takeovers",
                    "Lapsed replicas whose PostgreSQL backends this replica terminated, and"
                    " terminations the server refused for want of privilege",
                    labels=["result"],
                )
                takeovers.add_metric(["terminated"], float(self.loop.ownership.takeovers))
                takeovers.add_metric(["refused"], float(self.loop.ownership.takeovers_refused))
                yield takeovers
            failures = CounterMetricFamily(
                "cronsource_worker_failures",
                "Failed turns of this process's workers (each retried with backoff)",
                labels=["worker"],
            )
            for sup in self.loop.supervisors:
                failures.add_metric([sup.name], float(sup.failures))
            yield failures
            yield CounterMetricFamily(
                "cronsource_clock_backward_jumps",
                "Times this process saw the wall clock move back by more than the late"
                " tolerance (nothing fires until it reaches the next undecided tick again)",
                value=float(self.loop.clock_backward_jumps),
            )
        if self.engine.config.kind != "postgresql":
            return
        rows = self.engine.view.advisory_locks(
            (shards._MEMBER_CLASS, shards._SHARD_CLASS, PROJECTOR_LOCK_CLASS)
        )
        # Locks held by a replica whose lease lapsed (frozen, or cut off) count as nobody's:
        # its CronWorkflows are decided by nobody until the others terminate its session.
        lapsed = self.engine.view.lapsed_lease_pids()
        # A backend's replica identity from the leases (the pod name on Kubernetes); a backend
        # no lease names yet (a replica joining) keeps its pid.
        names = {pid: holder for holder, pids, *_ in self.engine.view.leases() for pid in pids}
        members = {int(pid) for cls, _, pid in rows if int(cls) == shards._MEMBER_CLASS}
        by_pid: dict[int, int] = defaultdict(int)
        for cls, _, pid in rows:
            if int(cls) == shards._SHARD_CLASS:
                by_pid[int(pid)] += 1
        projector = [int(pid) for cls, _, pid in rows if int(cls) == PROJECTOR_LOCK_CLASS]
        live = members - lapsed
        yield GaugeMetricFamily(
            "cronsource_replicas",
            "Scheduler replicas alive on this database (holding the member lock, lease renewed)",
            value=float(len(live)),
        )
        yield GaugeMetricFamily(
            "cronsource_replicas_lapsed",
            "Replicas holding the member lock whose lease lapsed (frozen or cut off: the others"
            " terminate their sessions)",
            value=float(len(members & lapsed)),
        )
        per = GaugeMetricFamily(
            "cronsource_shards_owned",
            f"Shards (of {shards.SHARDS}) each replica owns; replica is its identity (the pod"
            " name, CRONSOURCE_REPLICA, or host:pid)",
            labels=["replica"],
        )
        for pid in sorted(members | set(by_pid), key=lambda p: names.get(p, str(p))):
            per.add_metric([names.get(pid, str(pid))], float(by_pid.get(pid, 0)))
        yield per
        held_lapsed = sum(n for pid, n in by_pid.items() if pid in lapsed)
        held_live = sum(n for pid, n in by_pid.items() if pid not in lapsed)
        yield GaugeMetricFamily(
            "cronsource_shards_unowned",
            "Shards no live replica owns: free, or held by a replica whose lease lapsed (their"
            " CronWorkflows are decided by nobody until a rebalance)",
            value=float(shards.SHARDS - held_live) if live else float(shards.SHARDS),
        )
        yield GaugeMetricFamily(
            "cronsource_shards_lapsed",
            "Shards held by a replica whose lease lapsed (counted in cronsource_shards_unowned)",
            value=float(held_lapsed),
        )
        yield GaugeMetricFamily(
            "cronsource_projector_replicas",
            "Replicas holding the projector lock with a live lease (1 when healthy)",
            value=float(len([p for p in projector if p not in lapsed])),
        )


#: The methods the `method` label names; any other is "other".
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Metrics:
    """The metrics of one app: its own registry, the event-log counters, engine gauges and
    HTTP request metrics. `loop` (a SchedulerLoop) adds this process's own ownership and
    worker failures when the scheduler runs in the same process; `per_cronworkflow` adds the
    opt-in per-CronWorkflow counters."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        *,
        rejected_by_api: Callable[[], int] = lambda: 0,
        loop: Any = None,
        per_cronworkflow: bool = False,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.tail = EventTail(engine.view, per_cronworkflow)
        self.registry.register(_EngineCollector(engine, clock, self.tail, rejected_by_api, loop))
        self.http_requests = Counter(
            "cronsource_http_requests",
            "HTTP requests served, by route template and status code",
            ["method", "route", "code"],
            registry=self.registry,
        )
        self.http_seconds = Histogram(
            "cronsource_http_request_duration_seconds",
            "HTTP request latency, by route template",
            ["method", "route"],
            registry=self.registry,
        )

    def refresh(self) -> None:
        self.tail.refresh()

    def observe_request(self, method: str, route: str, code: int, seconds: float) -> None:
        # Any token is a method to HTTP: `curl -X M123` from anyone who can connect added a
        # counter and a histogram's series per route each (4,000 series from 200 requests).
        method = method if method in _METHODS else "other"
        self.http_requests.labels(method, route, str(code)).inc()
        self.http_seconds.labels(method, route).observe(seconds)
