"""Safe evaluation of Argo's expr-lang conditions (`spec.when`, `spec.stopStrategy.expression`).

Argo writes these in expr-lang syntax (github.com/expr-lang/expr), optionally wrapped in a
template: ``{{= cronworkflow.failed >= 3 }}``. Nothing here calls Python's ``eval``/``compile``.

How it works
------------
1. The ``{{= ... }}`` / ``{{ ... }}`` wrapper is stripped.
2. A small lexer and Pratt parser that follow expr-lang's own tables (operator precedences,
   literal syntax, ``not in``, chained comparisons) translate the text into a Python ``ast``
   tree. A real parser is needed rather than token replacement: expr-lang's ``!``/``not`` binds
   tighter than comparisons (``!a in b`` is ``(!a) in b``), ``^`` is power (XOR in Python),
   ``//`` starts a comment, and ``??`` has no Python spelling.
3. ``simpleeval`` (a safe AST evaluator) evaluates that tree with an operator table of
   expr-lang semantics and with only the node types this module emits enabled. Member and
   index access never call ``getattr``: maps are read by key, so no Python attribute, method
   or dunder is reachable from an expression. Only the functions and methods listed below can
   be called.

Every failure -- syntax error, unknown name, type mismatch, division by zero, a non-bool
result for `evaluate_bool`, an unsupported feature -- raises `ExpressionError` (a
`ValueError`), never another exception type.

Supported expr-lang subset
--------------------------
* literals: ints (``42``, ``0x2A``, ``0o52``, ``0b101010``, ``1_000``), floats (``1.5``,
  ``.5``, ``1e3``), strings (``'..'``, ``".."`` with Go escapes, raw ```..```),
  ``true``/``false``/``nil``, arrays ``[1, 2]``;
* ``|| or && and ! not``, ``== != < <= > >=`` (chainable: ``1 < x < 3``),
  ``in`` / ``not in`` (arrays: element; maps: key), ``contains``, ``startsWith``,
  ``endsWith`` (and their ``not`` forms), ``+ - * / %``, ``**``/``^`` (power, float),
  unary ``-``/``+``, ``cond ? a : b``, ``a ?? b`` (nil coalescing), parentheses,
  ``//`` and ``/* */`` comments;
* member access ``m.key`` and index access ``m['a.b/c']`` on maps, ``arr[i]`` (negative
  ``i`` counts from the end);
* functions ``len abs int float lower upper trim duration now`` and the methods
  ``Seconds() Minutes() Hours() Milliseconds()`` on durations and
  ``Unix() Before(t) After(t) Equal(t) Sub(t) Add(d)`` on times.

Not supported (a clean `ExpressionError`, also from `validate_expression`): ``matches``
(regular expressions are not evaluated: Python's backtracking engine is not Go's linear-time
RE2), ranges ``..``, pipes ``|``, predicates and closures (``all``, ``filter``, ``#``, ...),
``let``, map literals, slices, optional chaining ``?.``, the ``?:`` shorthand, and any other
builtin.

Semantics, following expr-lang: ``&&``, ``||``, ``!`` and ``?:`` require bools;
``/`` always yields a float; ``%`` works on ints with Go's sign rule (``-7 % 3 == -1``);
``true == 1`` is false; ordering compares numbers, strings, times or durations only.
Deviations: integer results outside int64 raise (Go would wrap); division or modulo by zero
raise (Go yields ``+Inf`` for ``/``); ``**`` overflow raises.

Variables
---------
`evaluate` takes a mapping of top-level names. Nested plain mappings behave like expr-lang
maps: a missing key reads as ``nil``; ``cronworkflow.labels`` is a Go map[string]string as in
Argo, so a missing label reads as ``""`` (``cronworkflow.labels.env == 'prod'`` is simply
false when there is no ``env`` label). The ``cronworkflow`` object built by
`cronworkflow_variables` is a record: an unknown field such as ``cronworkflow.faild`` is an
error, catching typos. Times are timezone-aware `datetime` values in UTC (``nil`` before the
first run), so they compare with ``nil`` and with each other; durations are `timedelta`.

The domain never reads the clock, so ``now()`` returns the variable ``now`` (an aware
`datetime`) that the caller supplies, e.g.
``evaluate_bool(src, {**cronworkflow_variables(...), NOW_VARIABLE: at})``; without it
``now()`` fails cleanly.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Final, NoReturn

import re2  # type: ignore[import-untyped]
import simpleeval  # type: ignore[import-untyped]

from domain.expression_budget import argument_problem

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "NOW_VARIABLE",
    "ExpressionError",
    "cronworkflow_variables",
    "evaluate",
    "evaluate_bool",
    "validate_expression",
]

#: Longest accepted expression source, wrapper included.
MAX_EXPRESSION_LENGTH: Final = 4096
#: Name of the variable holding the evaluation instant that ``now()`` returns.
NOW_VARIABLE: Final = "now"

_MAX_NESTING: Final = 64  # parser recursion (parentheses, unary operators, arrays)
_MAX_DEPTH: Final = 100  # depth of the translated tree (bounds simpleeval's recursion)
_MAX_STRING: Final[int] = simpleeval.MAX_STRING_LENGTH
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_SHOWN_SOURCE: Final = 200


class ExpressionError(ValueError):
    """An expression could not be parsed or evaluated; the message names the expression."""


def validate_expression(source: str) -> None:
    """Check that `source` parses and uses only supported features (names are not checked)."""
    _compile(_checked_source(source))


def evaluate(source: str, variables: Mapping[str, object]) -> object:
    """Evaluate `source` against `variables` and return the value.

    Values are plain Python: int, float, str, bool, None (``nil``), list, mappings,
    `datetime` (times) and `timedelta` (durations).
    """
    tree = _compile(_checked_source(source))
    try:
        return _Evaluation(variables).run(source, tree)
    except _Fail as exc:
        raise _error("evaluate", source, exc.reason) from exc
    except simpleeval.NameNotDefined as exc:
        raise _error("evaluate", source, f"unknown name {exc.name!r}") from exc
    except RecursionError as exc:
        raise _error("evaluate", source, "expression is nested too deeply") from exc
    except ZeroDivisionError as exc:
        raise _error("evaluate", source, "division by zero") from exc
    except Exception as exc:  # the guarantee: nothing but ExpressionError escapes
        raise _error("evaluate", source, str(exc) or type(exc).__name__) from exc


def evaluate_bool(source: str, variables: Mapping[str, object]) -> bool:
    """Evaluate `source` and require a bool result."""
    result = evaluate(source, variables)
    if not isinstance(result, bool):
        raise _error(
            "evaluate",
            source,
            f"expected a bool result, got {_type_name(result)} ({_show_value(result)})",
        )
    return result


def cronworkflow_variables(
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    failed: int,
    succeeded: int,
    last_scheduled_time: datetime | None,
) -> dict[str, object]:
    """The variables Argo exposes to `when` and `stopStrategy` expressions.

    ``cronworkflow`` is a record with ``name``, ``namespace``, ``labels``, ``annotations``
    (maps: ``cronworkflow.labels.app`` or ``cronworkflow.labels['a.b/c']``; a missing key is
    ``""``; ``annotations`` holds the labels, as in Argo v4.0.5, whose results these must
    equal), ``failed``, ``succeeded`` and ``lastScheduledTime`` (an aware UTC `datetime`, or
    None before the first run; a naive datetime is taken as UTC). Unknown fields are errors.
    """
    return {
        "cronworkflow": _Record(
            {
                "name": name,
                "namespace": namespace,
                "labels": _StringMap(labels),
                # Argo v4.0.5 sets `annotations` to the labels (operator.go expressionEnv:
                # addSetField("annotations", cron.Labels)); results must equal Argo's.
                "annotations": _StringMap(labels),
                "failed": failed,
                "succeeded": succeeded,
                "lastScheduledTime": (
                    None if last_scheduled_time is None else _as_utc(last_scheduled_time)
                ),
            }
        )
    }


# --------------------------------------------------------------------------- errors & values


class _Fail(Exception):
    """Evaluation failure with a user-facing reason (converted to ExpressionError)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _SyntaxFail(Exception):
    def __init__(self, reason: str, position: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.position = position


def _shown(source: str) -> str:
    if len(source) > _SHOWN_SOURCE:
        source = source[:_SHOWN_SOURCE] + "..."
    return repr(source)


def _error(action: str, source: str, reason: str) -> ExpressionError:
    return ExpressionError(f"cannot {action} {_shown(source)}: {reason}")


def _checked_source(source: object) -> str:
    if not isinstance(source, str):
        raise ExpressionError(f"cannot parse {source!r}: an expression must be a string")
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise _error(
            "parse",
            source,
            f"expression is too long ({len(source)} > {MAX_EXPRESSION_LENGTH} characters)",
        )
    return source


class _StringMap(dict[str, str]):
    """A Go map[string]string: a missing key reads as "" (the zero value), not nil."""


class _Record(Mapping[str, object]):
    """A struct-like read-only mapping: reading an unknown field is an error, not nil."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, object]) -> None:
        self._fields = dict(fields)

    def __getitem__(self, key: str) -> object:
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"Record({self._fields!r})"


def _as_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _as_number(value: object) -> int | float | None:
    """`value` when it is an int or float (bools are not numbers in expr-lang)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return None


def _type_name(value: object) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "time"
    if isinstance(value, timedelta):
        return "duration"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "map"
    return type(value).__name__


def _show_value(value: object) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _mismatch(symbol: str, *operands: object) -> _Fail:
    types = " and ".join(_type_name(v) for v in operands)
    kind = "types" if len(operands) > 1 else "type"
    return _Fail(f"invalid operation: {symbol} (mismatched {kind} {types})")


def _int64(value: int) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _Fail("integer overflow (result outside int64)")
    return value


def _checked(value: int | float) -> int | float:
    return _int64(value) if isinstance(value, int) else value


# --------------------------------------------------------------------------- operators


def _add(a: object, b: object) -> object:
    x, y = _as_number(a), _as_number(b)
    if x is not None and y is not None:
        return _checked(x + y)
    if isinstance(a, str) and isinstance(b, str):
        if len(a) + len(b) > _MAX_STRING:
            raise _Fail(f"string too long (over {_MAX_STRING} characters)")
        return a + b
    if isinstance(a, datetime) and isinstance(b, timedelta):
        return a + b
    if isinstance(a, timedelta) and isinstance(b, datetime):
        return b + a
    if isinstance(a, timedelta) and isinstance(b, timedelta):
        return a + b
    raise _mismatch("+", a, b)


def _sub(a: object, b: object) -> object:
    x, y = _as_number(a), _as_number(b)
    if x is not None and y is not None:
        return _checked(x - y)
    if isinstance(a, datetime) and isinstance(b, datetime):
        return a - b
    if isinstance(a, datetime) and isinstance(b, timedelta):
        return a - b
    if isinstance(a, timedelta) and isinstance(b, timedelta):
        return a - b
    raise _mismatch("-", a, b)


def _mul(a: object, b: object) -> object:
    x, y = _as_number(a), _as_number(b)
    if x is not None and y is not None:
        return _checked(x * y)
    raise _mismatch("*", a, b)


def _div(a: object, b: object) -> object:
    x, y = _as_number(a), _as_number(b)
    if x is not None and y is not None:
        if y == 0:
            raise _Fail("division by zero")
        return x / y
    raise _mismatch("/", a, b)


def _mod(a: object, b: object) -> object:
    x, y = _as_number(a), _as_number(b)
    if isinstance(x, int) and isinstance(y, int):
        if y == 0:
            raise _Fail("integer divide by zero")
        remainder = abs(x) % abs(y)  # Go: the result takes the dividend's sign
        return -remainder if x < 0 else remainder
    raise _mismatch("%", a, b)


def _pow(a: object, b: object) -> object:
    x, y = _as_number(a), _as_number(b)
    if x is not None and y is not None:
        try:
            return math.pow(x, y)
        except OverflowError:
            raise _Fail("numeric overflow in **") from None
        except ValueError:
            raise _Fail("invalid operation: ** (result is not a real number)") from None
    raise _mismatch("**", a, b)


def _neg(a: object) -> object:
    x = _as_number(a)
    if x is not None:
        return _checked(-x)
    if isinstance(a, timedelta):
        return -a
    raise _mismatch("-", a)


def _pos(a: object) -> object:
    if _as_number(a) is not None or isinstance(a, timedelta):
        return a
    raise _mismatch("+", a)


def _not(a: object) -> bool:
    if isinstance(a, bool):
        return not a
    raise _mismatch("!", a)


def _equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _not_equal(a: object, b: object) -> bool:
    return not _equal(a, b)


def _ordered(a: object, b: object) -> bool:
    if _as_number(a) is not None and _as_number(b) is not None:
        return True
    return any(isinstance(a, t) and isinstance(b, t) for t in (str, datetime, timedelta))


def _ordering(symbol: str, compare: Callable[[Any, Any], object]) -> Callable[..., bool]:
    def apply(a: object, b: object) -> bool:
        if not _ordered(a, b):
            raise _mismatch(symbol, a, b)
        return bool(compare(a, b))

    return apply


def _member_of(item: object, container: object) -> bool:
    if isinstance(container, list | tuple):
        return any(_equal(item, element) for element in container)
    if isinstance(container, Mapping):
        if not isinstance(item, Hashable):
            raise _mismatch("in", item, container)
        return item in container
    raise _mismatch("in", item, container)


def _not_member_of(item: object, container: object) -> bool:
    return not _member_of(item, container)


def _string_test(symbol: str, test: Callable[[str, str], bool]) -> Callable[..., bool]:
    def apply(a: object, b: object) -> bool:
        if isinstance(a, str) and isinstance(b, str):
            return test(a, b)
        raise _mismatch(symbol, a, b)

    return apply


class _Contains(ast.cmpop):
    pass


class _NotContains(ast.cmpop):
    pass


class _StartsWith(ast.cmpop):
    pass


class _NotStartsWith(ast.cmpop):
    pass


class _EndsWith(ast.cmpop):
    pass


class _NotEndsWith(ast.cmpop):
    pass


class _Matches(ast.cmpop):
    pass


class _NotMatches(ast.cmpop):
    pass


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    """Compiled with RE2, the engine (and syntax) of Go's regexp: linear time whatever the
    pattern, so a user's pattern cannot stall the scheduler."""
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0] if exc.args else ""
        why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        raise _Fail(f"invalid regular expression {pattern!r}: {why}") from None


