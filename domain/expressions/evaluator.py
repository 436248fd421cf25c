"""Evaluation of a parsed expression against the caller's variables, and the public
`evaluate`/`evaluate_bool` entry points that turn every failure into `ExpressionError`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from datetime import datetime
from typing import Final

from cronsource.domain.expressions.builtins import FUNCTIONS, METHODS
from cronsource.domain.expressions.errors import EvaluationFailure, checked_source, expression_error
from cronsource.domain.expressions.operators import ARITHMETIC, COMPARISONS, UNARY_OPERATORS
from cronsource.domain.expressions.parser import compile_expression
from cronsource.domain.expressions.syntax import (
    Array,
    Binary,
    Call,
    Coalesce,
    Comparison,
    Conditional,
    Literal,
    Logic,
    Member,
    MethodCall,
    Name,
    Node,
    Unary,
    path_of,
)
from cronsource.domain.expressions.values import Record, StringMap, as_utc, show_value, type_name

#: Name of the variable holding the evaluation instant that ``now()`` returns.
NOW_VARIABLE: Final = "now"


def evaluate(source: str, variables: Mapping[str, object]) -> object:
    """Evaluate `source` against `variables` and return the value.

    Values are plain Python: int, float, str, bool, None (``nil``), list, mappings,
    `datetime` (times) and `timedelta` (durations).
    """
    tree = compile_expression(checked_source(source))
    try:
        return _Evaluation(variables).run(tree)
    except EvaluationFailure as exc:
        raise expression_error("evaluate", source, exc.reason) from exc
    except RecursionError as exc:
        raise expression_error("evaluate", source, "expression is nested too deeply") from exc
    except ZeroDivisionError as exc:
        raise expression_error("evaluate", source, "division by zero") from exc
    except Exception as exc:  # the guarantee: nothing but ExpressionError escapes
        raise expression_error("evaluate", source, str(exc) or type(exc).__name__) from exc


def evaluate_bool(source: str, variables: Mapping[str, object]) -> bool:
    """Evaluate `source` and require a bool result."""
    result = evaluate(source, variables)
    if not isinstance(result, bool):
        raise expression_error(
            "evaluate",
            source,
            f"expected a bool result, got {type_name(result)} ({show_value(result)})",
        )
    return result


class _Evaluation:
    """One evaluation: a walk of the tree with `variables` bound (and ``now()`` read from
    them). Only the nodes of domain.expressions.syntax exist, so nothing else can run; member
    access reads maps by key and never calls ``getattr``."""

    def __init__(self, variables: Mapping[str, object]) -> None:
        self._variables = variables

    def run(self, node: Node) -> object:
        match node:
            case Literal(value):
                return value
            case Name(name):
                try:
                    return self._variables[name]
                except (KeyError, TypeError):
                    raise EvaluationFailure(f"unknown name {name!r}") from None
            case Array(elements):
                return [self.run(element) for element in elements]
            case Unary(symbol, operand):
                return UNARY_OPERATORS[symbol](self.run(operand))
            case Binary(symbol, left, right):
                return ARITHMETIC[symbol](self.run(left), self.run(right))
            case Comparison():
                return self._comparison(node)
            case Logic():
                return self._logic(node)
            case Conditional():
                return self._if(node)
            case Coalesce():
                return self._coalesce(node)
            case Member():
                return self._member(node)
            case Call(function, arguments):
                implementation = FUNCTIONS[function][0] or self._now
                return implementation(*(self.run(argument) for argument in arguments))
            case MethodCall(method, receiver, arguments):
                target = self.run(receiver)
                return METHODS[method][0](target, *(self.run(argument) for argument in arguments))

    def _now(self) -> datetime:
        value = self._variables.get(NOW_VARIABLE)
        if isinstance(value, datetime):
            return as_utc(value)
        raise EvaluationFailure(
            "now() is unavailable: the caller supplied no evaluation time"
            f" (a datetime in variable {NOW_VARIABLE!r})"
        )

    def _comparison(self, node: Comparison) -> bool:
        """Each comparison needs the one before it to hold (as ``a < b && b < c``)."""
        right = self.run(node.left)
        for symbol, comparator in zip(node.operators, node.comparators, strict=True):
            left, right = right, self.run(comparator)
            if not COMPARISONS[symbol](left, right):
                return False
        return True

    def _logic(self, node: Logic) -> bool:
        conjunction = node.conjunction
        for operand in node.operands:
            value = self.run(operand)
            if not isinstance(value, bool):
                symbol = "&&" if conjunction else "||"
                raise EvaluationFailure(
                    f"invalid operation: {symbol} needs bool operands, got {type_name(value)}"
                )
            if value is not conjunction:
                return value
        return conjunction

    def _if(self, node: Conditional) -> object:
        test = self.run(node.test)
        if not isinstance(test, bool):
            raise EvaluationFailure(f"the condition of '? :' must be a bool, got {type_name(test)}")
        return self.run(node.body if test else node.orelse)

    def _coalesce(self, node: Coalesce) -> object:
        value = self.run(node.left)
        return self.run(node.right) if value is None else value

    def _member(self, node: Member) -> object:
        container = self.run(node.value)
        key = self.run(node.key)
        if isinstance(key, str) and key.startswith("__"):
            raise EvaluationFailure(f"access to {key!r} is not allowed")
        if isinstance(container, Mapping) and not isinstance(key, Hashable):
            raise EvaluationFailure(f"invalid map key of type {type_name(key)}")
        if isinstance(container, Record):
            if isinstance(key, str) and key in container:
                return container[key]
            raise EvaluationFailure(f"unknown name {node.path or key!r}")
        if isinstance(container, StringMap):
            return container.get(key, "") if isinstance(key, str) else ""
        if isinstance(container, Mapping):
            return container.get(key)
        if isinstance(container, list | tuple):
            if not isinstance(key, int) or isinstance(key, bool):
                raise EvaluationFailure(f"array index must be an int, got {type_name(key)}")
            index = key + len(container) if key < 0 else key
            if not 0 <= index < len(container):
                raise EvaluationFailure(
                    f"index out of range: {key} (array length {len(container)})"
                )
            return container[index]
        where = path_of(node.value)
        suffix = f" ({where})" if where else ""
        raise EvaluationFailure(
            f"cannot fetch {show_value(key)} from {type_name(container)}{suffix}"
        )
