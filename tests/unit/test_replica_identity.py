"""Visible replicas (issue 25 item 5): each replica's identity, and where it shows.

The identity rule (adapters/infrastructure/replica.py): CRONSOURCE_REPLICA, else POD_NAME (the
downward API), else host:pid. A scheduler given an identity records it as `decidedBy` on its
decisions, which the audit, `history -o json` and the `cronsource_decisions_v1` view show; it
logs each decision it saved itself, and the projector's DecisionLog leaves those to it.
"""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest
from click.testing import CliRunner

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.cli import cli
from cronsource.adapters.infrastructure.logs import (
    DecisionLog,
    JsonFormatter,
    replica_filter,
)
from cronsource.adapters.infrastructure.replica import (
    MAX_LENGTH,
    BadReplicaName,
    replica_identity,
)
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type

H = datetime(2026, 5, 4, 11, 0, tzinfo=UTC)


# ------------------------------------------------------------------ the identity rule


def test_pod_name_from_the_downward_api() -> None:
    assert (
        replica_identity({"POD_NAME": "cronsource-7d9f-abcde"}, "h", 1) == "cronsource-7d9f-abcde"
    )


def test_cronsource_replica_wins_over_pod_name() -> None:
    env = {"POD_NAME": "pod-a", "CRONSOURCE_REPLICA": "east-1"}
    assert replica_identity(env, "h", 1) == "east-1"


def test_host_and_pid_when_nothing_names_it() -> None:
    assert replica_identity({}, "node7", 4242) == "node7:4242"


def test_blank_values_are_not_names() -> None:
    env = {"CRONSOURCE_REPLICA": "  ", "POD_NAME": ""}
    assert replica_identity(env, "node7", 4242) == "node7:4242"
    assert replica_identity({"POD_NAME": " pod-b \n"}, "h", 1) == "pod-b"


def test_no_host_name_still_gives_a_name() -> None:
    assert replica_identity({}, "", 9) == "localhost:9"


@pytest.mark.parametrize(
    ("value", "words"),
    [("a\x00b", "control characters"), ("x" * (MAX_LENGTH + 1), f"at most {MAX_LENGTH}")],
)
def test_bad_names_are_refused_naming_the_variable(value: str, words: str) -> None:
    with pytest.raises(BadReplicaName) as e:
        replica_identity({"CRONSOURCE_REPLICA": value}, "h", 1)
    assert str(e.value).startswith("CRONSOURCE_REPLICA: ")
    assert words in str(e.value)


def test_every_log_line_names_the_replica() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    replica_filter(handler, "pod-a")
    replica_filter(handler, "pod-b")  # a second call replaces the first
    lg = logging.getLogger("cronsource.test.replica")
    lg.addHandler(handler)
    lg.propagate = False
    try:
        lg.warning("hello")
    finally:
        lg.removeHandler(handler)
    assert json.loads(out.getvalue())["replica"] == "pod-b"


# ------------------------------------------------------------------ decidedBy


def _setup(engine: Engine, replica: str | None) -> tuple[UUID, SchedulerLoop]:
    manifest = parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": "hourly", "namespace": "default"},
            "spec": {
                "schedules": ["0 * * * *"],
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
            },
        }
    )
    cron_id, _ = engine.service.apply(manifest, H - timedelta(minutes=30))
    engine.projector.catch_up(H - timedelta(minutes=30))
    loop = SchedulerLoop(
        engine, SoleOwner(), role="scheduler", clock=VirtualClock(H), replica=replica
    )
    return cron_id, loop


