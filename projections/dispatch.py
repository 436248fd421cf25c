"""The dispatcher: turns ScheduleFired into a Workflow, HistoryPruned into deletions.

At least once by design: the target operation happens before the tracking position moves, so
a crash between the two repeats the operation on restart. That is safe only because every
target operation is idempotent on the deterministic Workflow name (create exclusively, or
AlreadyExists with our owner and scheduled time counts as done).

No run starts past its deadline (docs/design.md invariant 4): a schedule or catch-up fire the
dispatcher reaches at or after its tick + `startingDeadlineSeconds` (the late tolerance when
that is unset) is not created; it is recorded as RunNotStarted instead. Manual and backfill
fires have no deadline: someone asked for them explicitly, as `kubectl create job --from` has
none. A fire past its deadline whose Workflow exists already (created before a crash that kept
the position from moving) is done, never "not started".
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from eventsourcing.persistence import Tracking

# Re-exported beside LABEL_CRON: the child Workflow's vocabulary, defined once in the domain.
from cronsource.domain.adoption import ANNOTATION_SCHEDULED as ANNOTATION_SCHEDULED
from cronsource.domain.calendars import is_calendar_event
from cronsource.domain.cronworkflow import (
    SUBMISSION_EXHAUSTED,
    SUBMISSION_REFUSED,
    SUBMISSION_RETRYING,
    CronWorkflow,
)
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from cronsource.domain.durations import format_duration
from cronsource.domain.service import event_type
from cronsource.projections.readmodel import AggregateFollower, rfc3339

LABEL_CRON = "workflows.argoproj.io/cron-workflow"
#: CronWorkflow labels Argo copies onto each child (convert.go `labelsToPropagate`). Not the
#: controller instance id, which Argo also copies: here it selects cronsource as the cron
#: controller, and the child must go to Argo's workflow controller, which takes only
#: Workflows without it (docs/operator-guide.md; tests/e2e/test_argo_controller_interop.py).
PROPAGATED_LABELS = (
    "workflows.argoproj.io/creator",
    "workflows.argoproj.io/creator-email",
    "workflows.argoproj.io/creator-preferred-username",
)


class PermanentSubmissionError(Exception):
    """The target refused the Workflow for good (422, 403, a name taken by someone else):
    retrying cannot help, so the failure is fed back as a SubmissionFailed event."""


@dataclass(frozen=True)
class Creation:
    """One Workflow to create, as the dispatcher hands it to a target's `create_many`."""

    workflow: dict[str, Any]
    cron_id: str
    trigger: str = "schedule"


def is_same_workflow(existing: dict[str, Any], ours: dict[str, Any]) -> bool:
    """Whether an existing Workflow's metadata is the one we would create: an owner uid in
    common and the same scheduled time. Only then is AlreadyExists a replay that counts as
    done; any other object of the name is someone else's."""

    def owners(meta: dict[str, Any]) -> set[str]:
        return {str(o["uid"]) for o in meta.get("ownerReferences") or [] if o.get("uid")}

    def tick(meta: dict[str, Any]) -> Any:
        return (meta.get("annotations") or {}).get(ANNOTATION_SCHEDULED)

    return bool(owners(existing) & owners(ours)) and tick(existing) == tick(ours)


class FailureSink(Protocol):
    """Records SubmissionFailed: `transient` while the fire is retried, else for good;
    `reason` one of domain/cronworkflow.py's SUBMISSION_* names."""

    def __call__(
        self,
        cron_id: Any,
        workflow: str,
        scheduled_time: datetime,
        message: str,
        at: datetime,
        *,
        transient: bool = False,
        reason: str = SUBMISSION_REFUSED,
        attempts: int = 1,
    ) -> Any: ...


class RecoveredSink(Protocol):
    """Records SubmissionRecovered: a create succeeded after recorded transient failures."""

    def __call__(self, cron_id: Any, workflow: str, attempts: int, at: datetime) -> Any: ...


class CreatedSink(Protocol):
    """Told of each Workflow the target created (or found ours): the Kubernetes Events'
    `SuccessfulCreate`. Must not block: it is on the dispatcher's path."""

    def __call__(self, agg: CronWorkflow, workflow: str, at: datetime) -> None: ...


