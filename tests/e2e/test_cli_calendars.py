"""Calendars through the installed CLI (issue 23 item 2): `apply` reads a ConfigMap labelled
`cronsource.io/calendar: "true"` as a calendar (applied before the CronWorkflows of the same
files, each change a version); bad input is one line naming the field and nothing is stored
(an `exclude-dates` entry like 2026-02-30, a calendar of 100,000 dates, a rule that matches
no date, a CronWorkflow naming an unknown calendar); `next` marks the excluded ticks with
the calendar and its version, and `why` names them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_cli_first_hour import cs, one_error_line, stored

pytestmark = pytest.mark.timeout(180)


def cronworkflow(annotations: str) -> str:
    return f"""\
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: nightly
  annotations:
{annotations}
spec:
  schedule: "0 9 * * *"
  timezone: America/New_York
  workflowSpec:
    entrypoint: main
    templates:
      - name: main
        container: {{image: busybox}}
"""


def calendar(dates: str, rrule: str = "") -> str:
    rule = f"\n  rrule: {json.dumps(rrule)}" if rrule else ""
    return f"""\
apiVersion: v1
kind: ConfigMap
metadata:
  name: holidays
  labels:
    cronsource.io/calendar: "true"
data:
  dates: {json.dumps(dates)}{rule}
"""


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            cronworkflow('    cronsource.io/exclude-dates: "2026-12-25,2026-02-30"'),
            "metadata.annotations: cronsource.io/exclude-dates: '2026-02-30' is not a date",
            id="exclude-dates-2026-02-30",
        ),
        pytest.param(
            calendar(",".join(["2026-12-25"] * 100_000)),
            "data.dates: 100000 entries, more than the 10000 a calendar may list",
            id="calendar-of-100000-dates",
        ),
        pytest.param(
            calendar("2026-12-25", "RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30"),
            "data.rrule: the rule matches no date",
            id="rrule-matching-nothing",
        ),
        pytest.param(
            cronworkflow("    cronsource.io/calendars: maintenance"),
            "cronsource.io/calendars: calendar 'maintenance' not found in namespace default",
            id="unknown-calendar",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_field_and_nothing_is_stored(
    tmp_path: Path, files: str, expected: str
) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    f = tmp_path / "in.yaml"
    f.write_text(files)
    line = one_error_line(cs("apply", "-f", str(f), store=store))
    assert expected in line, line
    assert stored(store) == []
    if (tmp_path / "cs.db").exists():  # a read does not make a store: none made, no calendar
        assert json.loads(cs("calendars", "-o", "json", store=store).stdout) == []


def test_a_bad_calendar_beside_a_good_cronworkflow_stores_neither(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    f = tmp_path / "in.yaml"
    f.write_text(
        calendar("2026-12-25,2026-13-01")
        + "---\n"
        + cronworkflow("    cronsource.io/calendars: holidays")
    )
    r = cs("apply", "-f", str(f), store=store)
    assert r.returncode == 1
    first, second = r.stderr.splitlines()
    assert first.endswith(
        "in.yaml#0: data.dates: '2026-13-01' is not a date (month must be in 1..12)"
    )
    assert second.startswith("error: nothing applied")
    assert stored(store) == []


def test_apply_next_and_why_show_the_calendar_and_its_version(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    f = tmp_path / "in.yaml"
    f.write_text(
        cronworkflow(
            '    cronsource.io/calendars: holidays\n    cronsource.io/exclude-dates: "2026-12-28"'
        )
        + "---\n"
        + calendar("2026-12-25", "RRULE:FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1")
    )
    applied = cs("apply", "-f", str(f), store=store)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "calendar/holidays created (version 1)",
        "cronworkflow.argoproj.io/nightly created",
    ]
    (tmp_path / "cal.yaml").write_text(
        calendar("2026-12-24..2026-12-25", "RRULE:FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1")
    )
    again = cs("apply", "-f", str(tmp_path / "cal.yaml"), store=store)
    assert again.stdout.strip() == "calendar/holidays updated (version 2)", again.stderr
    [listed_calendar] = json.loads(cs("calendars", "-o", "json", store=store).stdout)
    assert (listed_calendar["name"], listed_calendar["version"]) == ("holidays", 2)
    # `-o name` as kubectl names a ConfigMap (it printed nothing).
    assert cs("calendars", "-o", "name", store=store).stdout.split() == ["configmap/holidays"]

    # `next` from well before: the ticks of 12-24, 12-25, 12-28 and 01-01 are marked.
    listed = cs("next", "nightly", "-c", "60", "-o", "json", store=store)
    assert listed.returncode == 0, listed.stderr
    excluded = {
        i["local"][:10]: (i["excluded"]["calendar"], i["excluded"]["version"])
        for i in json.loads(listed.stdout)
        if "excluded" in i
    }
    for day, source in {
        "2026-12-24": ("holidays", "2"),
        "2026-12-25": ("holidays", "2"),
        "2026-12-28": ("cronsource.io/exclude-dates", "1"),
        "2027-01-01": ("holidays", "2"),
    }.items():
        if day in {i["local"][:10] for i in json.loads(listed.stdout)}:
            assert excluded.pop(day) == source
    assert excluded == {}
    table = cs("next", "nightly", "-c", "60", store=store).stdout
    assert "EXCLUDED" in table.splitlines()[0]

    why = cs("why", "nightly", "--at", "2026-12-25T14:00:00Z", store=store)
    assert why.returncode == 0, why.stderr
    assert "excluded by calendar holidays (version 2): 2026-12-25" in why.stdout


def test_delete_f_deletes_the_calendar_a_file_applies_and_says_who_names_it(
    tmp_path: Path,
) -> None:
    """A calendar came in by `apply -f` and could be deleted only over HTTP: `delete -f` is
    kubectl's way back. A CronWorkflow that still names it is warned of (its ticks skip as
    SpecError from now on); a second delete is NotFound, exit 1, nothing changed."""
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    both, cal = tmp_path / "both.yaml", tmp_path / "cal.yaml"
    both.write_text(
        calendar("2026-12-25") + "---\n" + cronworkflow("    cronsource.io/calendars: holidays")
    )
    cal.write_text(calendar("2026-12-25"))
    assert cs("apply", "-f", str(both), store=store).returncode == 0

    deleted = cs("delete", "-f", str(cal), store=store)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "calendar/holidays deleted (version 2)"
    assert deleted.stderr.strip() == (
        "warning: calendar holidays is named by 1 CronWorkflow(s) (nightly): their ticks are"
        " skipped as SpecError until it exists again or the annotation goes"
    )
    [listed] = json.loads(cs("calendars", "-o", "json", store=store).stdout)
    assert (listed["version"], listed["deleted"]) == (2, True)
    assert "calendar default/holidays not found" in one_error_line(
        cs("delete", "-f", str(cal), store=store)
    )

    # The whole file: the CronWorkflow first, so no warning; -o name as `calendars -o name`.
    named = cs("apply", "-f", str(both), "-o", "name", store=store)
    assert named.stdout.split() == ["configmap/holidays", "cronworkflow.argoproj.io/nightly"]
    again = cs("delete", "-f", str(both), "-o", "name", store=store)
    assert (again.returncode, again.stderr) == (0, "")
    assert again.stdout.split() == ["cronworkflow.argoproj.io/nightly", "configmap/holidays"]
    assert stored(store) == []
    assert "not several of them" in one_error_line(
        cs("delete", "nightly", "-f", str(both), store=store)
    )
