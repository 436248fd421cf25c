"""Issue 25: a WhenFalse skip, or a stop, says what the expression saw. ScheduleSkipped v2
records the `when` expression and the values of the variables it read; Stopped v2 the values
its stop strategy read. Events recorded before (v1) read as having none, and show as before."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from cronsource.domain.expressions import NOW_VARIABLE
from cronsource.domain.expressions.values import cronworkflow_variables
from cronsource.domain.whentemplate import values_read
from cronsource.projections.readmodel import audit_row
from tests.instants import at
from tests.unit.test_aggregate import _run_minutes, create, of_type, service
from tests.unit.test_golden import replay

VARIABLES = {
    **cronworkflow_variables(
        name="nightly",
        namespace="team",
        labels={"app": "billing"},
        annotations={},
        failed=3,
        succeeded=1,
        last_scheduled_time=None,
    ),
    NOW_VARIABLE: datetime(2026, 5, 4, 10, 1, tzinfo=UTC),
}


def test_values_read_names_each_variable_an_expression_reads_with_its_value() -> None:
    # Given a condition over fields, a label and now()
    source = "cronworkflow.failed < 2 && cronworkflow.labels.app == 'x' && now().Hour() > 3"
    # When the values it read are taken
    read = values_read(source, VARIABLES)
    # Then each is there once, in order, as Go's JSON writes it
    assert read == {
        "cronworkflow.failed": "3",
        "cronworkflow.labels.app": '"billing"',
        "now()": '"2026-05-04T10:01:00Z"',
    }


def test_values_read_looks_inside_template_tags_and_never_raises() -> None:
    # Given Argo's template form, and text that does not parse
    # When the values are taken
    # Then the tags' variables are found, and a broken expression reads nothing
    assert values_read("{{= cronworkflow.lastScheduledTime == nil }}", VARIABLES) == {
        "cronworkflow.lastScheduledTime": "null"
    }
    assert values_read("cronworkflow.failed <", VARIABLES) == {}


def test_a_when_false_skip_records_the_expression_and_what_it_read() -> None:
    # Given a CronWorkflow whose `when` is false once it has succeeded
    svc = service()
    cron_id = create(svc, at("10:00:30"), when="cronworkflow.succeeded < 1")
    names = _run_minutes(svc, cron_id, 1)
    svc.run_completed(cron_id, names[0], "Succeeded", at("10:01:20"), at("10:01:20"))
    # When the next tick is decided
    svc.tick([cron_id], at("10:02:00"))
    # Then the skip carries the expression and the value it saw, and history shows them
    (skip,) = of_type(svc, cron_id, "ScheduleSkipped")
    assert skip.reason == "WhenFalse"
    assert skip.expression == "cronworkflow.succeeded < 1"
    assert skip.values == {"cronworkflow.succeeded": "1"}
    detail = audit_row(skip, svc.load(cron_id), 1).detail
    assert detail["expression"] == "cronworkflow.succeeded < 1"
    assert detail["values"] == {"cronworkflow.succeeded": "1"}


def test_a_stop_records_what_its_stop_strategy_read() -> None:
    # Given a stop strategy met after two failed runs
    svc = service()
    cron_id = create(svc, at("10:00:30"), stopStrategy={"expression": "cronworkflow.failed >= 2"})
    names = _run_minutes(svc, cron_id, 2)
    # When the second run fails
    svc.run_completed(cron_id, names[0], "Failed", at("10:02:10"), at("10:02:10"))
    svc.run_completed(cron_id, names[1], "Failed", at("10:02:20"), at("10:02:20"))
    # Then Stopped says the value that met it
    (stopped,) = of_type(svc, cron_id, "Stopped")
    assert stopped.values == {"cronworkflow.failed": "2"}


def test_skips_of_other_reasons_record_no_expression() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), concurrencyPolicy="Forbid")
    _run_minutes(svc, cron_id, 1)
    svc.tick([cron_id], at("10:02:00"))
    (skip,) = of_type(svc, cron_id, "ScheduleSkipped")
    assert (skip.reason, skip.expression, skip.values) == ("ConcurrencyForbid", "", None)
    assert "expression" not in audit_row(skip, svc.load(cron_id), 1).detail


def test_skips_recorded_before_version_2_read_as_having_no_values() -> None:
    # Given a log recorded before the fields existed (v1 ScheduleSkipped events)
    svc = replay("suspend-resume-once")
    cron_id = svc.find("default", "pinger").id
    stored = [json.loads(s.state) for s in svc.recorder.select_events(cron_id)]
    assert any("class_version" not in s or s["class_version"] == 1 for s in stored)
    # When they are read
    skips = of_type(svc, cron_id, "ScheduleSkipped")
    # Then they carry none, and nothing else of them changed
    assert skips and all(s.expression == "" and s.values is None for s in skips)