#: How long a fire without a starting deadline (manual, backfill, a buffered tick without
#: `startingDeadlineSeconds`) is retried after its first transient failure before it is
#: given up. Argo's PR #16233 has no bound (the missed tick is retried at every reconcile
#: while the condition is set); without one, a Workflow the API server keeps refusing with a
#: 5xx would hold up every fire after it in the log for ever.
RETRY_WITHOUT_DEADLINE = timedelta(minutes=10)
#: Creations sent to a streaming target (`submit_many`) as soon as this many are built, so
#: that the first of a burst is not held back while the rest of its batch is built.
STREAM_CHUNK = 64


@dataclass
class Attempts:
    """The failed creates of one fire this dispatcher is retrying (in memory: a restart
    starts counting again, and the aggregate keeps a retried fire from being recorded
    twice)."""

    first: datetime
    count: int = 0
    last_error: str = ""
    recorded: bool = False


#: Creations collected for the target, in log order: the fire, its CronWorkflow, the Workflow.
_Creates = list[tuple[Any, CronWorkflow, dict[str, Any]]]


class Answers(Protocol):
    """The answers of creations sent and not waited for (a `concurrent.futures.Future`):
    one per creation, in order, as `create_many` returns them."""

    def result(self) -> list[BaseException | None]: ...


@dataclass
class _Sent:
    """What the dispatcher has in flight, in log order: creations sent to the target (with
    their answers to come), or the end of a batch (its last tracking: the position moves
    there once everything before it was answered)."""

    creates: _Creates = field(default_factory=list)
    answers: Answers | None = None
    end: Tracking | None = None


class NotStartedSink(Protocol):
    def __call__(
        self,
        cron_id: Any,
        workflow: str,
        message: str,
        late: timedelta,
        deadline: timedelta,
        at: datetime,
    ) -> None: ...


#: The reason a RunNotStarted event gives for a fire reached past its starting deadline.
NOT_STARTED_REASON = "DeadlineExceeded"


def start_deadline(agg: CronWorkflow, trigger: str, late_tolerance: timedelta) -> timedelta | None:
    """How long after its tick a fire's Workflow may still be created: the CronWorkflow's
    `startingDeadlineSeconds`, or the late tolerance when that is unset or 0 (the same
    rule as the scheduler's for a catch-up, domain/service.py `commit_deadline`). None for
    manual and backfill fires, which have no deadline, and for a buffered tick without
    `startingDeadlineSeconds`."""
    if trigger == "buffer":
        # A tick that waited in the buffer: startingDeadlineSeconds bounds it; without one
        # it waits as long as the run it waited for (buffered overlap).
        return agg.policy(late_tolerance).deadline
    if trigger not in ("schedule", "catchup"):
        return None
    return agg.policy(late_tolerance).deadline or late_tolerance


def not_started_message(
    agg: CronWorkflow, late: timedelta, deadline: timedelta, late_tolerance: timedelta
) -> str:
    """Why a fire's Workflow was not created, naming the deadline's source (the event's
    message; the status condition and `why` put it after "not started:")."""
    d = agg.spec_model.starting_deadline_seconds
    source = (
        f"startingDeadlineSeconds: {d}"
        if d
        else f"the late tolerance of {format_duration(late_tolerance)};"
        " startingDeadlineSeconds is unset"
    )
    return (
        f"the dispatcher reached it {format_duration(late)} after its tick, past its starting"
        f" deadline of {format_duration(deadline)} ({source})"
    )


class WorkflowTarget(Protocol):
    """Where Workflows go: the local directory, the simulator, or a Kubernetes cluster.

    Every one keeps the contract the at-least-once dispatch needs
    (tests/integration/test_target_conformance.py holds all three to it): a repeated create of
    our Workflow is done; a name that is not ours (`is_same_workflow` false) raises
    PermanentSubmissionError; terminating a finished or missing run and deleting a missing one
    are not errors.
    """

    def create(
        self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: datetime
    ) -> None: ...

    def created(self, workflow: dict[str, Any], *, cron_id: str) -> bool:
        """Whether this Workflow of ours exists (`is_same_workflow`): a fire past its
        deadline that was created before a crash is done, not "not started"."""
        ...

    def terminate(self, namespace: str, name: str, at: datetime) -> None: ...

    def delete(self, namespace: str, name: str, at: datetime) -> None: ...


