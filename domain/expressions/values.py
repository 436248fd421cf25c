"""expr-lang's value model on Python values: which values are numbers, their type names and
shown form in messages, int64 bounds, Go maps with a zero value, and struct-like records.

Also the `cronworkflow` variables Argo exposes, built from those values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final

from cronsource.domain.expressions.errors import EvaluationFailure

#: Longest string an expression may build (`+`, `repeat()`): bounds memory per evaluation.
MAX_STRING: Final = 100_000
_INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


class StringMap(dict[str, str]):
    """A Go map[string]string: a missing key reads as "" (the zero value), not nil."""


class Record(Mapping[str, object]):
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


def as_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def as_number(value: object) -> int | float | None:
    """`value` when it is an int or float (bools are not numbers in expr-lang)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return None


def type_name(value: object) -> str:
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


def show_value(value: object) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def mismatch(symbol: str, *operands: object) -> EvaluationFailure:
    types = " and ".join(type_name(v) for v in operands)
    kind = "types" if len(operands) > 1 else "type"
    return EvaluationFailure(f"invalid operation: {symbol} (mismatched {kind} {types})")


def int64(value: int) -> int:
    if not _INT64_MIN <= value <= INT64_MAX:
        raise EvaluationFailure("integer overflow (result outside int64)")
    return value


def checked_number(value: int | float) -> int | float:
    return int64(value) if isinstance(value, int) else value


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
        "cronworkflow": Record(
            {
                "name": name,
                "namespace": namespace,
                "labels": StringMap(labels),
                # Argo v4.0.5 sets `annotations` to the labels (operator.go expressionEnv:
                # addSetField("annotations", cron.Labels)); results must equal Argo's.
                "annotations": StringMap(labels),
                "failed": failed,
                "succeeded": succeeded,
                "lastScheduledTime": (
                    None if last_scheduled_time is None else as_utc(last_scheduled_time)
                ),
            }
        )
    }
