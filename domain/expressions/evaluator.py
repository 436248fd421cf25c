"""Evaluation of a parsed expression against the caller's variables, and the public
`evaluate`/`evaluate_bool` entry points that turn every failure into `ExpressionError`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Hashable, Mapping
from datetime import datetime
from typing import Final

import simpleeval  # type: ignore[import-untyped]

from domain.expressions.builtins import FUNCTION_PREFIX, FUNCTIONS, METHOD_PREFIX, METHODS
from domain.expressions.errors import EvaluationFailure, checked_source, expression_error
from domain.expressions.operators import OPERATORS
from domain.expressions.parser import compile_expression
from domain.expressions.syntax import Coalesce, Member, path_of
from domain.expressions.values import Record, StringMap, as_utc, show_value, type_name

#: Name of the variable holding the evaluation instant that ``now()`` returns.
NOW_VARIABLE: Final = "now"


def evaluate(source: str, variables: Mapping[str, object]) -> object:
    """Evaluate `source` against `variables` and return the value.

    Values are plain Python: int, float, str, bool, None (``nil``), list, mappings,
    `datetime` (times) and `timedelta` (durations).
    """
    tree = compile_expression(checked_source(source))
    try:
        return _Evaluation(variables).run(source, tree)
    except EvaluationFailure as exc:
        raise expression_error("evaluate", source, exc.reason) from exc
    except simpleeval.NameNotDefined as exc:
        raise expression_error("evaluate", source, f"unknown name {exc.name!r}") from exc
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


#: The simpleeval handlers kept; everything else simpleeval knows (attributes, assignments,
#: comprehensions, f-strings, ...) is switched off even though the parser never emits it.
_LIBRARY_NODES: Final = (ast.Constant, ast.Name, ast.UnaryOp, ast.BinOp, ast.Compare, ast.Call)


class _Evaluation:
    """One evaluation: a simpleeval evaluator bound to `variables`."""

    def __init__(self, variables: Mapping[str, object]) -> None:
        self._variables = variables
        functions: dict[str, Callable[..., object]] = {}
        for name, (function, _) in FUNCTIONS.items():
            functions[FUNCTION_PREFIX + name] = function or self._now
        for name, (method, _) in METHODS.items():
            functions[METHOD_PREFIX + name] = method
        evaluator = simpleeval.SimpleEval(
            operators=dict(OPERATORS), functions=functions, names=variables
        )
        nodes: dict[type, Callable[..., object]] = {
            kind: evaluator.nodes[kind] for kind in _LIBRARY_NODES
        }
        nodes.update(
            {
                ast.BoolOp: self._logic,
                ast.IfExp: self._if,
                ast.List: self._array,
                Member: self._member,
                Coalesce: self._coalesce,
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
            return as_utc(value)
        raise EvaluationFailure(
            "now() is unavailable: the caller supplied no evaluation time"
            f" (a datetime in variable {NOW_VARIABLE!r})"
        )

    def _logic(self, node: ast.BoolOp) -> bool:
        conjunction = isinstance(node.op, ast.And)
        for operand in node.values:
            value = self._eval(operand)
            if not isinstance(value, bool):
                symbol = "&&" if conjunction else "||"
                raise EvaluationFailure(
                    f"invalid operation: {symbol} needs bool operands, got {type_name(value)}"
                )
            if value is not conjunction:
                return value
        return conjunction

    def _if(self, node: ast.IfExp) -> object:
        test = self._eval(node.test)
        if not isinstance(test, bool):
            raise EvaluationFailure(f"the condition of '? :' must be a bool, got {type_name(test)}")
        return self._eval(node.body if test else node.orelse)

    def _array(self, node: ast.List) -> list[object]:
        return [self._eval(element) for element in node.elts]

    def _coalesce(self, node: Coalesce) -> object:
        value = self._eval(node.left)
        return self._eval(node.right) if value is None else value

    def _member(self, node: Member) -> object:
        container = self._eval(node.value)
        key = self._eval(node.key)
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