class PositionStore(Protocol):
    def max_tracking_id(
        self, application_name: str, projection: str | None = None
    ) -> int | None: ...

    def track(self, projection: str, tracking: Tracking) -> bool: ...


def build_workflow(
    agg: CronWorkflow, workflow_name: str, scheduled_time: datetime
) -> dict[str, Any]:
    """The child Workflow as Argo's cron controller would create it
    (workflow/common/convert.go ConvertCronWorkflowToWorkflowWithProperties): the creator
    labels carried over from the CronWorkflow (not its controller instance id), the cron
    label, then `workflowMetadata` labels, annotations (over the scheduled time, as Argo
    copies them last) and finalizers."""
    spec = agg.spec
    wmeta = spec.get("workflowMetadata") or {}
    labels = {k: agg.labels[k] for k in PROPAGATED_LABELS if k in agg.labels}
    labels[LABEL_CRON] = agg.name
    labels.update(wmeta.get("labels") or {})
    annotations = {ANNOTATION_SCHEDULED: rfc3339(scheduled_time)}
    annotations.update(wmeta.get("annotations") or {})
    meta: dict[str, Any] = {
        "name": workflow_name,
        "namespace": agg.namespace,
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "CronWorkflow",
                "name": agg.name,
                "uid": agg.uid or str(agg.id),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if wmeta.get("finalizers"):
        meta["finalizers"] = list(wmeta["finalizers"])
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": meta,
        "spec": json_copy(spec.get("workflowSpec") or {}),
    }