def _matches(a: object, b: object) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return _regex(b).search(a) is not None
    raise _mismatch("matches", a, b)


_contains = _string_test("contains", lambda a, b: b in a)
_starts = _string_test("startsWith", str.startswith)
_ends = _string_test("endsWith", str.endswith)

#: simpleeval's operator table, with expr-lang semantics (no truthiness, no bool arithmetic).
_OPERATORS: Final[dict[type, Callable[..., object]]] = {
    ast.Add: _add,
    ast.Sub: _sub,
    ast.Mult: _mul,
    ast.Div: _div,
    ast.Mod: _mod,
    ast.Pow: _pow,
    ast.USub: _neg,
    ast.UAdd: _pos,
    ast.Not: _not,
    ast.Eq: _equal,
    ast.NotEq: _not_equal,
    ast.Lt: _ordering("<", operator.lt),
    ast.LtE: _ordering("<=", operator.le),
    ast.Gt: _ordering(">", operator.gt),
    ast.GtE: _ordering(">=", operator.ge),
    ast.In: _member_of,
    ast.NotIn: _not_member_of,
    _Contains: _contains,
    _NotContains: lambda a, b: not _contains(a, b),
    _StartsWith: _starts,
    _NotStartsWith: lambda a, b: not _starts(a, b),
    _EndsWith: _ends,
    _NotEndsWith: lambda a, b: not _ends(a, b),
    _Matches: _matches,
    _NotMatches: lambda a, b: not _matches(a, b),
}

