"""Hashed `H` schedules resolve exactly as Argo's PR #16604 resolves them.

The tables below are the PR's own tests, as data: argoproj/argo-workflows pull request 16604
("feat(cron): support hash-based `H` schedules", documented as "v4.2 and after"), head commit
9c72a97791d5b050e3b9077b2523204845bda39b, files util/cronhash/cronhash_test.go (TestExpand,
TestExpandIsStable, TestExpandStaysInRange, TestExpandMalformed, TestExpandAll),
pkg/apis/workflow/v1alpha1/cron_workflow_types_test.go (TestCronWorkflow_GetSchedulesResolvesHash,
TestCronWorkflow_SetResolvedSchedules) and workflow/validate/validate_test.go
(TestCronWorkflowHashedSchedule). Every row uses the PR's CronWorkflow `argo/my-cron-wf`
unless it says otherwise. Where the PR's Go test checks that the cron parser accepts an
expansion, these check that ours compiles it and that it fires.

tests/integration/test_argo_cronhash_differential.py compares the two implementations on random
input.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronsource.domain.cronhash import MalformedHash, expand, fnv32a, go_quote, resolved_schedules
from cronsource.domain.manifest import ManifestError, parse_manifest
from cronsource.domain.schedule import (
    ScheduleError,
    compile_schedule,
    resolve_schedules,
    validate_expression,
    validate_resolved,
)

NAMESPACE, NAME = "argo", "my-cron-wf"
T0 = datetime(2026, 5, 4, 10, 17, tzinfo=UTC)

#: TestExpand, row for row (schedule, expansion for argo/my-cron-wf).
PR_EXPAND_TABLE = [
    # schedules without a `H` are untouched, whitespace and all
    ("* * * * *", "* * * * *"),
    ("0 0 * * MON-FRI", "0 0 * * MON-FRI"),
    ("@daily", "@daily"),
    ("@every 1h", "@every 1h"),
    ("CRON_TZ=Asia/Tokyo 0 9 * * *", "CRON_TZ=Asia/Tokyo 0 9 * * *"),
    ("0  0 * * *", "0  0 * * *"),
    # `THU` contains a `H`, but not as a token
    ("0 0 * * THU", "0 0 * * THU"),
    # a single `H` resolves to one value of the field's range
    ("H * * * *", "9 * * * *"),
    ("H H * * *", "9 6 * * *"),
    ("H H H H H", "9 6 20 5 3"),
    # `H` is hashed per position, so `H,H` does not resolve to the same value twice
    ("H,H * * * *", "9,30 * * * *"),
    # a step keeps the interval and only offsets the first run
    ("H/15 * * * *", "9-59/15 * * * *"),
    ("H/90 * * * *", "9-59/90 * * * *"),
    # an explicit range limits which values `H` resolves to
    ("H(20-30) * * * *", "26 * * * *"),
    ("H(0-4)/2 * * * *", "1-4/2 * * * *"),
    ("0 H(9-17) * * *", "0 9 * * *"),
    # an explicit range may go beyond the range a bare `H` resolves within, up to cron's own
    ("0 0 H(29-31) * *", "0 0 31 * *"),
    # `H` mixes with regular values
    ("H,30 H(9-17) * * MON-FRI", "9,30 9 * * MON-FRI"),
    # the timezone prefix is not a field
    ("CRON_TZ=Asia/Tokyo H H * * *", "CRON_TZ=Asia/Tokyo 9 6 * * *"),
    ("TZ=Asia/Tokyo H H * * *", "TZ=Asia/Tokyo 9 6 * * *"),
    # expressions we cannot parse are left to the cron parser
    ("* * * *", "* * * *"),
    ("", ""),
]

#: TestExpandMalformed (schedule, what the error contains), and the `H(0-90)` of issue 23.
PR_MALFORMED_TABLE = [
    ("H(0-30 * * * *", '"H(0-30" is malformed: missing `)`'),
    ("H(30-10) * * * *", '"H(30-10)" is malformed: range "30-10" is inverted'),
    (
        "H(0-90) * * * *",
        '"H(0-90)" is malformed: range "0-90" is outside of 0-59, the range of the minute field',
    ),
    (
        "* H(0-30) * * *",
        '"H(0-30)" is malformed: range "0-30" is outside of 0-23, the range of the hour field',
    ),
    (
        "* * H(0-31) * *",
        '"H(0-31)" is malformed: range "0-31" is outside of 1-31,'
        " the range of the day of month field",
    ),
    # 7 is not a second Sunday here, the cron parser this feeds only accepts 0-6
    (
        "* * * * H(0-7)",
        '"H(0-7)" is malformed: range "0-7" is outside of 0-6, the range of the day of week field',
    ),
    ("H(a-b) * * * *", '"H(a-b)" is malformed: expected a range like `1-5`, got "a-b"'),
    ("H/0 * * * *", '"H/0" is malformed: step must be greater than 0'),
    ("H15 * * * *", '"H15" is malformed: expected '),
]

#: The PR's documentation (docs/cron-workflows.md, "Hashed Schedules") and its feature note:
#: the example expansions it shows for argo/my-cron-wf.
PR_DOCS_TABLE = [
    ("H * * * *", "9 * * * *"),
    ("H/15 * * * *", "9-59/15 * * * *"),
    ("0 H(9-17) * * *", "0 9 * * *"),
    ("H(0-29)/10 * * * *", "9-29/10 * * * *"),
    ("H H * * *", "9 6 * * *"),
]


def manifest(schedules: list[str], namespace: str = NAMESPACE, name: str = NAME) -> Any:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedules": schedules,
            "workflowSpec": {
                "entrypoint": "whalesay",
                "templates": [{"name": "whalesay", "container": {"image": "docker/whalesay"}}],
            },
        },
    }


def fires(expression: str) -> datetime:
    """The first tick of an expansion after T0: it compiles, and it fires."""
    anchor = T0 if expression.startswith("@every") else None
    return compile_schedule([expression], anchor=anchor).next_after(T0)


# --------------------------------------------------------------------------- the PR's tables


@pytest.mark.parametrize(("schedule", "expected"), PR_EXPAND_TABLE + PR_DOCS_TABLE)
def test_expands_as_argos_pr(schedule: str, expected: str) -> None:
    assert expand(schedule, NAMESPACE, NAME) == expected


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [row for row in PR_EXPAND_TABLE + PR_DOCS_TABLE if len(row[0].split()) >= 5],
)
def test_every_expansion_of_the_table_compiles_and_fires(schedule: str, expected: str) -> None:
    assert fires(expected) > T0


def test_expansion_is_stable_and_depends_on_namespace_and_name() -> None:
    """TestExpandIsStable."""
    first = expand("H H(0-7) * * *", "argo", "my-cron-wf")
    assert expand("H H(0-7) * * *", "argo", "my-cron-wf") == first
    assert expand("H H(0-7) * * *", "argo", "other-cron-wf") != first
    assert expand("H H(0-7) * * *", "other", "my-cron-wf") != first


@pytest.mark.parametrize("i", range(200))
def test_expansions_stay_in_range_and_fire_whatever_the_name(i: int) -> None:
    """TestExpandStaysInRange: its 200 names and 3 schedules; the Go test parses each
    expansion with robfig/cron and checks that it has a next run, we compile and fire it."""
    name = f"my-cron-wf-{i}"
    for schedule in (
        "H H H H H",
        "H/7 H/5 H/3 H/2 H/4",
        "H(10-20) H(1-5) H(2-6) H(3-9) H(1-4)",
    ):
        expanded = expand(schedule, "argo", name)
        assert "H" not in expanded
        validate_expression(expanded)
        assert fires(expanded) > T0


@pytest.mark.parametrize(("schedule", "message"), PR_MALFORMED_TABLE)
def test_malformed_items_are_refused_with_argos_message(schedule: str, message: str) -> None:
    with pytest.raises(MalformedHash) as direct:
        expand(schedule, NAMESPACE, NAME)
    assert message in str(direct.value)
    # The same words at admission, whatever the CronWorkflow is called (the hash is not
    # involved in any of these errors).
    with pytest.raises(ScheduleError) as admitted:
        validate_expression(schedule)
    assert message in str(admitted.value)


def test_expand_all_resolves_each_schedule_and_fails_on_any_malformed_one() -> None:
    """TestExpandAll."""
    assert resolve_schedules(["H * * * *", "0 0 * * *"], NAMESPACE, NAME) == (
        "9 * * * *",
        "0 0 * * *",
    )
    with pytest.raises(ScheduleError, match="step must be greater than 0"):
        resolve_schedules(["0 0 * * *", "H/0 * * * *"], NAMESPACE, NAME)


def test_get_schedules_resolves_hash_without_rewriting_the_spec() -> None:
    """TestCronWorkflow_GetSchedulesResolvesHash: the compiled schedule is the expansion (with
    spec.timezone applied to it), the spec keeps its `H`."""
    m = parse_manifest(manifest(["H H * * *", "0 * * * *"]))
    assert m.spec.schedules == ["H H * * *", "0 * * * *"]
    assert resolve_schedules(m.spec.all_schedules, NAMESPACE, NAME) == ("9 6 * * *", "0 * * * *")
    la = compile_schedule(["9 6 * * *"], "America/Los_Angeles")
    # T0 is 03:17 in Los Angeles (PDT, UTC-7): next 06:09 there is 13:09 UTC that day.
    assert la.next_after(T0) == datetime(2026, 5, 4, 13, 9, tzinfo=UTC)
    assert resolve_schedules(m.spec.all_schedules, NAMESPACE, "other-cron-wf") != (
        "9 6 * * *",
        "0 * * * *",
    )


def test_resolved_schedules_lists_only_the_hashed_ones_keyed_by_the_spec() -> None:
    """TestCronWorkflow_SetResolvedSchedules: what `status.resolvedSchedules` holds."""
    assert resolved_schedules(("H H * * *",), NAMESPACE, NAME) == {"H H * * *": "9 6 * * *"}
    assert resolved_schedules(("H,30 * * * *", "0 9 * * *"), NAMESPACE, NAME) == {
        "H,30 * * * *": "9,30 * * * *"
    }
    assert resolved_schedules(("0 9 * * *",), NAMESPACE, NAME) == {}
    # A malformed schedule is left out, as Argo leaves it to the cron parser.
    assert resolved_schedules(("H(30-10) * * * *",), NAMESPACE, NAME) == {}


def test_admission_takes_the_prs_valid_schedules_and_refuses_its_invalid_ones() -> None:
    """TestCronWorkflowHashedSchedule (workflow/validate): namespace `default`."""
    parse_manifest(
        manifest(["H H * * *", "H(0-29)/10 H(9-17) * * MON-FRI"], "default", "my-cron-wf")
    )
    with pytest.raises(ManifestError) as inverted:
        parse_manifest(manifest(["H(30-10) * * * *"], "default", "my-cron-wf"))
    assert 'spec.schedules[0]: "H(30-10)" is malformed: range "30-10" is inverted' in str(
        inverted.value
    )
    with pytest.raises(ManifestError) as outside:
        parse_manifest(manifest(["* H(0-30) * * *"], "default", "my-cron-wf"))
    assert 'range "0-30" is outside of 0-23, the range of the hour field' in str(outside.value)


# --------------------------------------------------------------------------- beyond the tables


def test_h_0_90_in_minutes_is_one_line_naming_the_field_and_value() -> None:
    """Issue 23, "Bad input": `H(0-90)`."""
    with pytest.raises(ManifestError) as e:
        parse_manifest(manifest(["0 * * * *", "H(0-90) * * * *"]))
    assert str(e.value) == (
        'spec.schedules[1]: "H(0-90)" is malformed: range "0-90" is outside of 0-59, the range'
        " of the minute field (value: 'H(0-90) * * * *')"
    )
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        pytest.param("@daily H", "H (hash) cannot be used with @daily", id="descriptor"),
        pytest.param("@every H", "H (hash) cannot be used with @every", id="@every"),
        pytest.param("@every H/5", "H (hash) cannot be used with @every", id="@every step"),
        pytest.param("H H * * * *", "got 6", id="six fields are not resolved"),
        pytest.param("H H * *", "got 4", id="four fields are not resolved"),
        pytest.param("h * * * *", "unsupported cron syntax 'H'", id="lower case"),
    ],
)
def test_h_outside_a_five_field_expression_is_refused(schedule: str, message: str) -> None:
    assert expand(schedule, NAMESPACE, NAME) == schedule  # left to the parser, as in Argo
    with pytest.raises(ManifestError, match=re.escape(message)):
        parse_manifest(manifest([schedule]))


def test_a_hashed_schedule_that_never_fires_for_this_name_is_refused_naming_the_resolution() -> (
    None
):
    """`0 0 31 H *` fires once a year for some names and never for others: whether admission
    takes it depends on the name, and the refusal says what `H` resolved to."""
    outcomes = {}
    for name in ("a", "b", "c", "d", "e", "f"):
        month = int(expand("0 0 31 H *", "default", name).split()[3])
        try:
            validate_resolved("0 0 31 H *", "default", name)
            outcomes[name] = "admitted"
        except ScheduleError as e:
            assert f"for default/{name} it resolves to '0 0 31 {month} *'" in str(e)
            outcomes[name] = "refused"
        assert (outcomes[name] == "admitted") == (month in (1, 3, 5, 7, 8, 10, 12))
    assert set(outcomes.values()) == {"admitted", "refused"}


def test_the_legacy_schedule_field_is_resolved_and_checked_too() -> None:
    doc = manifest(["0 * * * *"])
    doc["spec"]["schedule"] = "H(0-90) * * * *"
    with pytest.raises(ManifestError, match=r"spec\.schedule: .*outside of 0-59"):
        parse_manifest(doc)


def test_an_unresolved_h_is_never_compiled_as_something_else() -> None:
    with pytest.raises(ScheduleError, match="is not resolved"):
        compile_schedule(["H * * * *"])


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        pytest.param("H/+5 * * * *", "4-59/5 * * * *", id="Go's Atoi takes a plus sign"),
        pytest.param("H/007 * * * *", "6-59/7 * * * *", id="and leading zeros"),
        pytest.param("H(+1-5) * * * *", "5 * * * *", id="in ranges too"),
        pytest.param("H(5-5) * * * *", "5 * * * *", id="a range of one"),
        # The `H` is item 1 here, so it takes `H,H`'s second value, not `H`'s 9.
        pytest.param("30,H * * * *", "30,30 * * * *", id="the item index counts every item"),
        pytest.param("\tH  H\n* * *", "9 6 * * *", id="fields split on any blank"),
        pytest.param(" CRON_TZ=UTC\tH * * * *", " CRON_TZ=UTC\t9 * * * *", id="prefix kept"),
    ],
)
def test_go_number_and_blank_rules(schedule: str, expected: str) -> None:
    assert expand(schedule, NAMESPACE, NAME) == expected


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        pytest.param("H/5_0 * * * *", '"H/5_0" is malformed: expected `H`', id="underscore"),
        pytest.param(
            "H/99999999999999999999 * * * *", "is malformed: expected `H`", id="beyond int64"
        ),
        pytest.param("H/-1 * * * *", '"H/-1" is malformed: step must be', id="negative step"),
        pytest.param("H(-1-5) * * * *", 'got "-1-5"', id="a sign is not a range"),
        pytest.param("H(1--5) * * * *", 'range "1--5" is inverted', id="negative high end"),
        pytest.param("H(1-5)x * * * *", '"H(1-5)x" is malformed: expected', id="text after )"),
        pytest.param("H\x1c * * * *", '"H\\x1c" is malformed', id="Go keeps U+001C in a field"),
        pytest.param("Hé * * * *", '"Hé" is malformed', id="printable kept as is"),
    ],
)
def test_go_rules_for_malformed_items(schedule: str, message: str) -> None:
    with pytest.raises(MalformedHash) as e:
        expand(schedule, NAMESPACE, NAME)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", 0x811C9DC5),
        (b"a", 0xE40C292C),
        (b"foobar", 0xBF9CF968),
    ],
)
def test_fnv32a_matches_the_published_test_vectors(data: bytes, expected: int) -> None:
    """The FNV-1a 32-bit vectors of the reference test suite (Fowler, Noll and Vo)."""
    assert fnv32a(data) == expected


def test_go_quote_escapes_as_go_does() -> None:
    assert go_quote('a"b\\c') == '"a\\"b\\\\c"'
    assert go_quote("\x07\x1b\x7f\u200b") == '"\\a\\x1b\\x7f\\u200b"'
    assert go_quote("ü\U0001f600") == '"ü\U0001f600"'


def test_a_hashed_schedule_fires_on_its_resolved_minute_every_hour() -> None:
    schedule = compile_schedule(resolve_schedules(["H/15 * * * *"], NAMESPACE, NAME))
    ticks = list(schedule.ticks_between(T0, T0 + timedelta(hours=1)))
    assert [t.minute for t in ticks] == [24, 39, 54, 9]