def json_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists and immutable scalars), so a target that
    edits the Workflow never edits the aggregate's spec. A third of `copy.deepcopy`'s cost,
    which was a fifth of the dispatcher's time; anything else is left to `copy.deepcopy`."""
    kind = type(value)
    if kind is dict:
        return {k: json_copy(v) for k, v in value.items()}
    if kind is list:
        return [json_copy(v) for v in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


class Dispatcher:
    name = "dispatch"

    def __init__(
        self,
        target: WorkflowTarget,
        positions: PositionStore,
        follower: AggregateFollower,
        on_failure: FailureSink | None = None,
        on_not_started: NotStartedSink | None = None,
        late_tolerance: Callable[[], timedelta] = lambda: DEFAULT_LATE_TOLERANCE,
        on_recovered: RecoveredSink | None = None,
    ):
        self.target = target
        self.positions = positions
        self.follower = follower
        self.on_failure = on_failure
        self.on_not_started = on_not_started
        self.on_recovered = on_recovered
        #: Told of every Workflow created (adapters wire the Kubernetes Events here).
        self.on_created: CreatedSink | None = None
        #: The fires being retried after transient errors, by (stream id, Workflow name).
        #: At most one batch's worth: the position does not move past a retried fire.
        self.attempts: dict[tuple[str, str], Attempts] = {}
        #: The runtime's late tolerance (`run --late-tolerance`), read at each batch.
        self.late_tolerance = late_tolerance

    def process_batch(self, batch: Sequence[tuple[Any, Tracking]], at: datetime) -> None:
        """Dispatch one batch in order; the position moves once, after all of it (a crash
        before that repeats it, which the idempotent target absorbs)."""
        self.process_batches([batch], at)

    def process_batches(
        self, batches: Iterable[Sequence[tuple[Any, Tracking]]], at: datetime
    ) -> Tracking | None:
        """Dispatch batch after batch, in order; returns the last position moved to.

        `at` is the runtime's clock when the batches are dispatched: a fire whose starting
        deadline has passed by then is not created (`_not_started`). Creations are collected
        and handed to the target together where it can take many at once (`create_many`: one
        flush to disk for the local target); anything else a batch asks of the target
        (terminate, delete) first waits for the creations sent so far, so the target sees
        the operations in log order.

        A target that answers later (`submit_many`: a cluster, whose creations are requests
        in flight) is streamed to: a batch's creations are sent as soon as they are built,
        and the next batch is read and sent while they are still answered, so the API server
        always has a window of creations in flight instead of a batch's tail at a time. The
        answers are taken in log order, and the position moves to the end of a batch only
        once every creation up to it was answered: it never passes an unanswered fire. When
        anything fails, what is still in flight is waited for and its answers dropped: the
        position stays, and the repeat finds those Workflows ours already.
        """
        window: deque[_Sent] = deque()
        reached: Tracking | None = None
        try:
            for batch in batches:
                # The end of the batch before this one: its creations are answered while
                # this batch is read and sent, and taken once this one is in flight.
                older = window[-1] if window else None
                self._dispatch_batch(batch, at, window)
                if batch:
                    window.append(_Sent(end=batch[-1][1]))
                if older is not None:
                    reached = self._settle(window, at, older) or reached
            return self._settle(window, at) or reached
        finally:
            for sent in window:
                if sent.answers is not None:
                    try:
                        sent.answers.result()
                    except Exception:  # noqa: S110 - dropped: the repeat sends it again
                        pass

    def _dispatch_batch(
        self, batch: Sequence[tuple[Any, Tracking]], at: datetime, window: deque[_Sent]
    ) -> None:
        creates: _Creates = []
        late_tolerance = self.late_tolerance()
        self.follower.prefetch([ev for ev, _ in batch])
        for ev, _ in batch:
            if is_calendar_event(ev):
                continue  # a calendar's change creates nothing
            agg = self.follower.follow(ev)
            kind = event_type(ev)
            if kind == "ScheduleFired":
                wf = build_workflow(agg, ev.workflow_name, ev.scheduled_time)
                deadline = start_deadline(agg, ev.trigger, late_tolerance)
                tried = self.attempts.get((str(agg.id), ev.workflow_name))
                if tried is not None and at >= self._retry_until(ev, agg, tried, late_tolerance):
                    # A fire this dispatcher was retrying and whose deadline has passed since.
                    self._given_up(ev, agg, wf, tried, late_tolerance, at)
                    continue
                if deadline is not None and at >= ev.scheduled_time + deadline:
                    # Nothing of this fire reaches the target, not even the terminations of
                    # the runs it replaces: they go on, as when a CronJob misses its window.
                    self._not_started(ev, agg, wf, deadline, late_tolerance, at)
                    continue
                if ev.replaced:
                    self._send(creates, at, window)
                    self._settle(window, at)
                    for old in ev.replaced:
                        self.target.terminate(agg.namespace, old, at)
                creates.append((ev, agg, wf))
                if len(creates) >= STREAM_CHUNK and self.streams:
                    self._send(creates, at, window)
            elif kind == "HistoryPruned":
                self._send(creates, at, window)
                self._settle(window, at)
                for name in ev.workflow_names:
                    self.target.delete(agg.namespace, name, at)
        self._send(creates, at, window)

    @property
    def streams(self) -> bool:
        """Whether the target answers later (`submit_many`): batches are then streamed."""
        return getattr(self.target, "submit_many", None) is not None

    def _send(
        self,
        creates: _Creates,
        at: datetime,
        window: deque[_Sent],
    ) -> None:
        """Hand the collected creations to the target and empty the list: sent (answered
        later, `_settle`) where the target streams, else created now and answered at once,
        before anything after them in the log is done."""
        if not creates:
            return
        submit = getattr(self.target, "submit_many", None)
        if submit is not None:
            creations = [Creation(wf, str(agg.id), ev.trigger) for ev, agg, wf in creates]
            window.append(_Sent(list(creates), submit(creations)))
            creates.clear()
            return
        self._settle(window, at)
        self._create(creates, at)

    def _settle(
        self, window: deque[_Sent], at: datetime, through: _Sent | None = None
    ) -> Tracking | None:
        """Take the answers in the window, in order, up to and including `through` (all of
        them without it; nothing when it was taken already), and move the position past
        each batch that ends among them; returns the last position moved to, if any. An
        answer that asks for a repeat raises (`_answer`), after which the rest of the
        window is dropped by the caller."""
        if through is not None and not any(sent is through for sent in window):
            return None
        reached: Tracking | None = None
        while window:
            sent = window.popleft()
            if sent.answers is not None:
                try:
                    errors = sent.answers.result()
                except PermanentSubmissionError:
                    raise
                except Exception as e:  # the whole call failed (no answer): each creation did
                    errors = [e] * len(sent.creates)
                self._answer(sent.creates, errors, at)
            elif sent.end is not None:
                self.positions.track(self.name, sent.end)
                reached = sent.end
            if sent is through:
                break
        return reached

    def _not_started(
        self,
        ev: Any,
        agg: CronWorkflow,
        wf: dict[str, Any],
        deadline: timedelta,
        late_tolerance: timedelta,
        at: datetime,
    ) -> None:
        """A fire reached past its deadline: record that it was not started, unless its
        Workflow exists already. That happens when the Workflow was created in time and the
        process died before the position moved; the replay then comes late, and the run
        did start. A transient error of the target here propagates like one of a create:
        the position stays and the batch is repeated, so nothing is recorded on a guess.

        Recording twice is harmless (a replay after the event was saved but before the
        position moved): the aggregate records nothing for a run that is not active."""
        try:
            created = self.target.created(wf, cron_id=str(agg.id))
        except PermanentSubmissionError:
            raise
        except Exception as e:
            # Whether it was created cannot be known, and the deadline has passed: the fire
            # is given up with this error rather than holding up every fire after it.
            tried = Attempts(first=at, count=1, last_error=str(e))
            self._give_up(ev, agg, tried, deadline, late_tolerance, at)
            return
        if created:
            return
        if self.on_not_started is None:
            raise RuntimeError(
                f"workflow {agg.namespace}/{ev.workflow_name} is past its starting deadline"
                " and this dispatcher has nowhere to record that it was not started"
            )
        late = at - ev.scheduled_time
        message = not_started_message(agg, late, deadline, late_tolerance)
        self.on_not_started(agg.id, ev.workflow_name, message, late, deadline, at)

    def process_event(self, ev: Any, tracking: Tracking, at: datetime) -> None:
        self.process_batch([(ev, tracking)], at)

    def _create(self, creates: _Creates, at: datetime) -> None:
        """Send the collected creations to the target and empty the list.

        Targets that can take many at once (`create_many`: one flush to disk for the local
        target, concurrent requests for a cluster) answer per creation: None when done, else
        the error. A refusal for good is fed back as SubmissionFailed (SubmissionError). A
        transient error (one that outlived the target's own retries) is recorded once per
        fire as SubmissionFailed (TransientSubmissionError, the run stays active), and then
        raised after the others were reported: the position stays and the batch is repeated
        after the step's backoff, the creations that did succeed answering "already ours"
        and a refusal recorded already not being recorded again (the aggregate records a
        failure only for an active run). A fire still failing at its deadline (`_retry_until`)
        is given up: SubmissionFailed (SubmissionRetriesExhausted) with the last error and
        the number of attempts. The first create that succeeds after recorded trouble is
        recorded as SubmissionRecovered, which clears the status condition.
        """
        if not creates:
            return
        creations = [Creation(wf, str(agg.id), ev.trigger) for ev, agg, wf in creates]
        many = getattr(self.target, "create_many", None)
        errors: list[BaseException | None]
        if many is not None:
            try:
                errors = many(creations, at)
            except PermanentSubmissionError:
                raise
            except Exception as e:  # the whole call failed (no answer): each creation did
                errors = [e] * len(creations)
        else:
            errors = []
            for c in creations:
                try:
                    self.target.create(c.workflow, cron_id=c.cron_id, trigger=c.trigger, at=at)
                    errors.append(None)
                except Exception as e:  # refused for good, or transient: sorted out below
                    errors.append(e)
        self._answer(creates, errors, at)

    def _answer(
        self,
        creates: _Creates,
        errors: Sequence[BaseException | None],
        at: datetime,
    ) -> None:
        """What the target answered to each creation (`_create`'s rules), in order."""
        retry: BaseException | None = None
        late_tolerance = self.late_tolerance()
        for (ev, agg, _), error in zip(creates, errors, strict=True):
            key = (str(agg.id), ev.workflow_name)
            if error is None:
                self._created(ev, agg, self.attempts.pop(key, None), at)
            elif isinstance(error, PermanentSubmissionError):
                tried = self.attempts.pop(key, None)
                if self.on_failure is None:
                    raise error
                self.on_failure(
                    agg.id,
                    ev.workflow_name,
                    ev.scheduled_time,
                    str(error),
                    at,
                    transient=False,
                    reason=SUBMISSION_REFUSED,
                    attempts=1 + (tried.count if tried else 0),
                )
            else:
                tried = self.attempts.setdefault(key, Attempts(first=at))
                tried.count += 1
                tried.last_error = str(error)
                # Within its deadline (one past it is not created: `process_batch` gives it
                # up at the next turn, `_given_up`).
                if self.on_failure is None:
                    raise error
                if not tried.recorded:
                    self.on_failure(
                        agg.id,
                        ev.workflow_name,
                        ev.scheduled_time,
                        f"{error} (attempt {tried.count}; retried until"
                        f" {rfc3339(self._retry_until(ev, agg, tried, late_tolerance))})",
                        at,
                        transient=True,
                        reason=SUBMISSION_RETRYING,
                        attempts=tried.count,
                    )
                    tried.recorded = True
                retry = retry or error
        creates.clear()
        if retry is not None:
            # The position stays: the batch is repeated (after the step's backoff), and the
            # creations that did succeed then answer "already ours".
            raise retry

    def _created(self, ev: Any, agg: CronWorkflow, tried: Attempts | None, at: datetime) -> None:
        """A Workflow was created: tell the Events, and clear the transient trouble a
        retried fire (or an earlier one given up) left on the status."""
        if self.on_created is not None:
            self.on_created(agg, ev.workflow_name, at)
        if self.on_recovered is not None and (
            tried is not None or agg.submission_trouble is not None
        ):
            self.on_recovered(agg.id, ev.workflow_name, 1 + (tried.count if tried else 0), at)

    def _retry_until(
        self, ev: Any, agg: CronWorkflow, tried: Attempts, late_tolerance: timedelta
    ) -> datetime:
        """When a fire failing with transient errors is given up: at its starting deadline
        (as a fire reached late is not started), else RETRY_WITHOUT_DEADLINE after its first
        failed create."""
        deadline = start_deadline(agg, ev.trigger, late_tolerance)
        if deadline is None:
            return tried.first + RETRY_WITHOUT_DEADLINE
        tick: datetime = ev.scheduled_time
        return tick + deadline

    def _given_up(
        self,
        ev: Any,
        agg: CronWorkflow,
        wf: dict[str, Any],
        tried: Attempts,
        late_tolerance: timedelta,
        at: datetime,
    ) -> None:
        """A retried fire reached past its deadline: done if a create whose answer was lost
        made it after all, else given up with the last error."""
        key = (str(agg.id), ev.workflow_name)
        try:
            created = self.target.created(wf, cron_id=str(agg.id))
        except Exception as e:  # this check failed too: the last attempt, and its error
            created, tried.last_error = False, str(e)
            tried.count += 1
        self.attempts.pop(key, None)
        if created:
            self._created(ev, agg, tried, at)
            return
        deadline = start_deadline(agg, ev.trigger, late_tolerance)
        self._give_up(ev, agg, tried, deadline, late_tolerance, at)

    def _give_up(
        self,
        ev: Any,
        agg: CronWorkflow,
        tried: Attempts,
        deadline: timedelta | None,
        late_tolerance: timedelta,
        at: datetime,
    ) -> None:
        """Record a fire failed to submit for good after transient errors, with the last."""
        if self.on_failure is None:
            raise RuntimeError(
                f"workflow {agg.namespace}/{ev.workflow_name}: {tried.last_error}, and this"
                " dispatcher has nowhere to record that it was given up"
            )
        bound = (
            f"its starting deadline of {format_duration(deadline)}"
            if deadline is not None
            else f"{format_duration(RETRY_WITHOUT_DEADLINE)} of retries"
        )
        attempts = "1 attempt" if tried.count == 1 else f"{tried.count} attempts"
        self.on_failure(
            agg.id,
            ev.workflow_name,
            ev.scheduled_time,
            f"{tried.last_error} ({attempts}; given up after {bound})",
            at,
            transient=False,
            reason=SUBMISSION_EXHAUSTED,
            attempts=tried.count,
        )
