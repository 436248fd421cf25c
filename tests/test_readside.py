"""The read side (adapters/readside/): one status row type with the shapes readers print, and
reads on PostgreSQL that do not wait for each other."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from adapters.engine import build_engine
from adapters.readside.model import ReadModel
from adapters.store import StoreConfig
from domain.manifest import parse_manifest
from projections.readmodel import StatusRow, status_row

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
    as a string, after the stored metadata; nextScheduledTime comes last in the status."""
    row = _row(T0 + timedelta(hours=16), {"team": "data"})
    assert json.dumps(row.as_object()) == (
        '{"apiVersion": "argoproj.io/v1alpha1", "kind": "CronWorkflow",'
        ' "metadata": {"name": "nightly", "namespace": "team", "labels": {"team": "data"},'
        ' "resourceVersion": "7"},'
        ' "spec": {"schedule": "0 2 * * *", "suspend": false},'
        ' "status": {"active": [], "lastScheduledTime": null, "phase": "Active",'
        ' "nextScheduledTime": "2026-05-05T02:00:00Z"}}'
    )
    # Rendering copies: the row itself keeps what the view stored.
    assert "resourceVersion" not in row.metadata and "nextScheduledTime" not in row.status


def test_a_status_row_with_nothing_due_renders_a_null_next_time() -> None:
    assert _row(None, {}).as_object()["status"]["nextScheduledTime"] is None


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
    engine = build_engine(url)
    try:
        doc = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": "job", "namespace": "default", "labels": {"a": "b"}},
            "spec": {"schedule": "* * * * *", "workflowSpec": {"entrypoint": "main"}},
        }
        cron_id, _ = engine.service.apply(parse_manifest(doc), T0)
        engine.service.tick([cron_id], T0 + timedelta(minutes=1))
        engine.catch_up(T0 + timedelta(minutes=1))
        want = status_row(engine.service.load(cron_id))
        assert engine.view.statuses() == [want]
        assert engine.view.status("default", "job") == want
        assert want.next_due == T0 + timedelta(minutes=2)
    finally:
        engine.close()


#: An advisory lock key of this test only (adapters/shards.py uses class ids of its own).
HOLD_KEY = 7_326_001


def _waiting_on_advisory_lock(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
@pytest.mark.timeout(60)
def test_a_read_on_postgres_completes_while_another_is_still_in_the_database(
    pg_url: str,
) -> None:
    """One read is held inside PostgreSQL (it waits for an advisory lock this test holds);
    another read from a second thread must complete meanwhile. With one lock or one
    connection serialising reads, the second read would wait for the first."""
    view = StoreConfig.parse(pg_url).read_model()
    assert isinstance(view, ReadModel)
    view.create_tables()
    held_done = threading.Event()
    other_done = threading.Event()
    errors: list[BaseException] = []

    def held_read() -> None:
        try:
            view.db.fetch("SELECT pg_advisory_xact_lock(?)", (HOLD_KEY,))
        except BaseException as e:  # reported by the assertions below
            errors.append(e)
        held_done.set()

    def other_read() -> None:
        try:
            assert view.statuses() == []
            assert view.max_tracking_id("CronService") is None
        except BaseException as e:
            errors.append(e)
        other_done.set()

    try:
        with psycopg.connect(pg_url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (HOLD_KEY,))
            first = threading.Thread(target=held_read, daemon=True)
            first.start()
            deadline = time.monotonic() + 20
            while _waiting_on_advisory_lock(holder) == 0:
                assert time.monotonic() < deadline, "the first read never reached the database"
                time.sleep(0.02)
            second = threading.Thread(target=other_read, daemon=True)
            second.start()
            completed_meanwhile = other_done.wait(15)
            still_held = not held_done.is_set()
            holder.execute("SELECT pg_advisory_unlock(%s)", (HOLD_KEY,))
        assert held_done.wait(15) and other_done.wait(15), "a read never completed"
        assert not errors, errors
        assert still_held, "the first read finished before the lock was released"
        assert completed_meanwhile, "a read waited for another read that was still running"
    finally:
        view.close()


def test_whether_a_namespace_held_cronworkflows_is_an_index_search(tmp_path: Any) -> None:
    """`-n NS` is checked on every `list` and `history`: answered from the audit's index, not
    by listing the namespaces of every event ever recorded (which grows with the log)."""
    engine = build_engine(f"sqlite:///{tmp_path / 'n.db'}")
    try:
        doc = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": "job", "namespace": "team-a"},
            "spec": {"schedule": "* * * * *", "workflowSpec": {"entrypoint": "main"}},
        }
        engine.service.apply(parse_manifest(doc), T0)
        engine.catch_up(T0)
        view = engine.view
        assert view.has_namespace("team-a") and not view.has_namespace("team-b")
        assert view.audit_namespaces() == ["team-a"]
        plan = view.db.fetch("EXPLAIN QUERY PLAN " + view.HAS_NAMESPACE, ("team-a",))
        assert [row[-1] for row in plan if "SCAN" in row[-1]] == [], plan
    finally:
        engine.close()
