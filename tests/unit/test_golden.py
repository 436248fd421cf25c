"""Stored event logs from earlier versions must still replay to the same state.

The files under tests/golden/ were recorded once from scenario runs and are never regenerated:
if a change to an event (a renamed field, a moved class, a new topic) breaks the replay, the
fix is an upcaster and a new `class_version`, not new golden files. `NAME.events.jsonl` is the
stored log, `NAME.status.json` the status it replayed to, `NAME.sequence.json` the events it
replayed to (type and the fields a decision is read from), so an upcaster that keeps the status
but changes what a past event says fails too.
"""

import json
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent

from cronsource.domain.service import CronService, event_type
from cronsource.projections.readmodel import rfc3339, status_of

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
LOGS = sorted(p.name.removesuffix(".events.jsonl") for p in GOLDEN.glob("*.events.jsonl"))


def replay(name: str) -> CronService:
    svc = CronService(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    events = []
    for line in (GOLDEN / f"{name}.events.jsonl").read_text().splitlines():
        d = json.loads(line)
        events.append(
            StoredEvent(
                originator_id=UUID(d["originator_id"]),
                originator_version=d["originator_version"],
                topic=d["topic"],
                state=json.dumps(d["state"]).encode(),
            )
        )
    svc.recorder.insert_events(events)
    return svc


#: The fields of a replayed event that say what was decided; each event has those of its kind.
KEY_FIELDS = (
    "name",
    "namespace",
    "generation",
    "scheduled_time",
    "last_scheduled_time",
    "count",
    "reason",
    "workflow_name",
    "trigger",
    "replaced",
    "phase",
    "workflow_names",
    "by",
    "workflows",
    "threshold",
    "unpaused",
    "behind",
)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def sequence(svc: CronService, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Per aggregate, its events as the current code decodes them from the stored log."""
    return {
        i: [
            {
                "type": event_type(ev),
                "version": ev.originator_version,
                **{k: _plain(getattr(ev, k)) for k in KEY_FIELDS if hasattr(ev, k)},
            }
            for ev in svc.events.get(UUID(i))
        ]
        for i in ids
    }


def test_there_are_golden_logs():
    assert len(LOGS) >= 3


@pytest.mark.parametrize("name", LOGS)
def test_golden_log_replays_to_the_recorded_status(name):
    svc = replay(name)
    expected = json.loads((GOLDEN / f"{name}.status.json").read_text())
    got = {i: status_of(svc.repository.get(UUID(i))) for i in expected}
    assert got == expected


@pytest.mark.parametrize("name", LOGS)
def test_golden_log_replays_to_the_recorded_event_sequence(name):
    svc = replay(name)
    expected = json.loads((GOLDEN / f"{name}.sequence.json").read_text())
    assert expected and all(expected.values())  # the recording is not empty
    assert sequence(svc, list(expected)) == expected


@pytest.mark.parametrize("name", LOGS)
def test_golden_topics_are_explicit_and_versioned(name):
    for line in (GOLDEN / f"{name}.events.jsonl").read_text().splitlines():
        topic = json.loads(line)["topic"]
        assert topic.startswith("cronsource:") and topic.endswith("/v1"), topic
