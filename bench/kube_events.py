"""The cost of Kubernetes Events on the hot path and on the API server:
`python -m bench.kube_events [--events N] [--objects K]`.

In process, no server (tests/integration/test_kube_events.py runs the same recorder against
the real one). Measured:

- `emit_us`: what a fire pays for its Event, `EventRecorder.emit` into the bounded queue
  (nothing writes meanwhile, so from the 1,000th on it is the drop path: the worst case is
  the same constant);
- `correlate_us`: the writer thread's bookkeeping per event (client-go's aggregation,
  deduplication and spam filter) over N events spread on K CronWorkflows;
- `one_object`: 1,000 fires of one CronWorkflow one minute apart, written through an API
  that only counts: Event objects created, patches, events rate limited; `api_writes` is
  what the API server would be sent for those 1,000 fires.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from bench.common import emit, machine_note, r
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube.events import (
    Event,
    EventCorrelator,
    EventRecorder,
    ObjectRef,
    created_event,
)

T = TypeVar("T")
T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


class CountingApi:
    """An EventsApi that keeps nothing and answers at once."""

    def __init__(self) -> None:
        self.created = 0
        self.patched = 0

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created += 1
        return body

    async def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.patched += 1
        return body

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            coro.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        raise RuntimeError("the counting API never waits")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--objects", type=int, default=10_000)
    args = p.parse_args(argv)

    api = CountingApi()
    recorder = EventRecorder(api)
    ref = ObjectRef("ns", "job", "uid")
    start = time.perf_counter()
    for i in range(args.events):
        recorder.emit(ref, "Normal", "SuccessfulCreate", f"Created workflow job-{i}", T0)
    emit_us = (time.perf_counter() - start) / args.events * 1e6

    correlator = EventCorrelator()
    refs = [ObjectRef("ns", f"job-{k}", f"uid-{k}") for k in range(args.objects)]
    start = time.perf_counter()
    for i in range(args.events):
        e = Event(refs[i % args.objects], "Normal", "SuccessfulCreate", f"Created job-{i}", T0)
        correlator.correlate(e, i * 0.001)
    correlate_us = (time.perf_counter() - start) / args.events * 1e6

    api = CountingApi()
    clock = VirtualClock(T0)
    recorder = EventRecorder(api, clock=clock)
    for i in range(1000):
        at = T0 + timedelta(minutes=i)
        clock.set(at)
        recorder.emit(ref, *created_event(f"job-{i}"), at)
        recorder.drain()
    result = {
        "bench": "kube_events",
        "events": args.events,
        "objects": args.objects,
        "emit_us": r(emit_us, 2),
        "correlate_us": r(correlate_us, 2),
        "one_object": {
            "fires": 1000,
            "event_objects": api.created,
            "patches": api.patched,
            "rate_limited": recorder.stats.rate_limited,
            "api_writes": api.created + api.patched,
        },
        "machine": machine_note(),
    }
    emit(result)
    return result


if __name__ == "__main__":
    main()
