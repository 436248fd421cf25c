"""The functions and methods an expression may call: expr-lang's, Argo's additions and the
deterministic Sprig ones, each with its number of arguments (checked at parse time).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final

from cronsource.domain.durations import parse_duration
from cronsource.domain.expressions.budget import argument_problem
from cronsource.domain.expressions.errors import EvaluationFailure
from cronsource.domain.expressions.operators import matches
from cronsource.domain.expressions.values import (
    MAX_STRING,
    as_number,
    as_utc,
    int64,
    mismatch,
    show_value,
    type_name,
)


def _duration(text: object) -> timedelta:
    if not isinstance(text, str):
        raise mismatch("duration()", text)
    if (too_long := argument_problem("duration()", text)) is not None:
        raise EvaluationFailure(too_long)
    try:
        return parse_duration(text, signed=True)
    except ValueError as exc:
        raise EvaluationFailure(str(exc)) from None


def _len(value: object) -> int:
    if isinstance(value, str | list | tuple | Mapping):
        return len(value)
    raise mismatch("len()", value)


def _abs(value: object) -> object:
    number = as_number(value)
    if number is not None:
        return abs(number)
    if isinstance(value, timedelta):
        return abs(value)
    raise mismatch("abs()", value)


_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
)


def _int(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EvaluationFailure(f"cannot convert {show_value(value)} to int")
        return int64(int(value))
    if isinstance(value, str) and (too_long := argument_problem("int()", value)) is not None:
        raise EvaluationFailure(too_long)
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        return int64(int(value))
    if isinstance(value, str):
        raise EvaluationFailure(f"cannot convert {value!r} to int")
    raise mismatch("int()", value)


def _float(value: object) -> float:
    number = as_number(value)
    if number is not None:
        return float(number)
    if isinstance(value, str) and (too_long := argument_problem("float()", value)) is not None:
        raise EvaluationFailure(too_long)
    if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value):
        return float(value)
    if isinstance(value, str):
        raise EvaluationFailure(f"cannot convert {value!r} to float")
    raise mismatch("float()", value)


def _string_function(symbol: str, function: Callable[[str], str]) -> Callable[[object], str]:
    def apply(value: object) -> str:
        if isinstance(value, str):
            return function(value)
        raise mismatch(symbol, value)

    return apply


def _str_arg(symbol: str, value: object) -> str:
    if isinstance(value, str):
        return value
    raise mismatch(symbol, value)


def _int_arg(symbol: str, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise mismatch(symbol, value)


def _to_string(value: object) -> str:
    """sprig's toString for the values expressions see."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return show_value(value)


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
        raise EvaluationFailure(f"toJson(): {exc}") from None


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return as_utc(value).isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot encode {type_name(value)}")


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
    if n * len(t) > MAX_STRING:
        raise EvaluationFailure("repeat(): the result would be too long")
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
    "regexMatch": (lambda p, s: matches(_str_arg("regexMatch()", s), p), 2),
}


#: name -> (implementation, number of arguments). ``now`` is bound per evaluation.
FUNCTIONS: Final[dict[str, tuple[Callable[..., object] | None, int]]] = {
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
PREDICATE_BUILTINS: Final = frozenset(
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
    raise EvaluationFailure(f"{method}() expects a time argument, got {type_name(value)}")


def _duration_method(name: str, unit_seconds: float) -> Callable[..., object]:
    def apply(receiver: object) -> float:
        if isinstance(receiver, timedelta):
            return receiver.total_seconds() / unit_seconds
        raise EvaluationFailure(f"type {type_name(receiver)} has no method {name}")

    return apply


def _time_method(
    name: str, function: Callable[[datetime, object], object]
) -> Callable[..., object]:
    def apply(receiver: object, argument: object) -> object:
        if isinstance(receiver, datetime):
            return function(receiver, argument)
        raise EvaluationFailure(f"type {type_name(receiver)} has no method {name}")

    return apply


def _milliseconds(receiver: object) -> int:
    if isinstance(receiver, timedelta):
        # Go's int64(d) / 1e6: toward zero, so -1.5ms is -1
        milliseconds = abs(receiver) // timedelta(milliseconds=1)
        return -milliseconds if receiver < timedelta(0) else milliseconds
    raise EvaluationFailure(f"type {type_name(receiver)} has no method Milliseconds")


def _unix(receiver: object) -> int:
    if isinstance(receiver, datetime):
        return math.floor(receiver.timestamp())
    raise EvaluationFailure(f"type {type_name(receiver)} has no method Unix")


def _add_duration(receiver: datetime, argument: object) -> datetime:
    if isinstance(argument, timedelta):
        return receiver + argument
    raise EvaluationFailure(f"Add() expects a duration argument, got {type_name(argument)}")


def _time_field(name: str, read: Callable[[datetime], int]) -> Callable[..., object]:
    """Go's time.Time accessors (`now().Hour()`), read in UTC: Argo's controller runs in
    UTC, and times here are UTC."""

    def apply(receiver: object) -> int:
        if isinstance(receiver, datetime):
            return read(receiver.astimezone(UTC))
        raise EvaluationFailure(f"type {type_name(receiver)} has no method {name}")

    return apply


#: method name -> (implementation taking the receiver first, number of arguments).
METHODS: Final[dict[str, tuple[Callable[..., object], int]]] = {
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