_COMPARE_OPS: Final[dict[str, type[ast.cmpop]]] = {
    "==": ast.Eq,
    "!=": ast.NotEq,
    "<": ast.Lt,
    "<=": ast.LtE,
    ">": ast.Gt,
    ">=": ast.GtE,
    "in": ast.In,
    "contains": _Contains,
    "startsWith": _StartsWith,
    "endsWith": _EndsWith,
    "matches": _Matches,
}
_NEGATED_COMPARE_OPS: Final[dict[str, type[ast.cmpop]]] = {
    "in": ast.NotIn,
    "contains": _NotContains,
    "startsWith": _NotStartsWith,
    "endsWith": _NotEndsWith,
    "matches": _NotMatches,
}
_ARITHMETIC_OPS: Final[dict[str, type[ast.operator]]] = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
    "/": ast.Div,
    "%": ast.Mod,
    "**": ast.Pow,
    "^": ast.Pow,
}


# --------------------------------------------------------------------------- functions


def _duration(text: object) -> timedelta:
    if not isinstance(text, str):
        raise _mismatch("duration()", text)
    if (too_long := argument_problem("duration()", text)) is not None:
        raise _Fail(too_long)
    return _parse_go_duration(text)


_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def _parse_go_duration(text: str) -> timedelta:
    """Go's time.ParseDuration: ``[-+]?(number unit)+`` or ``0``."""
    body = text[1:] if text[:1] in ("-", "+") else text
    sign = -1.0 if text[:1] == "-" else 1.0
    if body == "0":
        return timedelta(0)
    total = 0.0
    position = 0
    for match in _DURATION_PART.finditer(body):
        if match.start() != position:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if not body or position != len(body):
        raise _Fail(f"invalid duration {text!r} (expected e.g. '90s', '1h30m', '500ms')")
    return timedelta(seconds=sign * total)


def _len(value: object) -> int:
    if isinstance(value, str | list | tuple | Mapping):
        return len(value)
    raise _mismatch("len()", value)


def _abs(value: object) -> object:
    number = _as_number(value)
    if number is not None:
        return abs(number)
    if isinstance(value, timedelta):
        return abs(value)
    raise _mismatch("abs()", value)


_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
)


def _int(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Fail(f"cannot convert {_show_value(value)} to int")
        return _int64(int(value))
    if isinstance(value, str) and (too_long := argument_problem("int()", value)) is not None:
        raise _Fail(too_long)
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        return _int64(int(value))
    if isinstance(value, str):
        raise _Fail(f"cannot convert {value!r} to int")
    raise _mismatch("int()", value)


def _float(value: object) -> float:
    number = _as_number(value)
    if number is not None:
        return float(number)
    if isinstance(value, str) and (too_long := argument_problem("float()", value)) is not None:
        raise _Fail(too_long)
    if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value):
        return float(value)
    if isinstance(value, str):
        raise _Fail(f"cannot convert {value!r} to float")
    raise _mismatch("float()", value)


def _string_function(symbol: str, function: Callable[[str], str]) -> Callable[[object], str]:
    def apply(value: object) -> str:
        if isinstance(value, str):
            return function(value)
        raise _mismatch(symbol, value)

    return apply


def _str_arg(symbol: str, value: object) -> str:
    if isinstance(value, str):
        return value
    raise _mismatch(symbol, value)


