"""Issue 25 item 4 through the installed CLI: `next` marks the tick DST moved out of the
spring-forward gap (table note and `dst` in -o json), `why` at 02:30 that day answers for that
tick instead of NotATick, and `get` shows the next tick and the next decision time under two
names (table and -o json). Real clock: the next New York spring-forward is within `next`'s
reach (at most 1000 ticks of a daily schedule)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.integration.test_cli_first_hour import cs

pytestmark = pytest.mark.timeout(120)

MANIFEST = """\
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: nightly
spec:
  schedules: ["30 2 * * *"]
  timezone: America/New_York
  workflowSpec:
    entrypoint: main
    templates:
      - name: main
        container: {image: busybox}
"""


def _spring_forward_day() -> str:
    """The next day New York skips 02:00-02:59, from today's date (found, not hard-coded)."""
    zone = ZoneInfo("America/New_York")
    today = datetime.now(UTC).date()
    for n in range(400):
        day = today + timedelta(days=n)
        wall = datetime(day.year, day.month, day.day, 2, 30, tzinfo=zone)
        if wall.astimezone(UTC).astimezone(zone).hour != 2:
            return day.isoformat()
    raise AssertionError("no spring-forward within 400 days")


def test_next_why_and_get_name_dst_and_the_two_next_times(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    f = tmp_path / "nightly.yaml"
    f.write_text(MANIFEST)
    assert cs("apply", "-f", str(f), store=store).returncode == 0
    day = _spring_forward_day()

    table = cs("next", "nightly", "-c", "400", store=store)
    assert table.returncode == 0, table.stderr
    (line,) = [ln for ln in table.stdout.splitlines() if ln.startswith(day)]
    assert line.startswith(f"{day}T03:00:00-04:00 (02:30 does not exist on {day})"), line

    items = json.loads(cs("next", "nightly", "-c", "400", "-o", "json", store=store).stdout)
    moved = [i for i in items if "dst" in i]
    assert [(i["local"], i["dst"]["kind"], i["dst"]["wall"]) for i in moved] == [
        (f"{day}T03:00:00-04:00", "gap", "02:30")
    ]

    why = cs("why", "nightly", "--at", f"{day}T02:30:00-05:00", store=store)
    assert why.returncode == 0, why.stderr
    assert "NotATick" not in why.stdout
    assert f"03:00 EDT (02:30 does not exist on {day})" in why.stdout
    d = json.loads(
        cs("why", "nightly", "--at", f"{day}T02:30:00-05:00", "-o", "json", store=store).stdout
    )
    assert d["at"] == moved[0]["utc"] and d["dst"]["kind"] == "gap"

    got = cs("get", "nightly", store=store).stdout
    assert "NextScheduledTime:" in got and "NextDecisionTime:" in got
    status = json.loads(cs("get", "nightly", "-o", "json", store=store).stdout)["status"]
    assert status["nextScheduledTime"] == items[0]["utc"]
    assert status["nextDecisionTime"] == items[0]["utc"]  # nothing runs: decided at the tick
