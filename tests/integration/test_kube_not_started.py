"""No run starts past its deadline, against the real API server (tests/kube/apiserver.py):
the dispatcher creates a fire's Workflow in the cluster only until tick +
`startingDeadlineSeconds`; an API server that refuses every request (a fault proxy answering
500, tests/kube/faultproxy.py) until past the deadline leaves no Workflow, and the fire given
up with the last error (SubmissionFailed, SubmissionRetriesExhausted); a dispatcher that
comes back past the deadline records RunNotStarted; a Workflow that exists already is
success when the dispatcher replays the fire late.

The dispatcher's clock (`at`) is given; the HTTP traffic and the server are real.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from cronsource.adapters.infrastructure.kube import (
    CWF,
    GROUP,
    VERSION,
    WF,
    AioKube,
    Backoff,
    KubeTarget,
    connect,
)
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type
from tests.instants import T0
from tests.kube.faultproxy import FaultProxy, Faults
from tests.unit.test_run_not_started import crash_before_the_position_moves

pytestmark = pytest.mark.k8s

TICK = T0 + timedelta(minutes=1)
DEADLINE = timedelta(seconds=60)
NAME = workflow_name("job", TICK)


@pytest.fixture
def proxy(kube_apiserver: Any, tmp_path: Path) -> Iterator[FaultProxy]:
    """Every request through it answers 500 while it is enabled."""
    with FaultProxy(kube_apiserver.kubeconfig, tmp_path / "proxy", Faults(error=1.0)) as p:
        yield p


@pytest.fixture
def kube(proxy: FaultProxy) -> Iterator[AioKube]:
    k = connect(str(proxy.kubeconfig))
    yield k
    k.close()


@pytest.fixture
def target(kube: AioKube) -> KubeTarget:
    """tests/conftest.py's `engine` creates its Workflows through the proxy, giving up after
    two tries."""
    return KubeTarget(kube, backoff=Backoff(attempts=2, sleep=lambda s: None))


def fired(engine: Engine, api: Any, ns: str) -> UUID:
    """A CronWorkflow in the cluster, admitted with its uid, whose TICK has fired."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": "job", "namespace": ns},
        "spec": {
            "schedules": ["* * * * *"],
            "startingDeadlineSeconds": int(DEADLINE.total_seconds()),
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }
    obj = api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, body)
    body["metadata"]["uid"] = obj["metadata"]["uid"]
    cron_id, _ = engine.service.apply(parse_manifest(body), T0)
    engine.service.tick([cron_id], TICK)
    return cron_id


def children(api: Any, ns: str) -> list[str]:
    items = api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
    return [w["metadata"]["name"] for w in items]


def types(engine: Engine, cron_id: UUID) -> list[str]:
    return [event_type(e) for e in engine.service.events.get(cron_id)]


def refused_until(engine: Engine, proxy: FaultProxy, heals: timedelta) -> datetime:
    """The dispatcher tries every 10 s from the tick while the API server answers 500 (each
    try fails and keeps its position until the fire's deadline, when the fire is given up),
    then once more when it answers again; returns that last instant."""
    t = TICK
    while t < TICK + heals:
        if t < TICK + DEADLINE:
            with pytest.raises(Exception, match="500"):
                engine.projector.dispatch(t)
        else:
            engine.projector.dispatch(t)  # given up at the first try past the deadline
        t += timedelta(seconds=10)
    proxy.enabled = False
    engine.projector.dispatch(t)
    return t


@pytest.mark.parametrize(
    ("heals", "created"),
    [
        pytest.param(timedelta(seconds=30), True, id="refused for 30s of a 60s deadline"),
        pytest.param(timedelta(minutes=5), False, id="refused for 5 minutes"),
    ],
)
def test_an_api_server_refusing_until_past_the_deadline_leaves_no_workflow(
    engine: Engine,
    proxy: FaultProxy,
    api: Any,
    kube_namespace: str,
    heals: timedelta,
    created: bool,
) -> None:
    ns = kube_namespace
    cron_id = fired(engine, api, ns)

    back = refused_until(engine, proxy, heals)

    assert proxy.counts["error"] > 0
    assert children(api, ns) == ([NAME] if created else [])
    assert "RunNotStarted" not in types(engine, cron_id)
    failed = [e for e in engine.service.events.get(cron_id) if event_type(e) == "SubmissionFailed"]
    if created:
        assert [e.reason for e in failed] == ["TransientSubmissionError"]
        assert types(engine, cron_id)[-1] == "SubmissionRecovered"
        return
    # Retried until the deadline, then given up with the last error, at the first try past it.
    assert [e.reason for e in failed] == ["TransientSubmissionError", "SubmissionRetriesExhausted"]
    ev = failed[-1]
    assert ev.workflow_name == NAME and "500" in ev.message and ev.attempts == 7
    assert ev.timestamp == TICK + DEADLINE
    assert engine.service.load(cron_id).active == {}
    # The event itself reaches the dispatcher: nothing is created late, nothing recorded twice.
    engine.projector.dispatch(back + timedelta(minutes=1))
    assert children(api, ns) == [] and types(engine, cron_id).count("SubmissionFailed") == 2


def test_a_dispatcher_that_was_down_creates_nothing_past_the_deadline(
    engine: Engine, proxy: FaultProxy, api: Any, kube_namespace: str
) -> None:
    proxy.enabled = False
    ns = kube_namespace
    cron_id = fired(engine, api, ns)

    engine.projector.dispatch(TICK + timedelta(minutes=25))

    assert children(api, ns) == []
    assert types(engine, cron_id)[-1] == "RunNotStarted"


def test_a_workflow_created_before_a_crash_is_done_when_replayed_past_the_deadline(
    engine: Engine, proxy: FaultProxy, api: Any, kube_namespace: str
) -> None:
    proxy.enabled = False
    ns = kube_namespace
    cron_id = fired(engine, api, ns)
    crash_before_the_position_moves(engine, TICK + timedelta(seconds=5))
    assert children(api, ns) == [NAME]

    engine.projector.dispatch(TICK + timedelta(minutes=30))

    assert children(api, ns) == [NAME]
    assert "RunNotStarted" not in types(engine, cron_id)
    assert engine.service.load(cron_id).active == {NAME: TICK}