def _int_arg(symbol: str, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _mismatch(symbol, value)


def _to_string(value: object) -> str:
    """sprig's toString for the values expressions see."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return _show_value(value)


def _empty(value: object) -> bool:
    """sprig's `empty`: the zero value of its type."""
    return value is None or value is False or value in (0, "") or value == [] or value == {}


def _to_json(value: object) -> str:
    """Argo's toJson: JSON of a value, as Go's encoding/json writes it."""
    try:
        return (
            json.dumps(value, separators=(",", ":"), sort_keys=True, default=_json_default)
            .replace("<", "\\u003c")
            .replace(">", "\\u003e")
            .replace("&", "\\u0026")
        )
    except (TypeError, ValueError) as exc:
        raise _Fail(f"toJson(): {exc}") from None


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return _as_utc(value).isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot encode {_type_name(value)}")


def _substr(start: object, end: object, text: object) -> str:
    t = _str_arg("substr()", text)
    a, b = _int_arg("substr()", start), _int_arg("substr()", end)
    if a < 0:
        return t[:b]
    if b < 0 or b > len(t):
        return t[a:]
    return t[a:b] if a <= b else ""


def _trunc(length: object, text: object) -> str:
    t, n = _str_arg("trunc()", text), _int_arg("trunc()", length)
    return t[:n] if n >= 0 else t[max(0, len(t) + n) :]


def _repeat(count: object, text: object) -> str:
    n = _int_arg("repeat()", count)
    t = _str_arg("repeat()", text)
    if n * len(t) > _MAX_STRING:
        raise _Fail("repeat(): the result would be too long")
    return t * max(n, 0)


#: `sprig.<name>(...)`: the Sprig functions Argo's `when` environment offers (util/expr/env,
#: sprig.GenericFuncMap), those that are deterministic and work on the values an expression
#: sees; sprig's argument order (the string last).
_SPRIG: Final[dict[str, tuple[Callable[..., object], int]]] = {
    "trim": (lambda s: _str_arg("trim()", s).strip(" \t\n\r\v\f"), 1),
    "upper": (lambda s: _str_arg("upper()", s).upper(), 1),
    "lower": (lambda s: _str_arg("lower()", s).lower(), 1),
    "title": (lambda s: _str_arg("title()", s).title(), 1),
    "trimPrefix": (lambda p, s: _str_arg("trimPrefix()", s).removeprefix(_str_arg("", p)), 2),
    "trimSuffix": (lambda p, s: _str_arg("trimSuffix()", s).removesuffix(_str_arg("", p)), 2),
    "contains": (lambda sub, s: _str_arg("contains()", sub) in _str_arg("contains()", s), 2),
    "hasPrefix": (lambda p, s: _str_arg("hasPrefix()", s).startswith(_str_arg("", p)), 2),
    "hasSuffix": (lambda p, s: _str_arg("hasSuffix()", s).endswith(_str_arg("", p)), 2),
    "replace": (
        lambda old, new, s: _str_arg("replace()", s).replace(
            _str_arg("replace()", old), _str_arg("replace()", new)
        ),
        3,
    ),
    "substr": (_substr, 3),
    "trunc": (_trunc, 2),
    "repeat": (_repeat, 2),
    "quote": (lambda s: json.dumps(_to_string(s)), 1),
    "squote": (lambda s: f"'{_to_string(s)}'", 1),
    "toString": (_to_string, 1),
    "default": (lambda d, v: d if _empty(v) else v, 2),
    "empty": (_empty, 1),
    "regexMatch": (lambda p, s: _matches(_str_arg("regexMatch()", s), p), 2),
}


#: name -> (implementation, number of arguments). ``now`` is bound per evaluation.
_FUNCTIONS: Final[dict[str, tuple[Callable[..., object] | None, int]]] = {
    "now": (None, 0),
    "duration": (_duration, 1),
    "len": (_len, 1),
    "abs": (_abs, 1),
    "int": (_int, 1),
    "float": (_float, 1),
    "lower": (_string_function("lower()", str.lower), 1),
    "upper": (_string_function("upper()", str.upper), 1),
    "trim": (_string_function("trim()", str.strip), 1),
    # Argo's additions to the environment (util/expr/env GetFuncMap).
    "asInt": (lambda v: _int(v), 1),
    "asFloat": (lambda v: _float(v), 1),
    "toJson": (_to_json, 1),
    **{f"sprig.{name}": entry for name, entry in _SPRIG.items()},
}
#: expr-lang builtins taking predicates/closures, which this evaluator does not support.
_PREDICATE_BUILTINS: Final = frozenset(
    {
        "all",
        "none",
        "any",
        "one",
        "filter",
        "map",
        "count",
        "sum",
        "find",
        "findIndex",
        "findLast",
        "findLastIndex",
        "groupBy",
        "sortBy",
        "reduce",
    }
)


def _time_arg(method: str, value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    raise _Fail(f"{method}() expects a time argument, got {_type_name(value)}")


def _duration_method(name: str, unit_seconds: float) -> Callable[..., object]:
    def apply(receiver: object) -> float:
        if isinstance(receiver, timedelta):
            return receiver.total_seconds() / unit_seconds
        raise _Fail(f"type {_type_name(receiver)} has no method {name}")

    return apply


def _time_method(
    name: str, function: Callable[[datetime, object], object]
) -> Callable[..., object]:
    def apply(receiver: object, argument: object) -> object:
        if isinstance(receiver, datetime):
            return function(receiver, argument)
        raise _Fail(f"type {_type_name(receiver)} has no method {name}")

    return apply


def _milliseconds(receiver: object) -> int:
    if isinstance(receiver, timedelta):
        return receiver // timedelta(milliseconds=1)
    raise _Fail(f"type {_type_name(receiver)} has no method Milliseconds")


def _unix(receiver: object) -> int:
    if isinstance(receiver, datetime):
        return math.floor(receiver.timestamp())
    raise _Fail(f"type {_type_name(receiver)} has no method Unix")


def _add_duration(receiver: datetime, argument: object) -> datetime:
    if isinstance(argument, timedelta):
        return receiver + argument
    raise _Fail(f"Add() expects a duration argument, got {_type_name(argument)}")


def _time_field(name: str, read: Callable[[datetime], int]) -> Callable[..., object]:
    """Go's time.Time accessors (`now().Hour()`), read in UTC: Argo's controller runs in
    UTC, and times here are UTC."""

    def apply(receiver: object) -> int:
        if isinstance(receiver, datetime):
            return read(receiver.astimezone(UTC))
        raise _Fail(f"type {_type_name(receiver)} has no method {name}")

    return apply


#: method name -> (implementation taking the receiver first, number of arguments).
_METHODS: Final[dict[str, tuple[Callable[..., object], int]]] = {
    "Seconds": (_duration_method("Seconds", 1.0), 0),
    "Minutes": (_duration_method("Minutes", 60.0), 0),
    "Hours": (_duration_method("Hours", 3600.0), 0),
    "Milliseconds": (_milliseconds, 0),
    "Unix": (_unix, 0),
    "Before": (_time_method("Before", lambda t, u: t < _time_arg("Before", u)), 1),
    "After": (_time_method("After", lambda t, u: t > _time_arg("After", u)), 1),
    "Equal": (_time_method("Equal", lambda t, u: t == _time_arg("Equal", u)), 1),
    "Sub": (_time_method("Sub", lambda t, u: t - _time_arg("Sub", u)), 1),
    "Add": (_time_method("Add", _add_duration), 1),
    "Year": (_time_field("Year", lambda t: t.year), 0),
    "Month": (_time_field("Month", lambda t: t.month), 0),
    "Day": (_time_field("Day", lambda t: t.day), 0),
    "Hour": (_time_field("Hour", lambda t: t.hour), 0),
    "Minute": (_time_field("Minute", lambda t: t.minute), 0),
    "Second": (_time_field("Second", lambda t: t.second), 0),
    "Nanosecond": (_time_field("Nanosecond", lambda t: t.microsecond * 1000), 0),
    "YearDay": (_time_field("YearDay", lambda t: t.timetuple().tm_yday), 0),
    # Go's Weekday counts from Sunday = 0.
    "Weekday": (_time_field("Weekday", lambda t: (t.weekday() + 1) % 7), 0),
    "UnixMilli": (_time_field("UnixMilli", lambda t: math.floor(t.timestamp() * 1000)), 0),
}

_FUNCTION_PREFIX: Final = "fn:"  # ':' cannot occur in an expr-lang identifier
_METHOD_PREFIX: Final = "method:"


# --------------------------------------------------------------------------- custom nodes


class _Member(ast.expr):
    """``value.key`` / ``value[key]``: map lookup by key, array lookup by index."""

    _fields = ("value", "key")
    value: ast.expr
    key: ast.expr

    def __init__(self, value: ast.expr, key: ast.expr, path: str | None) -> None:
        super().__init__()
        self.value = value
        self.key = key
        self.path = path  # e.g. "cronworkflow.labels.app", for messages


class _Coalesce(ast.expr):
    """``left ?? right``: ``right`` only when ``left`` is nil."""

    _fields = ("left", "right")
    left: ast.expr
    right: ast.expr

    def __init__(self, left: ast.expr, right: ast.expr) -> None:
        super().__init__()
        self.left = left
        self.right = right


def _path_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, _Member):
        return node.path
    return None


# --------------------------------------------------------------------------- lexer

_IDENT_WORDS_AS_OPERATORS: Final = frozenset(
    {"not", "in", "or", "and", "matches", "contains", "startsWith", "endsWith", "let", "if", "else"}
)
_NEGATABLE: Final = frozenset({"in", "matches", "contains", "startsWith", "endsWith"})
_SIMPLE_ESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "ident", "number", "string", "op", "bracket", "eof"
    value: str  # source text (operators, identifiers) or a description
    position: int  # offset in the original source
    literal: int | float | str | None = None  # the value of a number or string


def _is_ident_char(ch: str) -> bool:
    return ch.isalpha() or ch.isdecimal() or ch in "_$"


def _describe(token: _Token) -> str:
    return "end of expression" if token.kind == "eof" else f"token {token.value!r}"


def _lex(text: str, start: int, end: int) -> list[_Token]:
    tokens: list[_Token] = []
    i = start
    while i < end:
        ch = text[i]
        nxt = text[i + 1] if i + 1 < end else ""
        if ch.isspace():
            i += 1
        elif ch in "'\"":
            j, value = _scan_string(text, i, end)
            tokens.append(_Token("string", text[i:j], i, value))
            i = j
        elif ch == "`":
            close = text.find("`", i + 1, end)
            if close < 0:
                raise _SyntaxFail("literal not terminated", i)
            tokens.append(_Token("string", text[i : close + 1], i, text[i + 1 : close]))
            i = close + 1
        elif "0" <= ch <= "9" or (ch == "." and nxt != "" and "0" <= nxt <= "9"):
            j = _scan_number(text, i, end)
            tokens.append(_Token("number", text[i:j], i, _number_value(text[i:j], i)))
            i = j
        elif ch == "/" and nxt == "/":
            newline = text.find("\n", i, end)
            i = end if newline < 0 else newline + 1
        elif ch == "/" and nxt == "*":
            close = text.find("*/", i + 2, end)
            if close < 0:
                raise _SyntaxFail("unclosed comment", i)
            i = close + 2
        elif ch + nxt in ("??", "?.", "||", "::", ".."):
            tokens.append(_Token("op", ch + nxt, i))
            i += 2
        elif ch in "&!=*<>" and nxt != "" and nxt in "&=*":
            tokens.append(_Token("op", ch + nxt, i))
            i += 2
        elif ch in "([{)]}":
            tokens.append(_Token("bracket", ch, i))
            i += 1
        elif ch in ",;%+-^?|:#/&!=*<>.":
            tokens.append(_Token("op", ch, i))
            i += 1
        elif _is_ident_char(ch):
            j = i + 1
            while j < end and _is_ident_char(text[j]):
                j += 1
            word = text[i:j]
            kind = "op" if word in _IDENT_WORDS_AS_OPERATORS else "ident"
            tokens.append(_Token(kind, word, i))
            i = j
        else:
            raise _SyntaxFail(f"unrecognized character {ch!r}", i)
    tokens.append(_Token("eof", "", end))
    return tokens


def _scan_string(text: str, start: int, end: int) -> tuple[int, str]:
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < end:
        ch = text[i]
        if ch == quote:
            return i + 1, "".join(out)
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= end:
            break
        escape = text[i + 1]
        if escape in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[escape])
            i += 2
        elif escape in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[escape]
            digits = text[i + 2 : i + 2 + width]
            if len(digits) != width or not set(digits) <= _HEX:
                raise _SyntaxFail("invalid char escape", i)
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise _SyntaxFail("invalid char escape", i)
            out.append(chr(code))
            i += 2 + width
        elif escape in "01234567":
            digits = text[i + 1 : i + 4]
            if len(digits) != 3 or not set(digits) <= set("01234567") or int(digits, 8) > 255:
                raise _SyntaxFail("invalid char escape", i)
            out.append(chr(int(digits, 8)))
            i += 4
        else:
            raise _SyntaxFail("invalid char escape", i)
    raise _SyntaxFail("literal not terminated", start)