@pytest.mark.stores("sqlite")
def test_decisions_record_the_replica_that_decided(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    cron_id, loop = _setup(engine, "pod-a")
    with caplog.at_level(logging.INFO, logger="cronsource.decisions"):
        assert loop.schedule_once(H) == 1
    fired = [e for e in engine.service.events.get(cron_id) if event_type(e) == "ScheduleFired"]
    assert [e.decided_by for e in fired] == ["pod-a"]
    # Logged by the replica that decided, at decision time, with decidedBy.
    lines = [r for r in caplog.records if r.name == "cronsource.decisions"]
    assert len(lines) == 1
    assert lines[0].__dict__["decidedBy"] == "pod-a"
    assert lines[0].__dict__["cronWorkflow"] == "default/hourly"
    assert "fired hourly-" in lines[0].getMessage()
    engine.projector.catch_up(H)
    rows = [r for r in engine.view.audit("default", "hourly") if r.type == "ScheduleFired"]
    assert rows[0].as_event()["decidedBy"] == "pod-a"  # `history -o json`
    # The audit view's replica column.
    replica = engine.view._query(  # noqa: SLF001
        "SELECT replica FROM cronsource_decisions_v1 WHERE decision = 'Fired'"
    )
    assert [r[0] for r in replica] == ["pod-a"]
    # The projector does not log it a second time.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="cronsource.decisions"):
        log = DecisionLog(engine.view)
        log.position = 0
        log.emit_new()
    assert not [r for r in caplog.records if "fired" in r.getMessage()]


@pytest.mark.stores("sqlite")
def test_a_decision_without_a_replica_names_none_and_the_projector_logs_it(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    cron_id, loop = _setup(engine, None)
    loop.schedule_once(H)
    fired = [e for e in engine.service.events.get(cron_id) if event_type(e) == "ScheduleFired"]
    assert [e.decided_by for e in fired] == [None]
    engine.projector.catch_up(H)
    rows = [r for r in engine.view.audit("default", "hourly") if r.type == "ScheduleFired"]
    assert "decidedBy" not in rows[0].as_event()
    with caplog.at_level(logging.INFO, logger="cronsource.decisions"):
        log = DecisionLog(engine.view)
        log.position = 0
        log.emit_new()
    assert [r for r in caplog.records if "fired" in r.getMessage()]


def test_an_event_written_before_decided_by_reads_as_none(engine: Engine) -> None:
    """A stored version 1 ScheduleFired (no `decided_by`) is upcast on load."""
    from cronsource.domain.cronworkflow import CronWorkflow

    fired_cls = CronWorkflow.ScheduleFired  # type: ignore[attr-defined]
    state = {
        "originator_id": UUID(int=1),
        "originator_version": 2,
        "timestamp": H,
        "scheduled_time": H,
        "workflow_name": "x-1",
        "fired_at": H,
        "trigger": "schedule",
        "replaced": [],
    }
    upcast = fired_cls.upcast_v1_v2
    upcast(state)
    assert state["decided_by"] is None
    assert fired_cls.class_version == 2


# ------------------------------------------------------------------ `cronsource replicas`


def test_replicas_on_sqlite_with_no_run_says_so(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/c.db"
    assert CliRunner().invoke(cli, ["--store", store, "migrate"]).exit_code == 0
    res = CliRunner().invoke(cli, ["--store", store, "replicas"])
    assert res.exit_code == 0, res.output
    assert "no replica running" in res.output
    as_json = CliRunner().invoke(cli, ["--store", store, "replicas", "-o", "json"])
    assert json.loads(as_json.output) == []


def test_replicas_on_sqlite_lists_the_run_holding_the_file(tmp_path: Path) -> None:
    from cronsource.adapters.infrastructure.locks import FileLock

    store = f"sqlite:///{tmp_path}/c.db"
    assert CliRunner().invoke(cli, ["--store", store, "migrate"]).exit_code == 0
    held = FileLock(f"{tmp_path}/c.db.projector-lock", "laptop:4242")  # as `run` holds it
    assert held.try_acquire()
    try:
        res = CliRunner().invoke(cli, ["--store", store, "replicas", "-o", "json"])
    finally:
        held.release()
    listed = json.loads(res.output)
    assert [(r["replica"], r["shards"], r["projector"]) for r in listed] == [
        ("laptop:4242", 64, True)
    ]
