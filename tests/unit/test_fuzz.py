"""Fuzzing admission and the expression evaluator (issue 15, item 5): arbitrary YAML/JSON
never crashes (only DocumentError or ManifestError), never takes long, and stores nothing
when refused; expressions over the largest admissible inputs stay within a time bound and
fail only with ExpressionError."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronsource.adapters.application.documents import (
    DocumentError,
    from_client,
    load_json,
    load_yaml,
)
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.domain.expressions import ExpressionError, cronworkflow_variables, evaluate
from cronsource.domain.manifest import ManifestError, parse_manifest
from tests.hang import no_hang
from tests.instants import T0

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID: dict[str, Any] = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "CronWorkflow",
    "metadata": {"name": "fuzz", "namespace": "default", "labels": {"a": "b"}},
    "spec": {
        "schedule": "*/5 * * * *",
        "workflowSpec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
    },
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["yes", "on", "@every 1s", "@every " + "9" * 300, "abc\n", "0 * * * *", "-"]),
)
data = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=30,
)
yaml_fragments = st.lists(
    st.sampled_from(
        [
            "a",
            ":",
            " ",
            "\n",
            "- ",
            "&x ",
            "*x ",
            "[",
            "]",
            "{",
            "}",
            ",",
            "'",
            '"',
            "!!str ",
            "!!python/object ",
            "<<: ",
            "---\n",
            "yes",
            "0o7",
            "\t",
            "\x00",
            "é",
            "#",
            "|",
            "> ",
        ]
    ),
    max_size=60,
).map("".join)

paths = [
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("metadata", "uid"),
    ("spec", "schedule"),
    ("spec", "schedules"),
    ("spec", "timezone"),
    ("spec", "when"),
    ("spec", "suspend"),
    ("spec", "startingDeadlineSeconds"),
    ("spec", "workflowSpec"),
    ("spec", "stopStrategy"),
    ("kind",),
    ("apiVersion",),
]


def _admit_and_store(doc: Any) -> None:
    """Admission as every entrypoint does it, on a fresh store: refused stores nothing."""
    engine = bootstrap(StoreConfig.parse("memory:"))
    try:
        try:
            with no_hang("admission"):
                m = parse_manifest(from_client(doc))
        except ManifestError:
            assert (engine.service.recorder.max_notification_id() or 0) == 0
            return
        engine.service.apply(m, T0)
        assert (engine.service.recorder.max_notification_id() or 0) >= 1
    finally:
        engine.close()


@FUZZ
@given(text=st.one_of(st.text(max_size=300), yaml_fragments))
def test_arbitrary_yaml_text_is_read_or_refused_cleanly(text: str) -> None:
    try:
        with no_hang("load_yaml"):
            docs = load_yaml(text, "fuzz.yaml")
    except DocumentError as e:
        assert "\n" not in str(e)
        return
    for doc in docs:
        try:
            parse_manifest(doc)
        except ManifestError:
            pass


@FUZZ
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_are_read_or_refused_cleanly(raw: bytes) -> None:
    for load in (load_yaml, load_json):
        try:
            load(raw, "body")
        except DocumentError:
            pass


@FUZZ
@given(path=st.sampled_from(paths), value=data)
def test_a_valid_manifest_with_one_field_replaced_is_admitted_or_stores_nothing(
    path: tuple[str, ...], value: Any
) -> None:
    doc = json.loads(json.dumps(VALID))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    _admit_and_store(doc)


@FUZZ
@given(doc=data)
def test_arbitrary_json_data_is_admitted_or_stores_nothing(doc: Any) -> None:
    _admit_and_store(doc)


# ---------------------------------------------------------------------- expressions

BIG = "9" * (120 * 1024)  # two of these fit the 256 KiB annotation limit
VARIABLES = cronworkflow_variables(
    name="fuzz",
    namespace="default",
    labels={"a": "b"},
    annotations={"n": BIG, "m": BIG + "x", "d": "1h30m", "f": "1.5"},
    failed=3,
    succeeded=7,
    last_scheduled_time=T0,
)
atoms = st.sampled_from(
    [
        "cronworkflow.annotations.n",
        "cronworkflow.annotations.m",
        "cronworkflow.annotations.d",
        "cronworkflow.annotations.f",
        "cronworkflow.failed",
        "cronworkflow.name",
        "'1s'",
        "'x'",
        "1",
        "2.5",
        "true",
        "nil",
        "cronworkflow.labels.a",
        "cronworkflow.lastScheduledTime",
    ]
)


def _expr(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    unary = st.tuples(
        st.sampled_from(["float", "int", "duration", "len", "lower", "upper", "trim", "abs", "!"]),
        children,
    ).map(lambda t: f"{t[0]}({t[1]})")
    binary = st.tuples(
        children,
        st.sampled_from(
            [
                "+",
                "-",
                "*",
                "/",
                "%",
                "**",
                "==",
                "<",
                ">=",
                "&&",
                "||",
                "in",
                "contains",
                "startsWith",
                "??",
            ]
        ),
        children,
    ).map(lambda t: f"({t[0]} {t[1]} {t[2]})")
    return st.one_of(unary, binary)


expressions = st.recursive(atoms, _expr, max_leaves=12)


@FUZZ
@given(source=expressions)
def test_expressions_over_the_largest_inputs_are_bounded_in_time(source: str) -> None:
    """Every generated expression over the largest inputs ends, answered or refused by the
    cost budget; how long the worst one takes is a figure for bench/."""
    try:
        with no_hang(source):
            evaluate(source, VARIABLES)
    except ExpressionError:
        pass