def _scan_number(text: str, start: int, end: int) -> int:
    digits = "0123456789_"
    i = start
    if text[i] == "0" and i + 1 < end and text[i + 1] in "xXoObB":
        digits = {"x": "0123456789abcdefABCDEF_", "o": "01234567_", "b": "01_"}[text[i + 1].lower()]
        i += 2
    while i < end and text[i] in digits:
        i += 1
    if i < end and text[i] == "." and not (i + 1 < end and text[i + 1] == "."):
        i += 1
        while i < end and text[i] in digits:
            i += 1
    if i < end and text[i] in "eE":
        i += 1
        if i < end and text[i] in "+-":
            i += 1
        while i < end and text[i] in digits:
            i += 1
    if i < end and _is_ident_char(text[i]):
        raise _SyntaxFail(f"bad number syntax: {text[start : i + 1]!r}", start)
    return i


def _number_value(word: str, position: int) -> int | float:
    raw = word.replace("_", "")
    lowered = raw.lower()
    try:
        if lowered.startswith("0x"):
            value: int | float = int(raw[2:], 16)
        elif "." in lowered or "e" in lowered:
            value = float(raw)
            if not math.isfinite(value):
                raise _SyntaxFail("float literal is too large", position)
            return value
        elif lowered.startswith("0b"):
            value = int(raw[2:], 2)
        elif lowered.startswith("0o"):
            value = int(raw[2:], 8)
        else:
            value = int(raw, 10)
    except ValueError:
        raise _SyntaxFail(f"invalid number literal {word!r}", position) from None
    if value > _INT64_MAX:
        raise _SyntaxFail("integer literal is too large", position)
    return value


