"""The one error callers see (`ExpressionError`) and the two internal failures it is made from.

Evaluation and syntax failures carry a reason; the entry points turn them into one
`ExpressionError` whose message names the expression, so no other exception type escapes.
"""

from __future__ import annotations

from typing import Final

#: Longest accepted expression source, wrapper included.
MAX_EXPRESSION_LENGTH: Final = 4096
_SHOWN_SOURCE: Final = 200


class ExpressionError(ValueError):
    """An expression could not be parsed or evaluated; the message names the expression."""


class EvaluationFailure(Exception):
    """Evaluation failure with a user-facing reason (converted to ExpressionError)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SyntaxFailure(Exception):
    """A syntax error at `position` (an offset in the source); reported with its column."""

    def __init__(self, reason: str, position: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.position = position


def _shown(source: str) -> str:
    if len(source) > _SHOWN_SOURCE:
        source = source[:_SHOWN_SOURCE] + "..."
    return repr(source)


def expression_error(action: str, source: str, reason: str) -> ExpressionError:
    return ExpressionError(f"cannot {action} {_shown(source)}: {reason}")


def checked_source(source: object) -> str:
    if not isinstance(source, str):
        raise ExpressionError(f"cannot parse {source!r}: an expression must be a string")
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise expression_error(
            "parse",
            source,
            f"expression is too long ({len(source)} > {MAX_EXPRESSION_LENGTH} characters)",
        )
    return source
