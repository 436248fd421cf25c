"""Bounds on the arguments of the conversion functions (`duration()`, `float()`, `int()`).

Their regular expressions take time that grows with the square (or cube) of a long argument,
so one CronWorkflow whose `when` read a 3,000-digit annotation stopped every fire of every
CronWorkflow for minutes. Each argument is bounded here, so each call is cheap; the whole
budget and its use at admission are in domain/expression_budget.py.
"""

from __future__ import annotations

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