# --------------------------------------------------------------------------- parser

#: expr-lang's binary operators: precedence, right-associative?
_BINARY: Final[dict[str, tuple[int, bool]]] = {
    "|": (0, False),
    "or": (10, False),
    "||": (10, False),
    "and": (15, False),
    "&&": (15, False),
    "==": (20, False),
    "!=": (20, False),
    "<": (20, False),
    ">": (20, False),
    ">=": (20, False),
    "<=": (20, False),
    "in": (20, False),
    "matches": (20, False),
    "contains": (20, False),
    "startsWith": (20, False),
    "endsWith": (20, False),
    "..": (25, False),
    "+": (30, False),
    "-": (30, False),
    "*": (60, False),
    "/": (60, False),
    "%": (60, False),
    "**": (100, True),
    "^": (100, True),
    "??": (500, False),
}
_UNARY: Final[dict[str, int]] = {"not": 50, "!": 50, "-": 90, "+": 90}
_COMPARISON_PRECEDENCE: Final = 20
_UNSUPPORTED_OPERATORS: Final = {
    "|": "the pipe operator '|' is not supported",
    "..": "ranges ('..') are not supported",
}



def _bool_constant(node: ast.expr) -> bool | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    return None


def _fold_logic(conjunction: bool, left: ast.expr, right: ast.expr) -> ast.expr | None:
    """expr-lang's optimizer (optimizer/fold.go) rewrites `x && false` to false, `x || true`
    to true and drops a neutral `true &&` / `false ||` before anything runs, so `x` is never
    evaluated: `(now() - cronworkflow.lastScheduledTime).Seconds() < 0 && false` is false in
    Argo even before the first run, where evaluating `x` would fail. None: nothing to fold."""
    if any(isinstance(n, ast.Constant) and not isinstance(n.value, bool) for n in (left, right)):
        return None  # expr-lang's type check refuses `1 && true` before it folds anything
    a, b = _bool_constant(left), _bool_constant(right)
    neutral, absorbing = (True, False) if conjunction else (False, True)
    if a is neutral:
        return right
    if b is neutral:
        return left
    if absorbing in (a, b):
        return ast.Constant(value=absorbing)
    return None

