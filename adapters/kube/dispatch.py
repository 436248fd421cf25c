"""A dispatcher that creates the Workflows of a batch concurrently (KubeTarget.create_many).

Same contract as projections.dispatch.Dispatcher, whose event handling it keeps: events in log
order, the position moved once after the whole batch. What changes is that consecutive fires
are collected and created together, up to the target's in-flight bound, instead of one round
trip each. Order still holds where it matters: a Replace's terminate or a HistoryPruned delete
may name a Workflow created earlier in the same batch, so the creations collected so far are
finished before either runs.

Failures: if any creation outlived its retries (transient), the batch raises before anything is
reported, the position stays, and the next turn repeats the batch (the creations that did
succeed answer 409 with our owner and tick then: done). Permanent refusals are fed back as
SubmissionFailed only once no transient error is left, so a repeated batch does not report the
same refusal twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from eventsourcing.persistence import Tracking

from adapters.kube.target import Creation
from domain.service import event_type
from projections.dispatch import Dispatcher, PermanentSubmissionError, build_workflow


class BatchTarget(Protocol):
    def create_many(self, creations: Sequence[Creation]) -> list[BaseException | None]: ...

    def terminate(self, namespace: str, name: str, at: datetime) -> None: ...

    def delete(self, namespace: str, name: str, at: datetime) -> None: ...


class ConcurrentDispatcher(Dispatcher):
    target: Any  # a BatchTarget (KubeTarget)

    def process_batch(self, batch: Sequence[tuple[Any, Tracking]], at: datetime) -> None:
        pending: list[tuple[Any, Any, Creation]] = []  # (event, aggregate id, creation)
        for ev, _ in batch:
            agg = self.follower.follow(ev)
            kind = event_type(ev)
            if kind == "ScheduleFired":
                if ev.replaced:
                    self._create(pending, at)
                    for old in ev.replaced:
                        self.target.terminate(agg.namespace, old, at)
                wf = build_workflow(agg, ev.workflow_name, ev.scheduled_time)
                pending.append((ev, agg.id, Creation(wf, str(agg.id))))
            elif kind == "HistoryPruned":
                self._create(pending, at)
                for name in ev.workflow_names:
                    self.target.delete(agg.namespace, name, at)
        self._create(pending, at)
        if batch:
            self.positions.track(self.name, batch[-1][1])

    def _create(self, pending: list[tuple[Any, Any, Creation]], at: datetime) -> None:
        if not pending:
            return
        results = self.target.create_many([c for _, _, c in pending])
        transient = [r for r in results if r is not None and not _permanent(r)]
        if transient:
            raise transient[0]
        for (ev, cron_id, _), result in zip(pending, results, strict=True):
            if result is None:
                continue
            if self.on_failure is None:
                raise result
            self.on_failure(cron_id, ev.workflow_name, ev.scheduled_time, str(result), at)
        pending.clear()


def _permanent(exc: BaseException) -> bool:
    return isinstance(exc, PermanentSubmissionError)
