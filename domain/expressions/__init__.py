"""Safe evaluation of Argo's expr-lang conditions (`spec.when`, `spec.stopStrategy.expression`).

Argo writes these in expr-lang syntax (github.com/expr-lang/expr), optionally wrapped in a
template: ``{{= cronworkflow.failed >= 3 }}``. Nothing here calls Python's ``eval``/``compile``.

How it works
------------
1. The ``{{= ... }}`` / ``{{ ... }}`` wrapper is stripped.
2. A small lexer (`tokens`) and Pratt parser (`parser`) that follow expr-lang's own tables
   (operator precedences, literal syntax, ``not in``, chained comparisons) build a tree of
   our own nodes (`syntax`). A real parser is needed rather than token replacement:
   expr-lang's ``!``/``not`` binds tighter than comparisons (``!a in b`` is ``(!a) in b``),
   ``^`` is power, ``//`` starts a comment, and ``??`` has no Python spelling.
3. The `evaluator` walks that tree with operators of expr-lang semantics (`operators`) over
   the value model of `values`. Member and index access never call ``getattr``: maps are
   read by key, so no Python attribute, method or dunder is reachable from an expression.
   Only the functions and methods of `builtins` can be called.

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

from cronsource.domain.expressions.errors import MAX_EXPRESSION_LENGTH, ExpressionError
from cronsource.domain.expressions.evaluator import NOW_VARIABLE, evaluate, evaluate_bool
from cronsource.domain.expressions.parser import validate_expression
from cronsource.domain.expressions.values import cronworkflow_variables

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "NOW_VARIABLE",
    "ExpressionError",
    "cronworkflow_variables",
    "evaluate",
    "evaluate_bool",
    "validate_expression",
]