class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self._tokens = tokens
        self._index = 0
        self._nesting = 0

    @property
    def _current(self) -> _Token:
        return self._tokens[self._index]

    def _peek(self) -> _Token:
        return self._tokens[min(self._index + 1, len(self._tokens) - 1)]

    def _advance(self) -> _Token:
        token = self._current
        if token.kind != "eof":
            self._index += 1
        return token

    def _is(self, kind: str, *values: str) -> bool:
        token = self._current
        return token.kind == kind and (not values or token.value in values)

    def _fail(self, reason: str, token: _Token | None = None) -> NoReturn:
        raise _SyntaxFail(reason, (token or self._current).position)

    def _unexpected(self, token: _Token | None = None) -> NoReturn:
        token = token or self._current
        self._fail(f"unexpected {_describe(token)}", token)

    def _expect(self, kind: str, value: str) -> None:
        if not self._is(kind, value):
            self._unexpected()
        self._advance()

    def parse(self) -> ast.expr:
        if self._is("eof"):
            self._fail("empty expression")
        node = self._expression(0)
        if not self._is("eof"):
            self._unexpected()
        return node

    def _expression(self, precedence: int) -> ast.expr:
        self._nesting += 1
        if self._nesting > _MAX_NESTING:
            self._fail("expression is nested too deeply")
        try:
            if precedence == 0 and self._is("op", "let"):
                self._fail("'let' declarations are not supported")
            left = self._primary()
            previous = ""
            while self._is("op"):
                token = self._current
                symbol = token.value
                negate = symbol == "not"
                if negate:
                    follower = self._peek()
                    if follower.kind != "op" or follower.value not in _NEGATABLE:
                        self._unexpected(follower)
                    symbol = follower.value
                info = _BINARY.get(symbol)
                if info is None or info[0] < precedence:
                    break
                if negate:
                    self._advance()
                operator_token = self._advance()
                if symbol in _UNSUPPORTED_OPERATORS:
                    self._fail(_UNSUPPORTED_OPERATORS[symbol], operator_token)
                if previous == "??" and symbol != "??":
                    self._fail(
                        f"operator {symbol!r} and coalesce expressions (??) cannot be mixed;"
                        " wrap either in parentheses",
                        operator_token,
                    )
                if symbol in _COMPARE_OPS and not negate:
                    left = self._comparison(left, symbol)
                else:
                    next_precedence = info[0] if info[1] else info[0] + 1
                    left = self._binary(symbol, negate, left, self._expression(next_precedence))
                previous = symbol
            if precedence == 0:
                left = self._conditional(left)
            return left
        finally:
            self._nesting -= 1

    def _comparison(self, left: ast.expr, symbol: str) -> ast.expr:
        """``a < b <= c`` chains like expr-lang (and Python): ``a < b && b <= c``."""
        ops: list[ast.cmpop] = []
        comparators: list[ast.expr] = []
        while True:
            ops.append(_COMPARE_OPS[symbol]())
            comparators.append(self._expression(_COMPARISON_PRECEDENCE + 1))
            if not (self._is("op") and self._current.value in _BINARY):
                break
            symbol = self._current.value
            if _BINARY[symbol][0] != _COMPARISON_PRECEDENCE:
                break
            token = self._advance()
            if symbol in _UNSUPPORTED_OPERATORS:
                self._fail(_UNSUPPORTED_OPERATORS[symbol], token)
        return ast.Compare(left=left, ops=ops, comparators=comparators)

    @staticmethod
    def _binary(symbol: str, negate: bool, left: ast.expr, right: ast.expr) -> ast.expr:
        # (the boolean folding below is expr-lang's optimizer, applied as the tree is built)
        if negate:
            return ast.Compare(left=left, ops=[_NEGATED_COMPARE_OPS[symbol]()], comparators=[right])
        if symbol in ("||", "or", "&&", "and"):
            kind: type[ast.boolop] = ast.Or if symbol in ("||", "or") else ast.And
            if (folded := _fold_logic(kind is ast.And, left, right)) is not None:
                return folded
            if isinstance(left, ast.BoolOp) and isinstance(left.op, kind):
                return ast.BoolOp(op=kind(), values=[*left.values, right])
            return ast.BoolOp(op=kind(), values=[left, right])
        if symbol == "??":
            return _Coalesce(left, right)
        return ast.BinOp(left=left, op=_ARITHMETIC_OPS[symbol](), right=right)

    def _conditional(self, node: ast.expr) -> ast.expr:
        while self._is("op", "?"):
            self._advance()
            if self._is("op", ":"):
                self._fail("the '?:' shorthand is not supported")
            body = self._expression(0)
            self._expect("op", ":")
            orelse = self._expression(0)
            node = ast.IfExp(test=node, body=body, orelse=orelse)
        return node

    def _primary(self) -> ast.expr:
        token = self._current
        if token.kind == "op" and token.value in _UNARY:
            self._advance()
            operand = self._expression(_UNARY[token.value])
            op: ast.unaryop
            if token.value in ("!", "not"):
                op = ast.Not()
            elif token.value == "-":
                op = ast.USub()
            else:
                op = ast.UAdd()
            return self._postfix(ast.UnaryOp(op=op, operand=operand))
        if self._is("bracket", "("):
            self._advance()
            inner = self._expression(0)
            self._expect("bracket", ")")
            return self._postfix(inner)
        if self._is("op", "#", "."):
            self._fail("predicate syntax ('#', '.') is not supported")
        if self._is("op", "::"):
            self._fail("'::' calls are not supported")
        return self._secondary()

    def _secondary(self) -> ast.expr:
        token = self._current
        node: ast.expr
        if token.kind == "ident":
            self._advance()
            constants: dict[str, bool | None] = {"true": True, "false": False, "nil": None}
            if token.value in constants:
                return ast.Constant(value=constants[token.value])
            if self._is("bracket", "("):
                node = self._call(token)
            else:
                node = ast.Name(id=token.value, ctx=ast.Load())
        elif token.kind in ("number", "string"):
            self._advance()
            node = ast.Constant(value=token.literal)
        elif self._is("bracket", "["):
            node = self._array()
        elif self._is("bracket", "{"):
            self._fail("map literals are not supported")
        else:
            self._unexpected()
        return self._postfix(node)

    def _arguments(self) -> list[ast.expr]:
        self._expect("bracket", "(")
        arguments: list[ast.expr] = []
        while not self._is("bracket", ")"):
            if arguments:
                self._expect("op", ",")
                if self._is("bracket", ")"):
                    break
            arguments.append(self._expression(0))
        self._expect("bracket", ")")
        return arguments

    @staticmethod
    def _arity(what: str, expected: int, arguments: list[ast.expr], token: _Token) -> None:
        if len(arguments) != expected:
            plural = "" if expected == 1 else "s"
            raise _SyntaxFail(
                f"{what} takes {expected} argument{plural}, got {len(arguments)}",
                token.position,
            )

    def _call(self, token: _Token) -> ast.expr:
        name = token.value
        if name in _PREDICATE_BUILTINS:
            self._fail(f"function {name!r} is not supported", token)
        if name not in _FUNCTIONS:
            self._fail(f"unknown function {name!r}", token)
        arguments = self._arguments()
        self._arity(f"{name}()", _FUNCTIONS[name][1], arguments, token)
        function = ast.Name(id=_FUNCTION_PREFIX + name, ctx=ast.Load())
        return ast.Call(func=function, args=arguments, keywords=[])

    def _array(self) -> ast.expr:
        self._expect("bracket", "[")
        elements: list[ast.expr] = []
        while not self._is("bracket", "]"):
            if elements:
                self._expect("op", ",")
                if self._is("bracket", "]"):
                    break
            elements.append(self._expression(0))
        self._expect("bracket", "]")
        return ast.List(elts=elements, ctx=ast.Load())

    def _postfix(self, node: ast.expr) -> ast.expr:
        while True:
            token = self._current
            if token.kind == "op" and token.value == ".":
                self._advance()
                name_token = self._current
                if not (
                    name_token.kind == "ident"
                    or (name_token.kind == "op" and name_token.value.isidentifier())
                ):
                    self._fail("expected a name after '.'", name_token)
                self._advance()
                name = name_token.value
                if name.startswith("__"):
                    self._fail(f"access to {name!r} is not allowed", name_token)
                if self._is("bracket", "(") and isinstance(node, ast.Name) and node.id == "sprig":
                    function_name = f"sprig.{name}"
                    if function_name not in _FUNCTIONS:
                        self._fail(f"unknown function {function_name!r}", name_token)
                    arguments = self._arguments()
                    self._arity(
                        f"{function_name}()", _FUNCTIONS[function_name][1], arguments, name_token
                    )
                    function = ast.Name(id=_FUNCTION_PREFIX + function_name, ctx=ast.Load())
                    node = ast.Call(func=function, args=arguments, keywords=[])
                elif self._is("bracket", "("):
                    if name not in _METHODS:
                        self._fail(f"unknown method {name!r}", name_token)
                    arguments = self._arguments()
                    self._arity(f"{name}()", _METHODS[name][1], arguments, name_token)
                    method = ast.Name(id=_METHOD_PREFIX + name, ctx=ast.Load())
                    node = ast.Call(func=method, args=[node, *arguments], keywords=[])
                else:
                    base = _path_of(node)
                    path = None if base is None else f"{base}.{name}"
                    node = _Member(node, ast.Constant(value=name), path)
            elif token.kind == "op" and token.value == "?.":
                self._fail("optional chaining ('?.') is not supported")
            elif token.kind == "bracket" and token.value == "[":
                self._advance()
                if self._is("op", ":"):
                    self._fail("slices are not supported")
                key = self._expression(0)
                if self._is("op", ":"):
                    self._fail("slices are not supported")
                self._expect("bracket", "]")
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    if key.value.startswith("__"):
                        self._fail(f"access to {key.value!r} is not allowed", token)
                base = _path_of(node)
                path = None
                if base is not None and isinstance(key, ast.Constant):
                    path = f"{base}[{key.value!r}]"
                node = _Member(node, key, path)
            else:
                return node


