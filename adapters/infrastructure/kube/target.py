"""The dispatcher's target on a cluster: create child Workflows, terminate and delete them.

Create is idempotent on the deterministic name: 409 AlreadyExists counts as done only if the
existing object has our owner uid and our scheduled time (a replay after a crash, or a create
whose answer was lost), otherwise the name belongs to someone else and the fire becomes
SubmissionFailed. 422, 403 and 400 are permanent (SubmissionFailed); 5xx, 429 and no answer at
all are transient and retried with backoff and jitter, and when the retries run out the error
propagates, so the dispatcher's position does not move and the batch is tried again next turn.

`create_many` is what the async client is for: a batch of fires becomes up to `in_flight`
concurrent creations on one connection pool, where a synchronous loop pays one round trip per
Workflow (bench/kube_create.py measures both).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import inspect
import logging
import random
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from cronsource.adapters.infrastructure.kube.port import CWF, WF, ApiError, KubeApi
from cronsource.adapters.infrastructure.kube.seen import SeenMetadata
from cronsource.domain.adoption import ENDED
from cronsource.projections.dispatch import Creation, PermanentSubmissionError, is_same_workflow

log = logging.getLogger("cronsource.adapters.infrastructure.kube")

T = TypeVar("T")

PERMANENT = (400, 403, 422)
#: Creations in flight at once. The API server admits 200 mutating requests at a time by
#: default (--max-mutating-requests-inflight) and shares them with every other client of the
#: cluster; 64 keeps the dispatcher at a third of that while hiding the round trip (at
#: N=1,000 on the test API server, 64 against 32 with warm connections: 825-882 Workflows/s
#: against 779-790; bench: python -m bench.kube_create --in-flight N compares).
IN_FLIGHT = 64


def is_transient(exc: BaseException) -> bool:
    """5xx, 429 and no answer (status 0: reset, refused, timeout): worth another try."""
    if isinstance(exc, ApiError):
        return exc.status == 0 or exc.status == 429 or exc.status >= 500
    return isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError))


def create_failure(exc: BaseException, namespace: str, name: str) -> BaseException:
    """What a failed create of the Workflow `namespace/name` is to the dispatcher: a refusal
    for good (400, 403, 422, and 404: the namespace or the Workflow kind does not exist;
    retrying would hold up every later Workflow behind this one) becomes a
    PermanentSubmissionError, recorded at once and not retried; anything else is returned
    as it is, and the dispatcher retries it until the fire's deadline (`is_transient`: 5xx,
    429, no answer). One rule for the cluster and for `simulate`'s target faults
    (adapters/entrypoints/simulate/target.py). 409 AlreadyExists is the caller's to sort out
    (whose Workflow it is) before it asks."""
    if isinstance(exc, ApiError) and (exc.status in PERMANENT or exc.status == 404):
        return PermanentSubmissionError(
            f"workflow {namespace}/{name} refused ({exc.status} {exc.api_reason or exc.reason})"
        )
    return exc


@dataclass
class Backoff:
    """Bounded exponential backoff with full jitter for transient API errors. `sleep` may be
    a coroutine function (the default) or a plain function (tests pass one that records)."""

    attempts: int = 5
    base: float = 0.1
    cap: float = 2.0
    sleep: Callable[[float], Any] = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)

    async def call(self, op: Callable[[], Awaitable[T]]) -> T:
        for attempt in range(self.attempts):
            try:
                return await op()
            except Exception as e:
                if not is_transient(e) or attempt == self.attempts - 1:
                    raise
                delay = self.rng.uniform(0, min(self.cap, self.base * 2**attempt))
                log.warning("transient API error (%s), retrying in %.2fs", e, delay)
                slept = self.sleep(delay)
                if inspect.isawaitable(slept):
                    await slept
        raise AssertionError("unreachable")  # pragma: no cover


async def get_object(
    kube: KubeApi, backoff: Backoff, namespace: str, plural: str, name: str
) -> dict[str, Any]:
    """One object, with transient errors retried."""
    return await backoff.call(lambda: kube.get(namespace, plural, name))


def owner_uids(meta: dict[str, Any]) -> set[str]:
    return {str(o.get("uid")) for o in meta.get("ownerReferences") or [] if o.get("uid")}


class KubeTarget:
    """WorkflowTarget (projections/dispatch.py) on a cluster, plus `create_many`."""

    def __init__(
        self, kube: KubeApi, backoff: Backoff | None = None, in_flight: int = IN_FLIGHT
    ) -> None:
        self.kube = kube
        self.backoff = backoff or Backoff()
        self.in_flight = in_flight
        self._owner_uid: dict[str, str] = {}  # cron_id -> CronWorkflow uid, when looked up
        #: The `in_flight` bound, shared by every call's creations (`_create_many`).
        self._gate: asyncio.Semaphore | None = None
        #: Where the Workflows created are remembered (their uids name the active runs in
        #: the status: adapters/kube/status.py), when the caller keeps them.
        self.seen: SeenMetadata | None = None
        #: Set while no creation waits for its answer. What else this process writes to the
        #: API server and can wait (Kubernetes Events) waits for it: the server's capacity
        #: goes to the Workflows first (adapters/infrastructure/kube/events.py).
        self.quiet = threading.Event()
        self.quiet.set()
        self._unanswered = 0  # creations of the calls running now; on the client's loop only

    # -- the synchronous face the dispatcher calls --------------------------------------------

    def create(self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: datetime) -> None:
        self.kube.run(self.create_async(workflow, cron_id))

    def create_many(
        self, creations: Sequence[Creation], at: datetime | None = None
    ) -> list[BaseException | None]:
        """Create all, `in_flight` at a time; one result per creation, in order: None when
        done, else the error (PermanentSubmissionError, or an ApiError that outlived its
        retries)."""
        return self.kube.run(self._create_many(creations))

    def submit_many(
        self, creations: Sequence[Creation]
    ) -> concurrent.futures.Future[list[BaseException | None]]:
        """`create_many` without waiting: the answers come with the future. Creations sent by
        several calls share the `in_flight` bound (the dispatcher streams a burst's batches
        through it: projections/dispatch.py `process_batches`)."""
        return self.kube.submit(self._create_many(creations))

    def warm(self, creations: int) -> int:
        """Get ready for a burst of about `creations` fires decided for an instant a moment
        away: open the connections its creations will use, now and without waiting. A pool
        idle since the last burst has closed them, and each of the burst's first creations
        would wait for a TCP and TLS handshake, which the API server pays too (at N=1,000
        the first 500 creations went at 794/s with cold connections, the next 500 at 976/s
        on warm ones)."""
        if creations > 0:
            self.kube.submit(self.kube.warm(min(creations, self.in_flight)))
        return 0  # nothing left: the connections open on the client's loop meanwhile

    def created(self, workflow: dict[str, Any], *, cron_id: str) -> bool:
        """Whether this Workflow of ours exists in the cluster (transient errors retried,
        then raised: the caller must not guess)."""
        return self.kube.run(self.created_async(workflow, cron_id))

    def terminate(self, namespace: str, name: str, at: datetime) -> None:
        self.kube.run(self.terminate_async(namespace, name))

    def delete(self, namespace: str, name: str, at: datetime) -> None:
        self.kube.run(self.delete_async(namespace, name))

    # -- the work, on the client's loop ----------------------------------------------------------

    async def _create_many(self, creations: Sequence[Creation]) -> list[BaseException | None]:
        if self._gate is None:  # made on the client's loop, where every creation runs
            self._gate = asyncio.Semaphore(self.in_flight)
        gate = self._gate

        async def one(c: Creation) -> None:
            async with gate:
                await self.create_async(c.workflow, c.cron_id)

        self._unanswered += len(creations)
        self.quiet.clear()
        try:
            results = await asyncio.gather(*(one(c) for c in creations), return_exceptions=True)
        finally:
            self._unanswered -= len(creations)
            if self._unanswered == 0:
                self.quiet.set()
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, Exception):
                raise r  # cancellation, KeyboardInterrupt: not a result
        return [r if isinstance(r, BaseException) else None for r in results]

    async def _owner(self, namespace: str, name: str, cron_id: str) -> str:
        """The CronWorkflow's uid from the API (for aggregates applied without one)."""
        if cron_id not in self._owner_uid:
            try:
                obj = await get_object(self.kube, self.backoff, namespace, CWF, name)
            except ApiError as e:
                if e.status == 404:
                    raise PermanentSubmissionError(
                        f"cronworkflow {namespace}/{name} not found in the cluster"
                    ) from e
                raise
            self._owner_uid[cron_id] = str(obj["metadata"]["uid"])
        return self._owner_uid[cron_id]

    async def create_async(self, workflow: dict[str, Any], cron_id: str) -> None:
        meta = workflow["metadata"]
        ns, name = meta["namespace"], meta["name"]
        for ref in meta.get("ownerReferences") or []:
            # build_workflow falls back to the aggregate id when the aggregate has no uid.
            if ref.get("kind") == "CronWorkflow" and ref.get("uid") == cron_id:
                ref["uid"] = await self._owner(ns, ref["name"], cron_id)
        for _ in range(3):
            try:
                created = await self.backoff.call(lambda: self.kube.create(ns, WF, workflow))
                if self.seen is not None:
                    self.seen.saw(created)
                return
            except ApiError as e:
                if e.status != 409:  # 409 AlreadyExists: whose Workflow it is, below
                    failed = create_failure(e, ns, name)
                    if failed is e:
                        raise
                    raise failed from e
            # 409 AlreadyExists: done only if it is the same Workflow (our owner, our tick).
            try:
                existing = await get_object(self.kube, self.backoff, ns, WF, name)
            except ApiError as e:
                if e.status == 404:
                    continue  # deleted in between: create again
                raise
            if is_same_workflow(existing.get("metadata") or {}, meta):
                if self.seen is not None:
                    self.seen.saw(existing)
                return
            raise PermanentSubmissionError(f"workflow {ns}/{name} exists and is not ours")
        raise PermanentSubmissionError(f"workflow {ns}/{name}: create keeps racing a delete")

    async def created_async(self, workflow: dict[str, Any], cron_id: str) -> bool:
        meta = copy.deepcopy(workflow["metadata"])
        ns, name = meta["namespace"], meta["name"]
        try:
            existing = await get_object(self.kube, self.backoff, ns, WF, name)
        except ApiError as e:
            if e.status == 404:
                return False
            raise
        for ref in meta.get("ownerReferences") or []:
            # As in `create_async`: an aggregate without a uid names the cluster's object.
            if ref.get("kind") == "CronWorkflow" and ref.get("uid") == cron_id:
                try:
                    ref["uid"] = await self._owner(ns, ref["name"], cron_id)
                except PermanentSubmissionError:
                    return False  # no such CronWorkflow: the Workflow cannot be its child
        return is_same_workflow(existing.get("metadata") or {}, meta)

    async def terminate_async(self, namespace: str, name: str) -> None:
        """Replace: `spec.shutdown: Terminate`; gone or already finished is fine."""
        try:
            obj = await get_object(self.kube, self.backoff, namespace, WF, name)
            if (obj.get("status") or {}).get("phase") in ENDED:
                return
            body = {"spec": {"shutdown": "Terminate"}}
            await self.backoff.call(lambda: self.kube.patch(namespace, WF, name, body))
        except ApiError as e:
            if e.status != 404:
                raise

    async def delete_async(self, namespace: str, name: str) -> None:
        try:
            await self.backoff.call(lambda: self.kube.delete(namespace, WF, name))
        except ApiError as e:
            if e.status != 404:
                raise
