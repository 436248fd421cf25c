"""`why` about a time before the schedule last changed: judged by the schedule then in force
(adapters/application/audit.py `_as_of`). Judged by today's, 00:15 under a `*/30` schedule
since made hourly said NotATick with the next tick at 01:00, though 00:30 ran."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.bootstrap import bootstrap
from cronsource.domain.manifest import parse_manifest
from tests.http_helpers import manifest
from tests.instants import T0


def test_why_reads_a_time_before_a_schedule_change_by_the_schedule_then(tmp_path: Path) -> None:
    engine = bootstrap(f"sqlite:///{tmp_path / 'c.db'}", create_tables=True)
    try:
        svc = engine.service
        cron_id, _ = svc.apply(parse_manifest(manifest("etl", "*/30 * * * *")), T0)
        for k in range(1, 5):  # 00:30 .. 02:00 fire
            svc.tick([cron_id], T0 + timedelta(minutes=30 * k))
        changed = T0 + timedelta(hours=2, minutes=10)
        svc.apply(parse_manifest(manifest("etl", "0 * * * *")), changed)
        engine.projector.catch_up(changed)
        ops = Operations(engine)

        between = ops.why("default", "etl", T0 + timedelta(minutes=15))
        assert between["outcome"] == "NotATick"
        assert between["nextTick"].startswith(
            (T0 + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M")
        )
        assert "in force then" in between["explanation"]
        # A tick of the old schedule that ran is still Fired (its decision is recorded).
        ran = ops.why("default", "etl", T0 + timedelta(minutes=30))
        assert ran["outcome"] == "Fired"
        # After the change, today's schedule judges.
        after = ops.why("default", "etl", changed + timedelta(minutes=20))
        assert after["outcome"] == "NotATick" and "in force then" not in after["explanation"]
        # At the creation itself: NotScheduled, naming the creation, not the later change.
        created = ops.why("default", "etl", T0)
        assert created["outcome"] == "NotScheduled"
        assert created["explanation"].startswith(
            f"at {T0:%Y-%m-%dT%H:%M:%S}Z, when the CronWorkflow was created:"
        )
        # Years before it existed: named as before its creation, not as "at or before".
        before = ops.why("default", "etl", T0 - timedelta(days=3 * 365))
        assert before["outcome"] == "NotScheduled"
        assert before["explanation"].startswith(
            f"before {T0:%Y-%m-%dT%H:%M:%S}Z, when the CronWorkflow was created:"
        )
    finally:
        engine.close()


def test_why_at_a_time_inside_a_range_of_skipped_ticks_that_is_none_of_them(
    tmp_path: Path,
) -> None:
    """A suspension's ticks are one ScheduleSkipped range: a time inside it that is not a tick
    (01:05 of a `*/10` schedule) has no tick to skip, as beside a fire: NotATick, not
    Skipped. Its ticks, first, inner and last, are Skipped."""
    engine = bootstrap(f"sqlite:///{tmp_path / 'c.db'}", create_tables=True)
    try:
        svc = engine.service
        cron_id, _ = svc.apply(parse_manifest(manifest("etl", "*/10 * * * *")), T0)
        svc.suspend(cron_id, T0 + timedelta(minutes=1))
        resumed = T0 + timedelta(hours=1, minutes=1)
        svc.resume(cron_id, resumed)
        svc.tick([cron_id], resumed)  # 10:10..11:00 skipped (Suspended), one range
        engine.projector.catch_up(resumed)
        ops = Operations(engine)
        between = ops.why("default", "etl", T0 + timedelta(minutes=25))
        assert (between["outcome"], between["decisions"]) == ("NotATick", [])
        assert between["nextTick"].startswith(
            (T0 + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M")
        )
        for minutes in (10, 30, 60):
            tick = ops.why("default", "etl", T0 + timedelta(minutes=minutes))
            assert (tick["outcome"], tick["reason"]) == ("Skipped", "Suspended"), minutes
    finally:
        engine.close()
