"""The Kubernetes Events a simulation's runtime would send (`-o json`'s `kubeEvents`).

`run --kube` tells what happens to a CronWorkflow as Events on it: the audit log's rows through
`KubeEventFeed` (adapters/runtime/kube/events.py) and `SuccessfulCreate` from the dispatcher,
into an `EventRecorder` whose `EventCorrelator` aggregates and rate-limits them as client-go
does (adapters/infrastructure/kube/events.py). `simulate` runs those same three on the virtual
clock; only the API server is replaced, by `SimEventsApi`, which keeps the Events the recorder
creates and patches, as `kubectl get events` would list them. The recorder has no thread
here: the simulation drains it after each projection, at the instant the runtime's writer
thread would have written (nothing moves the virtual clock in between).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from cronsource.adapters.clock import Clock
from cronsource.adapters.infrastructure.kube.events import EventCorrelator, EventRecorder
from cronsource.adapters.infrastructure.kube.port import ApiError
from cronsource.adapters.infrastructure.kube.seen import SeenMetadata
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube.events import KubeEventFeed

T = TypeVar("T")


class SimEventsApi:
    """The Events part of an API server (`EventsApi`), in memory: each Event as it stands
    after the creates and patches, in the order they were created."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        key = (namespace, body["metadata"]["name"])
        if key in self.events:
            raise ApiError(409, "AlreadyExists")
        self.events[key] = dict(body)
        return body

    async def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        event = self.events.get((namespace, name))
        if event is None:
            raise ApiError(404, "NotFound")
        event.update(body)
        return event

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the recorder's calls to completion on the caller's thread: nothing
        here waits, so the coroutine finishes at its first step."""
        try:
            coro.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        coro.close()
        raise RuntimeError("a simulated Events call waited")


class SimKubeEvents:
    """The runtime's Events feed and recorder over `SimEventsApi`, fed by `engine`'s audit
    log and dispatcher."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.api = SimEventsApi()
        # Unbounded: a burst of more fires than `run`'s queue holds is written by its thread
        # as it comes, where here it waits for the drain at the end of the projection.
        self.recorder = EventRecorder(self.api, clock=clock, queue_size=0)
        #: The CronWorkflows "the cluster shows" (the watch's copy in `run --kube`): each
        #: Event's object, from its apply to its delete.
        self.seen = SeenMetadata()
        self.feed = KubeEventFeed(engine, self.recorder, self.seen)
        self.feed.start(writer=False)
        if engine.dispatcher is not None:
            engine.dispatcher.on_created = self.feed.created

    def applied(self, namespace: str, name: str, uid: str) -> None:
        """A CronWorkflow applied: the cluster shows it, with `uid`."""
        meta = {"namespace": namespace, "name": name, "uid": uid, "resourceVersion": "1"}
        self.seen.saw({"metadata": meta})

    def deleted(self, namespace: str, name: str) -> None:
        """A CronWorkflow deleted: what happens to it from now on has no object to go on."""
        self.seen.forget(namespace, name)

    def restarted(self) -> None:
        """The replica starts again after an outage, as `run` does: the correlator's caches
        start empty, and nothing recorded before now is sent (the feed starts at the head)."""
        self.recorder.correlator = EventCorrelator()
        # Audit positions are the log's: what the actions recorded during the outage (a
        # suspend), projected by the first turn after it, is before the head now. `run`'s
        # feed starts at the audit's head, which the CLI's own projection moved there.
        self.feed.position = max(self.feed.position or 0, self.engine.projector.head())

    def step(self, projected: int) -> None:
        """After a projection (`projected`: the events the read model took): send the Events
        of the new audit rows and of the Workflows created."""
        if projected:
            self.feed.step()
        if self.recorder.pending():
            self.recorder.drain()

    def result(self) -> list[dict[str, Any]]:
        """Every Event written, in the order created, as it stands at the end."""
        return [
            {
                "cronWorkflow": f"{e['involvedObject']['namespace']}/{e['involvedObject']['name']}",
                "type": e["type"],
                "reason": e["reason"],
                "message": e["message"],
                "count": e["count"],
                "firstTimestamp": e["firstTimestamp"],
                "lastTimestamp": e["lastTimestamp"],
            }
            for e in self.api.events.values()
        ]
