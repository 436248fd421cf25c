"""The Workflow target port (projections/dispatch.py `WorkflowTarget`), one contract for all three
implementations: LocalTarget (adapters/infrastructure/localtarget.py), KubeTarget on the real test
API server (adapters/infrastructure/kube/target.py) and the simulator's SimTarget
(adapters/entrypoints/simulate/target.py).

The contract, as the dispatcher relies on it (it is at least once: a crash between the target
operation and the tracking position repeats the operation on restart):

- `create` is idempotent on the deterministic Workflow name: creating again the SAME Workflow
  (the same CronWorkflow owner uid in `ownerReferences`, the same scheduled-time annotation) is
  done, not an error, and leaves exactly the one Workflow that was created first.
- A name that exists and is not ours (another CronWorkflow's owner uid, no owner at all, or our
  owner with another scheduled time) is refused for good: `PermanentSubmissionError`, which the
  dispatcher feeds back as SubmissionFailed. The object found is left untouched.
- `created` says whether our Workflow (the same owner uid and scheduled time) exists: the
  dispatcher asks before it records a fire past its deadline as not started, so that a
  Workflow created before a crash counts as done. Missing, deleted, or someone else's: False.
- `create_many` (optional: LocalTarget and KubeTarget have it) answers per creation, in order:
  None when done, the PermanentSubmissionError when refused; one refusal does not stop the rest.
- `terminate` (Replace) ends a running Workflow; a Workflow that has finished already, or that
  does not exist, is not an error and is left as it is (Argo #11377).
- `delete` (history pruning) removes the Workflow; deleting a missing one, or deleting twice, is
  not an error (a replayed HistoryPruned).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest

from cronsource.adapters.entrypoints.simulate import SimTarget
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.projections.dispatch import (
    ANNOTATION_SCHEDULED,
    LABEL_CRON,
    Creation,
    PermanentSubmissionError,
    WorkflowTarget,
)
from cronsource.projections.readmodel import rfc3339
from tests.instants import T0

TICK = T0 + timedelta(minutes=1)
NEXT_TICK = T0 + timedelta(minutes=2)
NAME = "job-1777888860"


def workflow(
    namespace: str,
    name: str = NAME,
    owner_uid: str | None = "uid-job",
    scheduled: datetime = TICK,
    entrypoint: str = "main",
) -> dict[str, Any]:
    """A child Workflow shaped as projections/dispatch.py `build_workflow` makes it."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {LABEL_CRON: "job"},
        "annotations": {ANNOTATION_SCHEDULED: rfc3339(scheduled)},
    }
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "CronWorkflow",
                "name": "job",
                "uid": owner_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": meta,
        "spec": {"entrypoint": entrypoint},
    }


class Harness(Protocol):
    """One implementation under the contract, with the few looks behind it the checks need."""

    namespace: str

    @property
    def target(self) -> WorkflowTarget:
        """The implementation (read-only here, so mypy checks each one is a WorkflowTarget)."""
        ...

    def entrypoint(self, name: str) -> str | None:
        """The stored Workflow's spec.entrypoint (tells whose it is); None when it is gone."""

    def put_foreign(self, wf: dict[str, Any]) -> None:
        """Store a Workflow the way someone else would, not through the target."""

    def finish(self, name: str, phase: str) -> None:
        """Let the run end with `phase`, as its controller would."""

    def terminated(self, name: str) -> bool:
        """Whether the run was asked to stop (Replace's terminate reached it)."""


# Cron ids are distinct from the owner uids, as an admitted CronWorkflow's are: KubeTarget looks
# the uid up in the cluster only for aggregates that have none (uid == cron id).
CRON_ID = "cron-job"
OTHER_CRON_ID = "cron-other"


