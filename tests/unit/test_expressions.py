"""Tests for domain.expressions: the safe expr-lang evaluator for `when` / `stopStrategy`."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronsource.domain.expressions import (
    MAX_EXPRESSION_LENGTH,
    NOW_VARIABLE,
    ExpressionError,
    cronworkflow_variables,
    evaluate,
    evaluate_bool,
    validate_expression,
)

LAST = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
NOW = LAST + timedelta(minutes=1)


def _variables(
    *,
    failed: int = 3,
    succeeded: int = 5,
    last_scheduled_time: datetime | None = LAST,
    now: datetime | None = NOW,
) -> dict[str, object]:
    variables = cronworkflow_variables(
        name="nightly",
        namespace="argo",
        labels={"app": "etl", "a.b/c": "dotted", "max-failures": "3"},
        annotations={"example.com/owner": "team-a", "note": "x"},
        failed=failed,
        succeeded=succeeded,
        last_scheduled_time=last_scheduled_time,
    )
    if now is not None:
        variables[NOW_VARIABLE] = now
    return variables


VARS = _variables()

ARGO_WHEN = (
    "{{= cronworkflow.lastScheduledTime == nil"
    " || (now() - cronworkflow.lastScheduledTime).Seconds() > 30 }}"
)


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # the examples from Argo
        pytest.param("{{= cronworkflow.failed >= 3 }}", True, id="argo-stop-wrapped"),
        pytest.param(
            "cronworkflow.succeeded > 2 && cronworkflow.failed == 0", False, id="argo-stop-plain"
        ),
        pytest.param(ARGO_WHEN, True, id="argo-when-now"),
        pytest.param(
            "(now() - cronworkflow.lastScheduledTime).Seconds() > 90", False, id="argo-when-false"
        ),
        # wrappers
        pytest.param("{{cronworkflow.failed}}", 3, id="wrapper-plain"),
        pytest.param("{{ cronworkflow.failed >= 3 }}", True, id="wrapper-spaced"),
        pytest.param("  {{=cronworkflow.failed>=3}}\n", True, id="wrapper-tight-padded"),
        pytest.param("{{= '}}' }}", "}}", id="wrapper-braces-in-string"),
        pytest.param("cronworkflow.failed", 3, id="no-wrapper"),
        # comparisons
        pytest.param("cronworkflow.failed == 3", True, id="eq"),
        pytest.param("cronworkflow.failed != 3", False, id="ne"),
        pytest.param("cronworkflow.failed != 0", True, id="ne-true"),
        pytest.param("cronworkflow.failed < 3", False, id="lt"),
        pytest.param("cronworkflow.failed <= 3", True, id="le"),
        pytest.param("cronworkflow.failed > 2", True, id="gt"),
        pytest.param("cronworkflow.failed >= 4", False, id="ge"),
        pytest.param("1 < cronworkflow.failed < 4", True, id="chained-comparison"),
        pytest.param("1 < 5 < 4", False, id="chained-comparison-false"),
        pytest.param("'abc' < 'abd'", True, id="string-ordering"),
        pytest.param("1 == 1.0", True, id="int-float-equal"),
        pytest.param("true == 1", False, id="bool-is-not-int"),
        pytest.param("'1' == 1", False, id="string-is-not-int"),
        pytest.param("nil == nil", True, id="nil-eq-nil"),
        # logic, both spellings
        pytest.param("true && false", False, id="and-symbol"),
        pytest.param("true and true", True, id="and-word"),
        pytest.param("false || true", True, id="or-symbol"),
        pytest.param("false or false", False, id="or-word"),
        pytest.param("!false", True, id="not-symbol"),
        pytest.param("not true", False, id="not-word"),
        pytest.param("!!true", True, id="double-not"),
        pytest.param("!(cronworkflow.failed != 3)", True, id="not-of-ne"),
        pytest.param(
            "!(cronworkflow.failed == 3) || cronworkflow.failed != 3", False, id="not-ne-mix"
        ),
        pytest.param("not (cronworkflow.failed > 5)", True, id="not-word-parenthesised"),
        pytest.param("true || false && false", True, id="and-binds-tighter-than-or"),
        pytest.param("false && (1 / 0 > 1)", False, id="and-short-circuits"),
        pytest.param("true || (1 / 0 > 1)", True, id="or-short-circuits"),
        # expr-lang binds ! tighter than comparisons: (!true) in [...], not !(true in [...])
        pytest.param("!true in [true, false]", True, id="not-precedence-expr-lang"),
        pytest.param("!true == false", True, id="not-before-eq"),
        # arithmetic
        pytest.param("2 + 3 * 4", 14, id="mul-before-add"),
        pytest.param("(2 + 3) * 4", 20, id="parentheses"),
        pytest.param("10 - 4 - 3", 3, id="sub-left-assoc"),
        pytest.param("7 / 2", 3.5, id="div-is-float"),
        pytest.param("8 / 2", 4.0, id="div-exact-float"),
        pytest.param("7 % 3", 1, id="mod"),
        pytest.param("-7 % 3", -1, id="mod-go-sign"),
        pytest.param("2 ** 10", 1024.0, id="pow"),
        pytest.param("2 ^ 3 ^ 2", 512.0, id="pow-caret-right-assoc"),
        pytest.param("-2 ** 2", -4.0, id="unary-minus-below-pow"),
        pytest.param("-cronworkflow.failed + +1", -2, id="unary-minus-plus"),
        pytest.param("cronworkflow.succeeded - cronworkflow.failed >= 2", True, id="arith-compare"),
        pytest.param("'ab' + 'cd'", "abcd", id="string-concat"),
        pytest.param("1.5 + 1", 2.5, id="float-int"),
        # literals
        pytest.param("42", 42, id="int"),
        pytest.param("0x1F", 31, id="hex"),
        pytest.param("0o17", 15, id="octal"),
        pytest.param("0b101", 5, id="binary"),
        pytest.param("1_000", 1000, id="underscores"),
        pytest.param("1.5", 1.5, id="float"),
        pytest.param(".5", 0.5, id="float-leading-dot"),
        pytest.param("1e3", 1000.0, id="float-exponent"),
        pytest.param("true", True, id="true"),
        pytest.param("false", False, id="false"),
        pytest.param("nil", None, id="nil"),
        pytest.param('"double"', "double", id="double-quoted"),
        pytest.param("'single'", "single", id="single-quoted"),
        pytest.param("`raw \\n`", "raw \\n", id="raw-string"),
        pytest.param(r"'it\'s\n\u00e9\x41'", "it's\néA", id="escapes"),
        pytest.param("[1, 'a', nil]", [1, "a", None], id="array"),
        pytest.param("[1, 2,]", [1, 2], id="array-trailing-comma"),
        # string literals are never rewritten
        pytest.param("'a && b || !c'", "a && b || !c", id="string-keeps-operators"),
        pytest.param("'nil true false'", "nil true false", id="string-keeps-keywords"),
        pytest.param("'!' + '=' == '!='", True, id="string-bang-eq"),
        pytest.param("\"x != y\" != 'x != y'", False, id="string-ne-inside"),
        # membership and string operators
        pytest.param("'app' in cronworkflow.labels", True, id="in-map"),
        pytest.param("'nope' in cronworkflow.labels", False, id="in-map-missing"),
        pytest.param("'nope' not in cronworkflow.labels", True, id="not-in-map"),
        pytest.param("cronworkflow.failed in [1, 2, 3]", True, id="in-array"),
        pytest.param("cronworkflow.name not in ['a', 'b']", True, id="not-in-array"),
        pytest.param("true in [1]", False, id="in-array-bool-vs-int"),
        pytest.param("cronworkflow.name contains 'ght'", True, id="contains"),
        pytest.param("cronworkflow.name startsWith 'ni'", True, id="startsWith"),
        pytest.param("cronworkflow.name endsWith 'ly'", True, id="endsWith"),
        pytest.param("cronworkflow.name not endsWith 'ly'", False, id="not-endsWith"),
        # member and index access
        pytest.param("cronworkflow.name", "nightly", id="name"),
        pytest.param("cronworkflow.namespace == 'argo'", True, id="namespace"),
        pytest.param("cronworkflow.labels.app == 'etl'", True, id="label-dot"),
        pytest.param("cronworkflow.labels['app']", "etl", id="label-index"),
        pytest.param("cronworkflow.labels['a.b/c']", "dotted", id="label-dotted-key"),
        pytest.param('cronworkflow.labels["max-failures"]', "3", id="label-dashed-key"),
        # Argo v4.0.5 binds `annotations` to the labels (operator.go expressionEnv).
        pytest.param(
            "cronworkflow.annotations['example.com/owner'] == 'team-a'", False, id="annotation"
        ),
        pytest.param("cronworkflow.annotations.app", "etl", id="annotation-is-labels"),
        pytest.param("cronworkflow.annotations.note", "", id="annotation-dot"),
        pytest.param("cronworkflow['failed']", 3, id="record-index"),
        # labels are a Go map[string]string: a missing key is "" (expr-lang's zero value).
        pytest.param("cronworkflow.labels.missing", "", id="missing-label-is-empty"),
        pytest.param("cronworkflow.labels.env == 'prod'", False, id="missing-label-compare"),
        pytest.param("cronworkflow.labels.env ?? 'dev'", "", id="coalesce-missing"),
        pytest.param("cronworkflow.labels.app ?? 'dev'", "etl", id="coalesce-present"),
        pytest.param("[10, 20, 30][1]", 20, id="array-index"),
        pytest.param("[10, 20, 30][-1]", 30, id="array-negative-index"),
        # times and durations
        pytest.param("cronworkflow.lastScheduledTime != nil", True, id="time-not-nil"),
        pytest.param("cronworkflow.lastScheduledTime < now()", True, id="time-ordering"),
        pytest.param("now() - cronworkflow.lastScheduledTime", timedelta(minutes=1), id="time-sub"),
        pytest.param(
            "now() - cronworkflow.lastScheduledTime >= duration('1m')", True, id="dur-cmp"
        ),
        pytest.param("duration('1h30m').Minutes()", 90.0, id="duration-minutes"),
        pytest.param("duration('1.5h').Hours()", 1.5, id="duration-hours"),
        pytest.param("duration('-90s').Seconds()", -90.0, id="duration-negative"),
        pytest.param("duration('250ms').Milliseconds()", 250, id="duration-millis"),
        pytest.param("cronworkflow.lastScheduledTime.Unix()", 1704110400, id="time-unix"),
        pytest.param("cronworkflow.lastScheduledTime.Before(now())", True, id="time-before"),
        pytest.param("now().After(cronworkflow.lastScheduledTime)", True, id="time-after"),
        pytest.param(
            "now().Sub(cronworkflow.lastScheduledTime).Seconds()", 60.0, id="time-sub-method"
        ),
        pytest.param(
            "cronworkflow.lastScheduledTime.Add(duration('1m')).Equal(now())", True, id="time-add"
        ),
        # functions
        pytest.param("len(cronworkflow.labels)", 3, id="len-map"),
        pytest.param("len('héllo')", 5, id="len-string"),
        pytest.param("len([1, 2])", 2, id="len-array"),
        pytest.param("abs(-3)", 3, id="abs"),
        pytest.param(
            "int(cronworkflow.labels['max-failures']) <= cronworkflow.failed", True, id="int"
        ),
        pytest.param("int(2.9)", 2, id="int-truncates"),
        pytest.param("float('1.5') * 2", 3.0, id="float"),
        pytest.param("upper(cronworkflow.name)", "NIGHTLY", id="upper"),
        pytest.param("lower('ABC')", "abc", id="lower"),
        pytest.param("trim('  x ')", "x", id="trim"),
        # ternary, comments, whitespace
        pytest.param("cronworkflow.failed > 1 ? 'many' : 'few'", "many", id="ternary"),
        pytest.param("false ? 1 : true ? 2 : 3", 2, id="ternary-nested"),
        pytest.param("cronworkflow.failed >= 3 // stop after three", True, id="line-comment"),
        pytest.param("/* c */ cronworkflow.failed /* d */ == 3", True, id="block-comment"),
        pytest.param("1 // 2", 1, id="double-slash-is-a-comment"),
        pytest.param("cronworkflow.failed\n  >= 3", True, id="newlines"),
    ],
)
def test_evaluate(source: str, expected: object) -> None:
    result = evaluate(source, VARS)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("source", "variables", "expected"),
    [
        pytest.param(ARGO_WHEN, _variables(last_scheduled_time=None), True, id="first-run-nil"),
        pytest.param(ARGO_WHEN, _variables(now=LAST + timedelta(seconds=10)), False, id="too-soon"),
        pytest.param(
            "cronworkflow.lastScheduledTime == nil",
            _variables(last_scheduled_time=None, now=None),
            True,
            id="nil-time-without-now",
        ),
        pytest.param(
            "cronworkflow.failed >= 3 || cronworkflow.succeeded > 10",
            _variables(failed=0, succeeded=11),
            True,
            id="stop-on-successes",
        ),
        pytest.param("x > 1 && y", {"x": 2, "y": True}, True, id="plain-variables"),
        pytest.param("m.missing == nil", {"m": {"a": 1}}, True, id="plain-map-missing-is-nil"),
    ],
)
def test_evaluate_bool(source: str, variables: Mapping[str, object], expected: bool) -> None:
    assert evaluate_bool(source, variables) is expected


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("source", "message"),
    [
        # unknown names
        pytest.param(
            "cronworkflow.faild > 1", "unknown name 'cronworkflow.faild'", id="typo-field"
        ),
        pytest.param("cronworkflo.failed > 1", "unknown name 'cronworkflo'", id="typo-root"),
        pytest.param(
            "cronworkflow['nope']", "unknown name \"cronworkflow['nope']\"", id="typo-index"
        ),
        pytest.param("len", "unknown name 'len'", id="function-as-name"),
        # syntax
        pytest.param("cronworkflow.failed >", "unexpected end of expression", id="dangling-op"),
        pytest.param("(1 + 2", "unexpected end of expression", id="unclosed-paren"),
        pytest.param("1 + 2)", "unexpected token ')'", id="extra-paren"),
        pytest.param("1 +* 2", "unexpected token '*'", id="double-op"),
        pytest.param("a b", "unexpected token 'b'", id="juxtaposition"),
        pytest.param("'unterminated", "literal not terminated", id="unterminated-string"),
        pytest.param("1 = 1", "unexpected token '='", id="assignment"),
        pytest.param("1 & 2", "unexpected token '&'", id="bitwise-and"),
        pytest.param("a not b", "unexpected token 'b'", id="dangling-not"),
        pytest.param("@", "unrecognized character '@'", id="bad-char"),
        pytest.param("", "empty expression", id="empty"),
        pytest.param("{{= }}", "empty expression", id="empty-wrapper"),
        pytest.param("{{= a }} && {{= b }}", "unexpected token '}'", id="two-templates"),
        pytest.param("12abc", "bad number syntax", id="bad-number"),
        pytest.param("99999999999999999999", "integer literal is too large", id="huge-literal"),
        pytest.param("'\\q'", "invalid char escape", id="bad-escape"),
        pytest.param("/* open", "unclosed comment", id="unclosed-comment"),
        pytest.param("1 if true else 2", "unexpected token 'if'", id="python-ternary"),
        pytest.param("[x for x in y]", "unexpected token 'for'", id="python-comprehension"),
        pytest.param("lambda: 1", "unexpected token ':'", id="python-lambda"),
        pytest.param("a := 1", "unexpected token ':'", id="python-walrus"),
        pytest.param("f'{1}'", "unexpected token", id="python-fstring"),
        # unsupported expr-lang features fail cleanly
        pytest.param(
            "cronworkflow.name matches '('", "invalid regular expression '('", id="matches"
        ),
        pytest.param("1..3", "ranges ('..') are not supported", id="range"),
        pytest.param("[1, 2] | len()", "pipe operator", id="pipe"),
        pytest.param("all([1], # > 0)", "function 'all' is not supported", id="predicate"),
        pytest.param("let x = 1; x", "'let' declarations are not supported", id="let"),
        pytest.param("{'a': 1}", "map literals are not supported", id="map-literal"),
        pytest.param("[1, 2][0:1]", "slices are not supported", id="slice"),
        pytest.param("cronworkflow?.name", "optional chaining", id="optional-chaining"),
        pytest.param("true ?: false", "'?:' shorthand is not supported", id="elvis"),
        pytest.param("cronworkflow.failed ?? 1 + 1", "cannot be mixed", id="coalesce-mixed"),
        # dunders, attributes, calls
        pytest.param("cronworkflow.__class__", "access to '__class__' is not allowed", id="dunder"),
        pytest.param(
            "''.__class__.__mro__", "access to '__class__' is not allowed", id="str-dunder"
        ),
        pytest.param(
            "cronworkflow.labels['__class__']", "'__class__' is not allowed", id="dunder-index"
        ),
        pytest.param(
            "cronworkflow['__cl' + 'ass__']", "'__class__' is not allowed", id="dunder-computed"
        ),
        pytest.param("cronworkflow.name.__len__()", "'__len__' is not allowed", id="dunder-call"),
        pytest.param("open('x')", "unknown function 'open'", id="open"),
        pytest.param("__import__('os')", "unknown function '__import__'", id="import"),
        pytest.param("eval('1')", "unknown function 'eval'", id="eval"),
        pytest.param("getattr(cronworkflow, 'name')", "unknown function 'getattr'", id="getattr"),
        pytest.param("cronworkflow.name.upper()", "unknown method 'upper'", id="python-method"),
        pytest.param(
            "cronworkflow.name.format", "cannot fetch 'format' from string", id="str-attr"
        ),
        pytest.param("cronworkflow.failed.real", "cannot fetch 'real' from int", id="int-attr"),
        pytest.param("len(1, 2)", "len() takes 1 argument, got 2", id="arity"),
        pytest.param(
            "cronworkflow.failed.Seconds()", "type int has no method Seconds", id="bad-receiver"
        ),
        # type errors
        pytest.param("1 + 'a'", "mismatched types int and string", id="int-plus-string"),
        pytest.param("true + 1", "mismatched types bool and int", id="bool-arith"),
        pytest.param("!1", "mismatched type int", id="not-int"),
        pytest.param("1 && true", "&& needs bool operands, got int", id="and-int"),
        pytest.param("false || 'x'", "|| needs bool operands, got string", id="or-string"),
        pytest.param("cronworkflow.name > 1", "mismatched types string and int", id="str-gt-int"),
        pytest.param("nil > 1", "mismatched types nil and int", id="nil-gt"),
        pytest.param("'a' in 'abc'", "mismatched types string and string", id="in-string"),
        pytest.param("1 ? 2 : 3", "condition of '? :' must be a bool", id="ternary-int"),
        pytest.param("1.5 % 1", "mismatched types float and int", id="float-mod"),
        pytest.param(
            "cronworkflow.labels.x.y", "cannot fetch 'y' from string", id="fetch-from-str"
        ),
        pytest.param("[1][3]", "index out of range", id="index-out-of-range"),
        pytest.param("[1]['a']", "array index must be an int", id="array-string-index"),
        pytest.param(
            "[1] in cronworkflow.labels", "mismatched types array and map", id="in-bad-key"
        ),
        pytest.param("cronworkflow.labels[[1]]", "invalid map key of type array", id="bad-key"),
        pytest.param("int('x')", "cannot convert 'x' to int", id="int-parse"),
        pytest.param("duration('soon')", "invalid duration 'soon'", id="bad-duration"),
        # arithmetic failures and limits
        pytest.param("1 / 0", "division by zero", id="div-zero"),
        pytest.param("1 % 0", "integer divide by zero", id="mod-zero"),
        pytest.param("9223372036854775807 + 1", "integer overflow", id="int-overflow"),
        pytest.param("10 ** 400", "overflow", id="pow-overflow"),
        pytest.param("(-8) ** 0.5", "not a real number", id="pow-complex"),
        pytest.param("1" + " + 1" * 2000, "too long", id="too-long"),
        pytest.param("(" * 100 + "1" + ")" * 100, "nested too deeply", id="deep-parens"),
        pytest.param("!" * 200 + "true", "nested too deeply", id="deep-unary"),
        pytest.param("+".join(["1"] * 300), "nested too deeply", id="long-chain"),
        pytest.param("x" + ".y" * 300, "nested too deeply", id="long-member-chain"),
        # now() needs a caller-supplied time
        pytest.param("now() > cronworkflow.lastScheduledTime", "now() is unavailable", id="no-now"),
    ],
)
def test_evaluate_errors(source: str, message: str) -> None:
    variables = _variables(now=None)
    with pytest.raises(ExpressionError) as info:
        evaluate(source, variables)
    assert message in str(info.value)


def test_error_message_names_expression_and_problem() -> None:
    with pytest.raises(ExpressionError) as info:
        evaluate("cronworkflow.faild > 1", VARS)
    assert str(info.value) == (
        "cannot evaluate 'cronworkflow.faild > 1': unknown name 'cronworkflow.faild'"
    )


def test_syntax_error_reports_column() -> None:
    with pytest.raises(ExpressionError) as info:
        validate_expression("{{= cronworkflow.failed >= }}")
    assert str(info.value) == (
        "cannot parse '{{= cronworkflow.failed >= }}': unexpected end of expression (at column 28)"
    )


def test_expression_error_is_a_value_error() -> None:
    assert issubclass(ExpressionError, ValueError)


def test_non_string_source_is_an_expression_error() -> None:
    with pytest.raises(ExpressionError):
        evaluate(None, VARS)  # type: ignore[arg-type]
    with pytest.raises(ExpressionError):
        validate_expression(42)  # type: ignore[arg-type]


def test_bad_variables_are_an_expression_error() -> None:
    with pytest.raises(ExpressionError):
        evaluate("x", None)  # type: ignore[arg-type]


def test_naive_now_is_taken_as_utc() -> None:
    variables = _variables(now=NOW.replace(tzinfo=None))
    assert evaluate_bool(ARGO_WHEN, variables) is True


# --------------------------------------------------------------------------- evaluate_bool


@pytest.mark.parametrize(
    ("source", "got"),
    [
        pytest.param("cronworkflow.failed", "got int (3)", id="int"),
        pytest.param("'true'", "got string ('true')", id="string"),
        pytest.param("nil", "got nil (nil)", id="nil"),
        pytest.param("cronworkflow.labels.missing", "got string ('')", id="missing-label"),
        pytest.param("1.0", "got float (1.0)", id="float"),
        pytest.param("[true]", "got array ([True])", id="array"),
        pytest.param("cronworkflow.labels", "got map", id="map"),
    ],
)
def test_evaluate_bool_rejects_non_bool(source: str, got: str) -> None:
    with pytest.raises(ExpressionError) as info:
        evaluate_bool(source, VARS)
    assert f"expected a bool result, {got}" in str(info.value)


# --------------------------------------------------------------------------- validate_expression


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("{{= cronworkflow.failed >= 3 }}", id="argo-stop-wrapped"),
        pytest.param("cronworkflow.succeeded > 2 && cronworkflow.failed == 0", id="argo-stop"),
        pytest.param(ARGO_WHEN, id="argo-when"),
        pytest.param("unknown.name > 1", id="names-are-not-checked"),
        pytest.param("1 / 0 == 1", id="runtime-errors-are-not-checked"),
        pytest.param("cronworkflow.labels['a.b/c'] == 'x'", id="dotted-label"),
    ],
)
def test_validate_accepts(source: str) -> None:
    validate_expression(source)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("cronworkflow.failed >=", id="dangling"),
        pytest.param("open('x')", id="unknown-function"),
        pytest.param("cronworkflow.__class__", id="dunder"),
        pytest.param("x[0:1]", id="unsupported"),
        pytest.param("a && || b", id="double-op"),
        pytest.param("x" * (MAX_EXPRESSION_LENGTH + 1), id="too-long"),
    ],
)
def test_validate_rejects(source: str) -> None:
    with pytest.raises(ExpressionError):
        validate_expression(source)


def test_length_limit_is_inclusive() -> None:
    source = "1" + " " * (MAX_EXPRESSION_LENGTH - 1)
    assert len(source) == MAX_EXPRESSION_LENGTH
    assert evaluate(source, {}) == 1


# --------------------------------------------------------------------------- variables


def test_cronworkflow_variables_shape() -> None:
    labels = {"app": "etl"}
    variables = cronworkflow_variables(
        name="n",
        namespace="ns",
        labels=labels,
        annotations={"a": "b"},
        failed=1,
        succeeded=2,
        last_scheduled_time=LAST,
    )
    assert set(variables) == {"cronworkflow"}
    record = variables["cronworkflow"]
    assert isinstance(record, Mapping)
    assert dict(record) == {
        "name": "n",
        "namespace": "ns",
        "labels": {"app": "etl"},
        "annotations": {"app": "etl"},  # the labels, as Argo v4.0.5 binds them
        "failed": 1,
        "succeeded": 2,
        "lastScheduledTime": LAST,
    }
    labels["app"] = "changed"  # the variables hold a copy
    assert evaluate("cronworkflow.labels.app", variables) == "etl"


def test_last_scheduled_time_is_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    aware = cronworkflow_variables(
        name="n",
        namespace="ns",
        labels={},
        annotations={},
        failed=0,
        succeeded=0,
        last_scheduled_time=datetime(2024, 1, 1, 14, 0, tzinfo=plus_two),
    )
    naive = cronworkflow_variables(
        name="n",
        namespace="ns",
        labels={},
        annotations={},
        failed=0,
        succeeded=0,
        last_scheduled_time=datetime(2024, 1, 1, 12, 0),
    )
    for variables in (aware, naive):
        value = evaluate("cronworkflow.lastScheduledTime", variables)
        assert value == LAST
        assert isinstance(value, datetime) and value.tzinfo == UTC


def test_evaluate_is_pure() -> None:
    variables = _variables()
    before = repr(variables)
    for _ in range(2):
        assert evaluate_bool(ARGO_WHEN, variables) is True
    assert repr(variables) == before


# --------------------------------------------------------------------------- never crashes

_TOKENS = [
    "cronworkflow",
    ".",
    "failed",
    "labels",
    "lastScheduledTime",
    "['a.b/c']",
    "now()",
    "duration('1m')",
    ".Seconds()",
    "len(",
    "1",
    "0",
    "-1",
    "2.5",
    "'s'",
    '"&&"',
    "nil",
    "true",
    "false",
    "[",
    "]",
    "(",
    ")",
    ",",
    "&&",
    "||",
    "!",
    "not",
    "and",
    "or",
    "in",
    "contains",
    "==",
    "!=",
    "<",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "**",
    "^",
    "??",
    "?",
    ":",
    "{{=",
    "}}",
    "__class__",
    "matches",
    "//",
    "/*",
]


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=120))
def test_random_text_only_raises_expression_error(source: str) -> None:
    try:
        evaluate(source, VARS)
    except ExpressionError:
        pass


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=25).map(" ".join))
def test_random_token_soup_only_raises_expression_error(source: str) -> None:
    try:
        result = evaluate(source, VARS)
    except ExpressionError:
        return
    try:
        validate_expression(source)
    except ExpressionError:  # pragma: no cover - would be a bug
        pytest.fail(f"{source!r} evaluated to {result!r} but does not validate")


@pytest.mark.parametrize(
    "source",
    [
        "(now() - cronworkflow.lastScheduledTime).Seconds() < 0 || (!(false))",
        "(now() - cronworkflow.lastScheduledTime).Seconds() < 0 || not false",
    ],
)
def test_a_negated_constant_folds_before_the_or_as_expr_langs_optimizer_folds_it(
    source: str,
) -> None:
    # Given no run yet (lastScheduledTime nil), when the left side would fail, then `x || !false`
    # is true without evaluating `x`: Argo v4.0.5 answers true here (the differential found it).
    assert evaluate_bool(source, _variables(last_scheduled_time=None)) is True
