"""Stored event logs from earlier versions must still replay to the same state.

The files under tests/golden/ were recorded once from scenario runs and are never regenerated:
if a change to an event (a renamed field, a moved class, a new topic) breaks the replay, the
fix is an upcaster and a new `class_version`, not new golden files.
"""

import json
from pathlib import Path
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent

from domain.service import CronService
from projections.readmodel import status_of

GOLDEN = Path(__file__).parent / "golden"
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


def test_there_are_golden_logs():
    assert len(LOGS) >= 3


@pytest.mark.parametrize("name", LOGS)
def test_golden_log_replays_to_the_recorded_status(name):
    svc = replay(name)
    expected = json.loads((GOLDEN / f"{name}.status.json").read_text())
    got = {i: status_of(svc.repository.get(UUID(i))) for i in expected}
    assert got == expected


@pytest.mark.parametrize("name", LOGS)
def test_golden_topics_are_explicit_and_versioned(name):
    for line in (GOLDEN / f"{name}.events.jsonl").read_text().splitlines():
        topic = json.loads(line)["topic"]
        assert topic.startswith("cronsource:") and topic.endswith("/v1"), topic