class LocalHarness:
    def __init__(self, directory: Path) -> None:
        self.target = LocalTarget(directory, run_duration=timedelta(hours=1))
        self.namespace = "ns"

    def _manifest(self, name: str) -> dict[str, Any] | None:
        path = self.target.manifest_path(self.namespace, name)
        return json.loads(path.read_text()) if path.exists() else None

    def entrypoint(self, name: str) -> str | None:
        wf = self._manifest(name)
        return None if wf is None else str(wf["spec"]["entrypoint"])

    def put_foreign(self, wf: dict[str, Any]) -> None:
        path = self.target.manifest_path(self.namespace, wf["metadata"]["name"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(wf))

    def finish(self, name: str, phase: str) -> None:
        self.target.phase_path(self.namespace, name).write_text(phase + "\n")

    def terminated(self, name: str) -> bool:
        path = self.target.phase_path(self.namespace, name)
        return path.exists() and path.read_text().strip() == "Failed"


class SimHarness:
    def __init__(self) -> None:
        self.target = SimTarget(timedelta(hours=1), "Succeeded")
        self.namespace = "ns"
        self.entrypoints: dict[str, str] = {}

    def _live(self, name: str) -> Any:
        wf = self.target.workflows.get((self.namespace, name))
        return None if wf is None or wf.deleted_at is not None else wf

    def entrypoint(self, name: str) -> str | None:
        # SimWorkflow keeps no spec: the cron id that created it stands for whose it is.
        wf = self._live(name)
        return None if wf is None else self.entrypoints[wf.cron_id]

    def put_foreign(self, wf: dict[str, Any]) -> None:
        # Nothing but the target stores Workflows in the simulator: someone else's is one
        # created for another cron id (the simulator's `removeWorkflow` is the by-hand delete).
        self.entrypoints["someone-else"] = wf["spec"]["entrypoint"]
        self.target.create(wf, cron_id="someone-else", trigger="schedule", at=T0)

    def finish(self, name: str, phase: str) -> None:
        wf = self._live(name)
        wf.end_phase = phase
        self.target.finish_due(wf.ends_at)

    def terminated(self, name: str) -> bool:
        wf = self._live(name)
        return wf is not None and wf.phase == "Failed"


class KubeHarness:
    def __init__(self, kube: Any, namespace: str) -> None:
        from cronsource.adapters.infrastructure.kube import Backoff, KubeTarget

        self.kube = kube
        self.target = KubeTarget(kube, Backoff(sleep=lambda s: None))
        self.namespace = namespace

    def _get(self, name: str) -> dict[str, Any] | None:
        from cronsource.adapters.infrastructure.kube import WF, ApiError

        try:
            return self.kube.run(self.kube.get(self.namespace, WF, name))  # type: ignore[no-any-return]
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def entrypoint(self, name: str) -> str | None:
        wf = self._get(name)
        return None if wf is None else str(wf["spec"]["entrypoint"])

    def put_foreign(self, wf: dict[str, Any]) -> None:
        from cronsource.adapters.infrastructure.kube import WF

        self.kube.run(self.kube.create(self.namespace, WF, wf))

    def finish(self, name: str, phase: str) -> None:
        from cronsource.adapters.infrastructure.kube import WF

        body = {"status": {"phase": phase}}
        self.kube.run(self.kube.patch(self.namespace, WF, name, body))

    def terminated(self, name: str) -> bool:
        wf = self._get(name)
        return wf is not None and wf["spec"].get("shutdown") == "Terminate"


@pytest.fixture(params=["local", "sim", pytest.param("kube", marks=pytest.mark.k8s)])
def h(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "local":
        yield LocalHarness(tmp_path / "workflows")
    elif request.param == "sim":
        yield SimHarness()
    else:
        from cronsource.adapters.infrastructure.kube import connect

        server = request.getfixturevalue("kube_apiserver")
        namespace = request.getfixturevalue("kube_namespace")
        kube = connect(str(server.kubeconfig))
        try:
            yield KubeHarness(kube, namespace)
        finally:
            kube.close()


def create(h: Harness, wf: dict[str, Any], cron_id: str = CRON_ID) -> None:
    if isinstance(h, SimHarness):
        h.entrypoints.setdefault(cron_id, wf["spec"]["entrypoint"])
    h.target.create(wf, cron_id=cron_id, trigger="schedule", at=TICK)


def refused(h: Harness) -> Any:
    """The one refusal all three give for a name that is not ours, with the same words."""
    return pytest.raises(
        PermanentSubmissionError, match=f"{h.namespace}/{NAME} exists and is not ours"
    )


# -- create ------------------------------------------------------------------------------------


def test_a_replayed_create_of_the_same_workflow_is_done_and_leaves_one(h: Harness) -> None:
    create(h, workflow(h.namespace))
    # The replay after a crash: the same CronWorkflow, the same tick (a fresh dict, as the
    # dispatcher builds one per dispatch); its spec differs only so the check sees which stayed.
    create(h, workflow(h.namespace, entrypoint="replayed"))
    assert h.entrypoint(NAME) == "main"


def test_a_name_another_cron_workflow_owns_is_refused_and_left_alone(h: Harness) -> None:
    create(h, workflow(h.namespace, owner_uid="uid-other", entrypoint="theirs"), OTHER_CRON_ID)
    with refused(h):
        create(h, workflow(h.namespace))
    assert h.entrypoint(NAME) == "theirs"


def test_a_name_taken_by_a_workflow_we_did_not_create_is_refused_and_left_alone(
    h: Harness,
) -> None:
    h.put_foreign(workflow(h.namespace, owner_uid=None, entrypoint="theirs"))
    with refused(h):
        create(h, workflow(h.namespace))
    assert h.entrypoint(NAME) == "theirs"


def test_our_owner_with_another_scheduled_time_is_not_the_same_workflow(h: Harness) -> None:
    create(h, workflow(h.namespace, scheduled=NEXT_TICK, entrypoint="other-tick"))
    with refused(h):
        create(h, workflow(h.namespace))
    assert h.entrypoint(NAME) == "other-tick"


def test_create_many_answers_per_creation_in_order(h: Harness) -> None:
    many = getattr(h.target, "create_many", None)
    if isinstance(h, SimHarness):
        assert many is None  # SimTarget takes one at a time; the dispatcher loops over create
        return
    assert many is not None
    h.put_foreign(workflow(h.namespace, "taken", owner_uid=None, entrypoint="theirs"))
    results = many(
        [
            Creation(workflow(h.namespace, "first"), CRON_ID),
            Creation(workflow(h.namespace, "taken"), CRON_ID),
            Creation(workflow(h.namespace, "third"), CRON_ID),
        ],
        TICK,
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], PermanentSubmissionError)
    assert "/taken exists and is not ours" in str(results[1])
    assert (h.entrypoint("first"), h.entrypoint("taken"), h.entrypoint("third")) == (
        "main",
        "theirs",
        "main",
    )


# -- created -----------------------------------------------------------------------------------


def test_created_is_true_only_while_our_workflow_exists(h: Harness) -> None:
    def ours() -> bool:
        return h.target.created(workflow(h.namespace), cron_id=CRON_ID)

    assert ours() is False
    create(h, workflow(h.namespace))
    assert ours() is True  # asked with a fresh dict, as the dispatcher builds one
    assert h.target.created(workflow(h.namespace, scheduled=NEXT_TICK), cron_id=CRON_ID) is False
    h.target.delete(h.namespace, NAME, NEXT_TICK)
    assert ours() is False


def test_a_name_someone_else_holds_is_not_created(h: Harness) -> None:
    create(h, workflow(h.namespace, owner_uid="uid-other", entrypoint="theirs"), OTHER_CRON_ID)
    assert h.target.created(workflow(h.namespace), cron_id=CRON_ID) is False


# -- terminate ---------------------------------------------------------------------------------


def test_terminate_stops_a_running_workflow(h: Harness) -> None:
    create(h, workflow(h.namespace))
    assert not h.terminated(NAME)
    h.target.terminate(h.namespace, NAME, TICK)
    assert h.terminated(NAME)


def test_terminate_of_a_finished_workflow_is_not_an_error_and_leaves_it(h: Harness) -> None:
    create(h, workflow(h.namespace))
    h.finish(NAME, "Succeeded")
    h.target.terminate(h.namespace, NAME, NEXT_TICK)
    assert not h.terminated(NAME)
    assert h.entrypoint(NAME) == "main"


def test_terminate_of_a_missing_workflow_is_not_an_error(h: Harness) -> None:
    h.target.terminate(h.namespace, NAME, TICK)
    assert h.entrypoint(NAME) is None


# -- delete ------------------------------------------------------------------------------------


def test_delete_removes_and_a_repeated_or_missing_delete_is_not_an_error(h: Harness) -> None:
    create(h, workflow(h.namespace))
    h.target.delete(h.namespace, NAME, NEXT_TICK)
    assert h.entrypoint(NAME) is None
    h.target.delete(h.namespace, NAME, NEXT_TICK)  # the replayed HistoryPruned
    h.target.delete(h.namespace, "never-created", NEXT_TICK)
    assert h.entrypoint(NAME) is None
