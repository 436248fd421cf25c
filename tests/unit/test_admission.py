"""Admission as the Kubernetes API server bounds it (issue 15, items 2-4): names, labels,
annotation and object sizes, linear-time durations, bounded expression arguments. Each
message names the limit. Every case here was admitted (or took tens of seconds) before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.domain.durations import parse_duration
from cronsource.domain.expressions import ExpressionError, cronworkflow_variables, evaluate
from cronsource.domain.manifest import ManifestError, parse_manifest
from tests.hang import no_hang
from tests.instants import T0

#: A 3,000-character number: quadratic and cubic parsers took seconds to minutes on it.
LONG = "9" * 3000 + "x"


def doc(name: str = "a", *, namespace: str = "default", **meta: Any) -> dict[str, Any]:
    spec = meta.pop("spec", {})
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {
            "schedule": "0 * * * *",
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }


def refused(d: dict[str, Any]) -> str:
    """The refusal message. Admission of these inputs used to take seconds to minutes: the
    call is guarded against a hang; how fast it refuses is a figure for bench/."""
    with no_hang("admission"), pytest.raises(ManifestError) as e:
        parse_manifest(d)
    return str(e.value)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("abc\n", id="final newline ($ matched before it)"),
        pytest.param("Abc", id="uppercase"),
        pytest.param("a..b", id="empty label between dots"),
        pytest.param("-a", id="leading dash"),
        pytest.param("a.-b", id="dash after dot"),
        pytest.param("a_b", id="underscore"),
    ],
)
def test_names_must_be_dns_1123_subdomains(name: str) -> None:
    assert "metadata.name" in refused(doc(name))


@pytest.mark.parametrize(
    "namespace",
    [
        pytest.param("default\n", id="final newline"),
        pytest.param("a.b", id="dots are not allowed in a label"),
        pytest.param("n" * 64, id="64 characters"),
        # "" is unset, as kubectl reads it (tests/unit/test_cli.py), not refused
    ],
)
def test_namespaces_must_be_dns_1123_labels(namespace: str) -> None:
    assert "metadata.namespace" in refused(doc(namespace=namespace))


def test_valid_names_still_pass() -> None:
    meta = parse_manifest(doc("a.b-c", namespace="team-1")).metadata
    assert (meta.name, meta.namespace) == ("a.b-c", "team-1")


@pytest.mark.parametrize(
    "labels, message",
    [
        pytest.param({"app": "v" * 64}, "at most 63", id="64-character value"),
        pytest.param({"app": "x" * 10_000_000}, "too large|at most 63|1.5 MiB", id="10 MB value"),
        pytest.param({"app": "a b"}, "must be letters", id="space in value"),
        pytest.param({"app": "yes\n"}, "must be letters", id="newline in value"),
        pytest.param({"-app": "v"}, "name part", id="key starts with dash"),
        pytest.param({"Bad_Prefix/app": "v"}, "prefix", id="uppercase prefix"),
        pytest.param({"/app": "v"}, "prefix part must not be empty", id="empty prefix"),
        pytest.param({"k" * 64: "v"}, "at most 63", id="64-character key name"),
    ],
)
def test_labels_are_checked_as_kubernetes_checks_them(labels: dict[str, str], message: str) -> None:
    import re

    text = refused(doc(labels=labels))
    assert re.search(message, text), text


def test_good_labels_pass() -> None:
    labels = {"example.com/team": "data", "tier": "", "a_b.c-d": "X_1.2-3"}
    assert parse_manifest(doc(labels=labels)).metadata.labels == labels


def test_annotations_are_limited_to_256_kib_in_total() -> None:
    text = refused(doc(annotations={"a": "x" * 150_000, "b": "y" * 150_000}))
    assert "256 KiB" in text and "262144" in text
    parse_manifest(doc(annotations={"a": "x" * 200_000}))


def test_objects_over_1_5_mib_are_refused_naming_the_limit() -> None:
    big = {
        "entrypoint": "main",
        "templates": [{"name": f"t{i}", "x": "y" * 1000} for i in range(2000)],
    }
    text = refused(doc(spec={"workflowSpec": big}))
    assert "1.5 MiB" in text and "1572864" in text


def test_a_spec_of_200000_keys_is_refused() -> None:
    """About the most keys a 3 MiB body can hold (5 million took 33 s and 2.7 GB before)."""
    keys = {f"k{i}": 1 for i in range(200_000)}  # over 1.5 MiB as JSON
    text = refused(doc(spec={"workflowSpec": {"entrypoint": "main", **keys}}))
    assert "1.5 MiB" in text


def test_parsing_a_20000_digit_duration_is_linear_and_names_the_limit() -> None:
    """Refused on its length before any parse (the limit named): what keeps it linear."""
    with no_hang("parse_duration"):
        with pytest.raises(ValueError, match="longer than the limit of 64"):
            parse_duration("1" * 20_000 + "s")
        with pytest.raises(ValueError, match="invalid duration"):
            parse_duration("1" * 60 + "x")


def test_every_with_20000_digits_is_refused_in_well_under_a_second() -> None:
    """Refused on its length (the limit named) before the schedule is parsed; the time it
    takes is bench/'s figure, `refused` guards a hang."""
    text = refused(doc(spec={"schedule": "@every " + "1" * 20_000}))
    assert "limit of 1024" in text and len(text) < 500


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param(f"float('{LONG}') > 0", id="float()"),
        pytest.param(f"int('{LONG}') > 0", id="int()"),
        pytest.param(f"duration('{LONG}') > duration('1s')", id="duration()"),
    ],
)
def test_conversion_of_a_long_argument_is_refused_by_the_cost_budget(expression: str) -> None:
    """Argo v4.0.5 binds `cronworkflow.annotations` to the labels (63 characters a value at
    most), so the long argument comes from the expression's own text (at most 4096)."""
    variables = cronworkflow_variables(
        name="a",
        namespace="default",
        labels={},
        annotations={},
        failed=0,
        succeeded=0,
        last_scheduled_time=None,
    )
    with no_hang("evaluate"), pytest.raises(ExpressionError, match="cost budget"):
        evaluate(expression, variables)


