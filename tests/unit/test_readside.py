"""The read side (adapters/infrastructure/readside/): one status row type with the shapes readers
print. Reads on PostgreSQL that do not wait for each other: tests/integration/test_readside.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.domain.manifest import parse_manifest
from cronsource.projections.readmodel import StatusRow, status_row

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def _row(next_due: datetime | None, labels: dict[str, str] | None) -> StatusRow:
    metadata: dict[str, Any] = {"name": "nightly", "namespace": "team"}
    if labels is not None:
        metadata["labels"] = labels
    return StatusRow(
        cron_id="0b6f6c1e-5f6b-4d3c-9a55-6f1f0f0e0c01",
        namespace="team",
        name="nightly",
        deleted=False,
        next_due=next_due,
        status={"active": [], "lastScheduledTime": None, "phase": "Active"},
        spec={"schedule": "0 2 * * *", "suspend": False},
        metadata=metadata,
        version=7,
    )


def test_a_status_row_renders_argos_cronworkflow_object_byte_for_byte() -> None:
    """The HTTP API and `get -o json` print this: resourceVersion is the aggregate version
    as a string, after the stored metadata; nextScheduledTime and nextDecisionTime come last
    in the status."""
    row = _row(T0 + timedelta(hours=16), {"team": "data"})
    assert json.dumps(row.as_object()) == (
        '{"apiVersion": "argoproj.io/v1alpha1", "kind": "CronWorkflow",'
        ' "metadata": {"name": "nightly", "namespace": "team", "labels": {"team": "data"},'
        ' "resourceVersion": "7"},'
        ' "spec": {"schedule": "0 2 * * *", "suspend": false},'
        ' "status": {"active": [], "lastScheduledTime": null, "phase": "Active",'
        ' "nextScheduledTime": "2026-05-05T02:00:00Z",'
        ' "nextDecisionTime": "2026-05-05T02:00:00Z"}}'
    )
    # Rendering copies: the row itself keeps what the view stored.
    assert "resourceVersion" not in row.metadata and "nextScheduledTime" not in row.status


def test_a_status_row_with_nothing_due_renders_a_null_next_time() -> None:
    status = _row(None, {}).as_object()["status"]
    assert status["nextScheduledTime"] is None and status["nextDecisionTime"] is None


def test_forbid_with_a_deadline_behind_a_run_shows_the_tick_and_the_decision_time_apart() -> None:
    """Issue 25: `get` showed the decision time (tick + deadline) as NextScheduledTime, which
    read as a wrong schedule. Given Forbid with a 600 s deadline and a run active, the due
    index holds 02:10 for the 02:00 tick; the object says both, each under its own name."""
    tick = T0 + timedelta(hours=16)
    row = _row(tick + timedelta(minutes=10), {})
    row = StatusRow(
        **{
            **row.__dict__,
            "spec": {**row.spec, "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 600},
            "status": {**row.status, "active": [{"name": "nightly-1"}]},
        }
    )
    status = row.as_object()["status"]
    assert status["nextScheduledTime"] == "2026-05-05T02:00:00Z"
    assert status["nextDecisionTime"] == "2026-05-05T02:10:00Z"
    # Without a run active the tick is decided at the tick.
    idle = StatusRow(**{**row.__dict__, "status": {**row.status, "active": []}})
    assert idle.next_tick == idle.next_due


def test_a_status_row_renders_the_simulate_summary_with_labels_only() -> None:
    """`simulate -o json` prints namespace, name, the labels (none: an empty map) and the
    status; nothing else of the metadata."""
    assert json.dumps(_row(None, None).as_summary()) == (
        '{"namespace": "team", "name": "nightly", "metadata": {"labels": {}},'
        ' "status": {"active": [], "lastScheduledTime": null, "phase": "Active"}}'
    )
    assert _row(None, {"a": "b"}).as_summary()["metadata"] == {"labels": {"a": "b"}}


@pytest.mark.parametrize("store", ["memory:", "sqlite"])
def test_readers_get_the_row_type_the_projection_wrote(store: str, tmp_path: Any) -> None:
    """What the projection writes (status_row of the aggregate) is what statuses() and
    status() give back: one type, equal field by field after the round trip."""
    url = store if store == "memory:" else f"sqlite:///{tmp_path / 'c.db'}"
    engine = bootstrap(url)
    try:
        doc = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": "job", "namespace": "default", "labels": {"a": "b"}},
            "spec": {
                "schedule": "* * * * *",
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
            },
        }
        cron_id, _ = engine.service.apply(parse_manifest(doc), T0)
        engine.service.tick([cron_id], T0 + timedelta(minutes=1))
        engine.projector.catch_up(T0 + timedelta(minutes=1))
        want = status_row(engine.service.load(cron_id))
        assert engine.view.statuses() == [want]
        assert engine.view.status("default", "job") == want
        assert want.next_due == T0 + timedelta(minutes=2)
    finally:
        engine.close()


def test_whether_a_namespace_held_cronworkflows_is_an_index_search(tmp_path: Any) -> None:
    """`-n NS` is checked on every `list` and `history`: answered from the audit's index, not
    by listing the namespaces of every event ever recorded (which grows with the log)."""
    engine = bootstrap(f"sqlite:///{tmp_path / 'n.db'}")
    try:
        doc = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": "job", "namespace": "team-a"},
            "spec": {
                "schedule": "* * * * *",
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
            },
        }
        engine.service.apply(parse_manifest(doc), T0)
        engine.projector.catch_up(T0)
        view = engine.view
        assert view.has_namespace("team-a") and not view.has_namespace("team-b")
        assert view.audit_namespaces() == ["team-a"]
        plan = view.db.fetch("EXPLAIN QUERY PLAN " + view.HAS_NAMESPACE, ("team-a", "team-a"))
        scans = [row[-1] for row in plan if "SCAN" in row[-1]]
        assert scans in ([], ["SCAN CONSTANT ROW"]), plan  # SELECT 1 WHERE EXISTS: no table
    finally:
        engine.close()