def _unwrap(source: str) -> tuple[int, int]:
    """Offsets of the expression inside an optional ``{{= ... }}`` / ``{{ ... }}`` wrapper."""
    start, end = 0, len(source)
    while start < end and source[start].isspace():
        start += 1
    while end > start and source[end - 1].isspace():
        end -= 1
    if end - start >= 4 and source.startswith("{{", start) and source.endswith("}}", start, end):
        start, end = start + 2, end - 2
        if start < end and source[start] == "=":
            start += 1
    return start, end


def _depth(tree: ast.AST) -> int:
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


@lru_cache(maxsize=512)
def _compile(source: str) -> ast.expr:
    start, end = _unwrap(source)
    try:
        tree = _Parser(_lex(source, start, end)).parse()
    except _SyntaxFail as exc:
        raise _error("parse", source, f"{exc.reason} (at column {exc.position + 1})") from None
    except RecursionError:
        raise _error("parse", source, "expression is nested too deeply") from None
    except Exception as exc:  # defence in depth: nothing but ExpressionError escapes
        raise _error("parse", source, str(exc) or type(exc).__name__) from exc
    if _depth(tree) > _MAX_DEPTH:
        raise _error("parse", source, "expression is nested too deeply")
    return tree


# --------------------------------------------------------------------------- evaluation

#: The simpleeval handlers kept; everything else simpleeval knows (attributes, assignments,
#: comprehensions, f-strings, ...) is switched off even though the parser never emits it.
_LIBRARY_NODES: Final = (ast.Constant, ast.Name, ast.UnaryOp, ast.BinOp, ast.Compare, ast.Call)


class _Evaluation:
    """One evaluation: a simpleeval evaluator bound to `variables`."""

    def __init__(self, variables: Mapping[str, object]) -> None:
        self._variables = variables
        functions: dict[str, Callable[..., object]] = {}
        for name, (function, _) in _FUNCTIONS.items():
            functions[_FUNCTION_PREFIX + name] = function or self._now
        for name, (method, _) in _METHODS.items():
            functions[_METHOD_PREFIX + name] = method
        evaluator = simpleeval.SimpleEval(
            operators=dict(_OPERATORS), functions=functions, names=variables
        )
        nodes: dict[type, Callable[..., object]] = {
            kind: evaluator.nodes[kind] for kind in _LIBRARY_NODES
        }
        nodes.update(
            {
                ast.BoolOp: self._logic,
                ast.IfExp: self._if,
                ast.List: self._array,
                _Member: self._member,
                _Coalesce: self._coalesce,
            }
        )
        evaluator.nodes = nodes
        self._evaluator = evaluator

    def run(self, source: str, tree: ast.expr) -> object:
        result: object = self._evaluator.eval(source, previously_parsed=tree)
        return result

    def _eval(self, node: ast.AST) -> object:
        value: object = self._evaluator._eval(node)
        return value

    def _now(self) -> datetime:
        value = self._variables.get(NOW_VARIABLE)
        if isinstance(value, datetime):
            return _as_utc(value)
        raise _Fail(
            "now() is unavailable: the caller supplied no evaluation time"
            f" (a datetime in variable {NOW_VARIABLE!r})"
        )

    def _logic(self, node: ast.BoolOp) -> bool:
        conjunction = isinstance(node.op, ast.And)
        for operand in node.values:
            value = self._eval(operand)
            if not isinstance(value, bool):
                symbol = "&&" if conjunction else "||"
                raise _Fail(
                    f"invalid operation: {symbol} needs bool operands, got {_type_name(value)}"
                )
            if value is not conjunction:
                return value
        return conjunction

    def _if(self, node: ast.IfExp) -> object:
        test = self._eval(node.test)
        if not isinstance(test, bool):
            raise _Fail(f"the condition of '? :' must be a bool, got {_type_name(test)}")
        return self._eval(node.body if test else node.orelse)

    def _array(self, node: ast.List) -> list[object]:
        return [self._eval(element) for element in node.elts]

    def _coalesce(self, node: _Coalesce) -> object:
        value = self._eval(node.left)
        return self._eval(node.right) if value is None else value

    def _member(self, node: _Member) -> object:
        container = self._eval(node.value)
        key = self._eval(node.key)
        if isinstance(key, str) and key.startswith("__"):
            raise _Fail(f"access to {key!r} is not allowed")
        if isinstance(container, Mapping) and not isinstance(key, Hashable):
            raise _Fail(f"invalid map key of type {_type_name(key)}")
        if isinstance(container, _Record):
            if isinstance(key, str) and key in container:
                return container[key]
            raise _Fail(f"unknown name {node.path or key!r}")
        if isinstance(container, _StringMap):
            return container.get(key, "") if isinstance(key, str) else ""
        if isinstance(container, Mapping):
            return container.get(key)
        if isinstance(container, list | tuple):
            if not isinstance(key, int) or isinstance(key, bool):
                raise _Fail(f"array index must be an int, got {_type_name(key)}")
            index = key + len(container) if key < 0 else key
            if not 0 <= index < len(container):
                raise _Fail(f"index out of range: {key} (array length {len(container)})")
            return container[index]
        where = _path_of(node.value)
        suffix = f" ({where})" if where else ""
        raise _Fail(f"cannot fetch {_show_value(key)} from {_type_name(container)}{suffix}")