def test_a_when_over_budget_on_its_own_inputs_is_refused_at_admission() -> None:
    text = refused(doc(spec={"when": f"duration('{LONG}') > duration('1s')"}))
    assert "spec.when" in text and "expression cost budget" in text


def test_a_hostile_when_skips_its_own_tick_and_does_not_delay_another_cronworkflow() -> None:
    """One CronWorkflow whose `when` converted a 3,000-digit text used to stop every fire of
    every CronWorkflow for about 138 s. This one passes admission (the expensive branch only
    runs once it has fired), then its tick is a WhenFalse skip naming the budget, and the
    other CronWorkflow fires in the same batch at once."""
    engine = bootstrap(StoreConfig.parse("memory:"))
    try:
        svc = engine.service
        hostile = doc(
            "hostile",
            spec={
                "schedule": "* * * * *",
                "when": "cronworkflow.lastScheduledTime == nil"
                f" || (duration('{LONG[:2500]}') > duration('1s') && float('{LONG[:800]}') > 0)",
            },
        )
        calm = doc("calm", spec={"schedule": "* * * * *"})
        ids = [svc.apply(parse_manifest(d), T0)[0] for d in (hostile, calm)]
        assert svc.tick(ids, T0 + timedelta(minutes=1)).fires == 2
        with no_hang("the batch"):
            report = svc.tick(ids, T0 + timedelta(minutes=2))
        assert report.fires == 1  # the calm one, in the same batch, at the same instant
        skipped = [e for e in svc.events.get(ids[0]) if type(e).__name__ == "ScheduleSkipped"]
        assert skipped and skipped[-1].reason == "WhenFalse"
        assert "expression cost budget" in (skipped[-1].message or "")
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("suspend", "yes", id="'yes' for a bool"),
        pytest.param("suspend", "true", id="'true' for a bool"),
        pytest.param("startingDeadlineSeconds", "30", id="text for an int"),
        pytest.param("failedJobsHistoryLimit", 1.5, id="float for an int"),
        # int32 fields, as in Argo's CRD.
        pytest.param("successfulJobsHistoryLimit", 2**31, id="history limit over int32"),
        pytest.param("startingDeadlineSeconds", 2**31, id="deadline over int32"),
    ],
)
def test_scalars_are_decoded_strictly_as_the_api_server_does(field: str, value: object) -> None:
    text = refused(doc(spec={field: value}))
    assert f"spec.{field}" in text and repr(value) in text
