"""Names in `when` and `stopStrategy` that Argo's expression environment does not define are
named, with the nearest known names (issue 21, item 6). A table of expressions: typos are
found, valid names and the user's own label and annotation keys never are."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronsource.domain.expressions.names import unknown_names
from cronsource.domain.manifest import manifest_warnings, name_warnings, parse_manifest
from cronsource.domain.whentemplate import unknown_when_names

TYPOS = [
    pytest.param("{{= cronworkflow.faild < 3 }}", "cronworkflow.faild", ("cronworkflow.failed",)),
    pytest.param("cronworkflow.faild < 3", "cronworkflow.faild", ("cronworkflow.failed",)),
    pytest.param("cronworkflow.sucess > 0", "cronworkflow.sucess", ("cronworkflow.succeeded",)),
    pytest.param("cronworkflow.nmae == 'x'", "cronworkflow.nmae", ("cronworkflow.name",)),
    pytest.param(
        "cronworkflow.lastScheduleTime == nil",
        "cronworkflow.lastScheduleTime",
        ("cronworkflow.lastScheduledTime",),
        id="lastScheduleTime",
    ),
    pytest.param(
        "cronworkflow.label.app == 'x'",
        "cronworkflow.label",
        ("cronworkflow.labels",),
        id="label, not labels: the first unknown part is named",
    ),
    pytest.param(
        "cronworkflow['faild'] > 2",
        "cronworkflow['faild']",
        ("cronworkflow.failed",),
        id="index form",
    ),
    pytest.param("cronWorkflow.failed > 1", "cronWorkflow.failed", ("cronworkflow.failed",)),
    pytest.param("failed > 1", "failed", ("cronworkflow.failed",), id="without its prefix"),
    pytest.param(
        "now > cronworkflow.lastScheduledTime", "now", ("now()",), id="now without parentheses"
    ),
    pytest.param(
        "cronworkflow.zzz > 1",
        "cronworkflow.zzz",
        (),
        id="nothing close: the message lists the variables",
    ),
]


@pytest.mark.parametrize(("source", "name", "nearest"), TYPOS)
def test_an_unknown_name_is_named_with_the_nearest_known_ones(
    source: str, name: str, nearest: tuple[str, ...]
) -> None:
    found = unknown_names(source)
    assert [(u.name, u.nearest) for u in found] == [(name, nearest)]
    message = found[0].describe()
    assert message.startswith(f"{name} is not a variable Argo defines")
    if not nearest:
        assert "cronworkflow.failed, cronworkflow.succeeded" in message


VALID = [
    "cronworkflow.failed >= 3",
    "{{= cronworkflow.succeeded > 0 }}",
    "cronworkflow.name == 'a' && cronworkflow.namespace == 'b'",
    "cronworkflow.lastScheduledTime == nil"
    " || (now() - cronworkflow.lastScheduledTime).Seconds() > 360",
    "cronworkflow.labels.env == 'prod'",
    "cronworkflow.labels['a.b/c'] == 'x'",
    "cronworkflow.annotations.anything.at.all == ''",
    "cronworkflow['labels.json'] != ''",
    "len(cronworkflow.labels) > 0 && len(cronworkflow) > 0",
    "sprig.trim(cronworkflow.name) == 'a'",
    "cronworkflow.failed > 1 ? true : false",
    "[1, 2][0] == 1 && 'a' in ['a']",
    "this does not parse (",  # admission reports a syntax error, not this check
]


@pytest.mark.parametrize("source", VALID)
def test_known_names_and_map_keys_are_never_reported(source: str) -> None:
    assert unknown_names(source) == []


@given(st.text(alphabet=st.characters(codec="ascii", categories=["L", "N"]), min_size=1))
def test_any_label_or_annotation_key_is_the_users_own(key: str) -> None:
    for field in ("labels", "annotations"):
        assert unknown_names(f"cronworkflow.{field}['{key}'] == 'x'") == []
        if key[0].isalpha():
            assert unknown_names(f"cronworkflow.{field}.{key} == 'x'") == []


@pytest.mark.parametrize(
    ("when", "names"),
    [
        pytest.param("{{= cronworkflow.faild < 3 }}", ["cronworkflow.faild"], id="in a tag"),
        pytest.param(
            "{{= cronworkflow.failed }} < 3 && cronworkflow.sucess > 0",
            ["cronworkflow.sucess"],
            id="around the tags",
        ),
        pytest.param("'{{cronworkflow.namespace}}' == 'default'", [], id="simple tag"),
        pytest.param("{{= cronworkflow.nmae }}{{= cronworkflow.nmae }}", ["cronworkflow.nmae"]),
        pytest.param("{{= cronworkflow.labels.app == 'x' }}", [], id="a label in a tag"),
    ],
)
def test_when_templates_are_checked_inside_and_around_their_tags(
    when: str, names: list[str]
) -> None:
    assert [u.name for u in unknown_when_names(when)] == names


def test_a_manifest_names_the_field_of_each_unknown_name() -> None:
    m = parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": "a"},
            "spec": {
                "schedules": ["* * * * *"],
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
                "when": "{{= cronworkflow.faild < 3 }}",
                "stopStrategy": {"expression": "cronworkflow.sucess > 5"},
            },
        }
    )
    assert name_warnings(m) == [
        "spec.when: cronworkflow.faild is not a variable Argo defines"
        " (nearest: cronworkflow.failed)",
        "spec.stopStrategy.expression: cronworkflow.sucess is not a variable Argo defines"
        " (nearest: cronworkflow.succeeded)",
    ]


def test_a_negative_history_limit_is_warned_of_as_the_default_it_keeps() -> None:
    """Argo admits a negative limit and keeps its default: a user who wrote -1 for "keep
    none" (or "keep all") learns it at lint and apply, not after the first prune."""
    m = parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": "c"},
            "spec": {
                "schedule": "* * * * *",
                "successfulJobsHistoryLimit": -1,
                "failedJobsHistoryLimit": 0,
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
            },
        }
    )
    assert manifest_warnings(m) == [
        "spec.successfulJobsHistoryLimit: -1 is negative: Argo and cronsource keep the"
        " default (3); 0 keeps none"
    ]
    assert m.spec.kept_succeeded == 3 and m.spec.kept_failed == 0
