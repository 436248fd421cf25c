"""The commit deadline of a batch of decisions (issue 27, item 3): the earliest instant by which
its fires must be committed, or the ticks are decided again. A commit held up past it on real
stores, by a real lock and the real clock: tests/integration/test_commit_deadline.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import commit_deadline
from tests.http_helpers import manifest as manifest_document


def manifest(name: str) -> Any:
    return parse_manifest(manifest_document(name, "@every 1s"))


def test_the_commit_deadline_is_the_earliest_fire_within_its_rule() -> None:
    """On time: tick + tolerance; catch-up: tick + startingDeadlineSeconds; skips: none."""
    svc_env = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
    from cronsource.domain.service import CronService

    svc = CronService(env=svc_env)
    t0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
    cron_id, _ = svc.apply(manifest("d"), t0)
    [agg] = svc.decide_batch([cron_id], t0 + timedelta(seconds=3, milliseconds=100))
    # ticks 1 s, 2 s, 3 s: the latest fires on time (tolerance 30 s), the rest are skipped
    assert commit_deadline([agg], timedelta(seconds=30)) == t0 + timedelta(seconds=33)
    # Decided 0.1 s after the latest tick with a tolerance of 50 ms: every tick is missed,
    # and skips have no deadline.
    svc.late_tolerance = timedelta(milliseconds=50)
    [idle] = svc.decide_batch([cron_id], t0 + timedelta(seconds=3, milliseconds=100))
    assert commit_deadline([idle], svc.late_tolerance) is None
