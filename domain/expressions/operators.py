"""expr-lang's operators with Go semantics (no truthiness, no bool arithmetic, int64 results,
Go's sign rule for `%`), keyed by the symbol the syntax tree stores.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Hashable, Mapping
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Final

import re2  # type: ignore[import-untyped]

from cronsource.domain.expressions.errors import EvaluationFailure
from cronsource.domain.expressions.values import MAX_STRING, as_number, checked_number, mismatch


def _add(a: object, b: object) -> object:
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        return checked_number(x + y)
    if isinstance(a, str) and isinstance(b, str):
        if len(a) + len(b) > MAX_STRING:
            raise EvaluationFailure(f"string too long (over {MAX_STRING} characters)")
        return a + b
    if isinstance(a, datetime) and isinstance(b, timedelta):
        return a + b
    if isinstance(a, timedelta) and isinstance(b, datetime):
        return b + a
    if isinstance(a, timedelta) and isinstance(b, timedelta):
        return a + b
    raise mismatch("+", a, b)


def _sub(a: object, b: object) -> object:
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        return checked_number(x - y)
    if isinstance(a, datetime) and isinstance(b, datetime):
        return a - b
    if isinstance(a, datetime) and isinstance(b, timedelta):
        return a - b
    if isinstance(a, timedelta) and isinstance(b, timedelta):
        return a - b
    raise mismatch("-", a, b)


def _mul(a: object, b: object) -> object:
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        return checked_number(x * y)
    raise mismatch("*", a, b)


def _div(a: object, b: object) -> object:
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        if y == 0:
            raise EvaluationFailure("division by zero")
        return x / y
    raise mismatch("/", a, b)


def _mod(a: object, b: object) -> object:
    x, y = as_number(a), as_number(b)
    if isinstance(x, int) and isinstance(y, int):
        if y == 0:
            raise EvaluationFailure("integer divide by zero")
        remainder = abs(x) % abs(y)  # Go: the result takes the dividend's sign
        return -remainder if x < 0 else remainder
    raise mismatch("%", a, b)


def _pow(a: object, b: object) -> object:
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        try:
            return math.pow(x, y)
        except OverflowError:
            raise EvaluationFailure("numeric overflow in **") from None
        except ValueError:
            raise EvaluationFailure("invalid operation: ** (result is not a real number)") from None
    raise mismatch("**", a, b)


def _neg(a: object) -> object:
    x = as_number(a)
    if x is not None:
        return checked_number(-x)
    if isinstance(a, timedelta):
        return -a
    raise mismatch("-", a)


def _pos(a: object) -> object:
    if as_number(a) is not None or isinstance(a, timedelta):
        return a
    raise mismatch("+", a)


def _not(a: object) -> bool:
    if isinstance(a, bool):
        return not a
    raise mismatch("!", a)


def _equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _not_equal(a: object, b: object) -> bool:
    return not _equal(a, b)


def _ordered(a: object, b: object) -> bool:
    if as_number(a) is not None and as_number(b) is not None:
        return True
    return any(isinstance(a, t) and isinstance(b, t) for t in (str, datetime, timedelta))


def _ordering(symbol: str, compare: Callable[[Any, Any], object]) -> Callable[..., bool]:
    def apply(a: object, b: object) -> bool:
        if not _ordered(a, b):
            raise mismatch(symbol, a, b)
        return bool(compare(a, b))

    return apply


def _member_of(item: object, container: object) -> bool:
    if isinstance(container, list | tuple):
        return any(_equal(item, element) for element in container)
    if isinstance(container, Mapping):
        if not isinstance(item, Hashable):
            raise mismatch("in", item, container)
        return item in container
    raise mismatch("in", item, container)


def _not_member_of(item: object, container: object) -> bool:
    return not _member_of(item, container)


def _string_test(symbol: str, test: Callable[[str, str], bool]) -> Callable[..., bool]:
    def apply(a: object, b: object) -> bool:
        if isinstance(a, str) and isinstance(b, str):
            return test(a, b)
        raise mismatch(symbol, a, b)

    return apply


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
        raise EvaluationFailure(f"invalid regular expression {pattern!r}: {why}") from None


def matches(a: object, b: object) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return _regex(b).search(a) is not None
    raise mismatch("matches", a, b)


_contains = _string_test("contains", lambda a, b: b in a)
_starts = _string_test("startsWith", str.startswith)
_ends = _string_test("endsWith", str.endswith)

#: Unary operators, by the symbol the syntax tree stores.
UNARY_OPERATORS: Final[dict[str, Callable[[object], object]]] = {
    "-": _neg,
    "+": _pos,
    "!": _not,
}
#: Arithmetic, by the symbol the syntax tree stores (``^`` is stored as ``**``).
ARITHMETIC: Final[dict[str, Callable[[object, object], object]]] = {
    "+": _add,
    "-": _sub,
    "*": _mul,
    "/": _div,
    "%": _mod,
    "**": _pow,
}
#: Comparisons, by the symbol the syntax tree stores; each returns a bool.
COMPARISONS: Final[dict[str, Callable[[object, object], bool]]] = {
    "==": _equal,
    "!=": _not_equal,
    "<": _ordering("<", operator.lt),
    "<=": _ordering("<=", operator.le),
    ">": _ordering(">", operator.gt),
    ">=": _ordering(">=", operator.ge),
    "in": _member_of,
    "not in": _not_member_of,
    "contains": _contains,
    "not contains": lambda a, b: not _contains(a, b),
    "startsWith": _starts,
    "not startsWith": lambda a, b: not _starts(a, b),
    "endsWith": _ends,
    "not endsWith": lambda a, b: not _ends(a, b),
    "matches": matches,
    "not matches": lambda a, b: not matches(a, b),
}
