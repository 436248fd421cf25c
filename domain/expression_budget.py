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

The per-call argument bounds live with the evaluator (domain/expressions/budget.py), which
needs only a one-line hook per function; the check at admission, which runs the evaluator,
lives here, above it.
"""

from __future__ import annotations

from collections.abc import Mapping

from cronsource.domain.expressions import ExpressionError, cronworkflow_variables, evaluate
from cronsource.domain.expressions.budget import BUDGET


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
