"""Bounds on what one `when`/`stopStrategy` evaluation may cost.

An expression has no loops, its source is at most MAX_EXPRESSION_LENGTH characters, strings
it builds are capped (MAX_STRING, domain/expressions/values.py) and the inputs it can read
are bounded at admission (annotations: 256 KiB in all, domain/objectlimits.py). What was
left unbounded was the conversion functions: `duration()` and `float()` matched regular
expressions whose time grows with the square (or cube) of a long argument, so one
CronWorkflow whose `when` read a 3,000-digit annotation stopped every fire of every
CronWorkflow for minutes. Their arguments are bounded here, so each call is cheap, and a
CronWorkflow over the bound gets a clear error (a `WhenFalse` skip with the message at a
tick), never a stall.

Kept out of domain/expressions/ so the evaluator needs only a one-line hook per function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from cronsource.domain.durations import MAX_DURATION_CHARS

#: Longest text `float()`/`int()` convert: a float64 has 17 significant digits; 128 leaves
#: room for exponents, signs and leading zeros.
MAX_NUMBER_CHARS: Final = 128
#: Longest text `duration()` converts (as `@every` and the annotations take).
MAX_DURATION_ARGUMENT_CHARS: Final = MAX_DURATION_CHARS
#: The phrase every budget refusal carries (how admission tells it from other errors).
BUDGET: Final = "expression cost budget"


def argument_problem(function: str, text: str) -> str | None:
    """Why `function` refuses to convert `text` (its length), or None."""
    limit = MAX_DURATION_ARGUMENT_CHARS if function == "duration()" else MAX_NUMBER_CHARS
    if len(text) > limit:
        return (
            f"{function} argument is {len(text)} characters, longer than the limit of {limit}"
            f" ({BUDGET})"
        )
    return None


def admission_problem(
    source: str | None,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> str | None:
    """Whether `source`, run on the manifest's own labels and annotations (the inputs it
    may read), already exceeds the budget: then admission refuses it rather than every tick
    skipping. Other evaluation errors are left to the tick, where run counts and the time
    are known (a `now()` is unavailable here: the domain reads no clock)."""
    if not source:
        return None
    from cronsource.domain.expressions import ExpressionError, cronworkflow_variables, evaluate

    variables = cronworkflow_variables(
        name=name,
        namespace=namespace,
        labels=labels,
        annotations=annotations,
        failed=0,
        succeeded=0,
        last_scheduled_time=None,
    )
    try:
        evaluate(source, variables)
    except ExpressionError as e:
        if BUDGET in str(e):
            return str(e)
    return None
