"""The syntax tree the parser builds and the evaluator walks: Python's `ast` nodes for what
Python spells the same way, plus nodes for what it does not (member access by key, `??`,
expr-lang's string comparison operators).
"""

from __future__ import annotations

import ast
from typing import Final


class Contains(ast.cmpop):
    pass


class NotContains(ast.cmpop):
    pass


class StartsWith(ast.cmpop):
    pass


class NotStartsWith(ast.cmpop):
    pass


class EndsWith(ast.cmpop):
    pass


class NotEndsWith(ast.cmpop):
    pass


class Matches(ast.cmpop):
    pass


class NotMatches(ast.cmpop):
    pass


COMPARE_OPS: Final[dict[str, type[ast.cmpop]]] = {
    "==": ast.Eq,
    "!=": ast.NotEq,
    "<": ast.Lt,
    "<=": ast.LtE,
    ">": ast.Gt,
    ">=": ast.GtE,
    "in": ast.In,
    "contains": Contains,
    "startsWith": StartsWith,
    "endsWith": EndsWith,
    "matches": Matches,
}
NEGATED_COMPARE_OPS: Final[dict[str, type[ast.cmpop]]] = {
    "in": ast.NotIn,
    "contains": NotContains,
    "startsWith": NotStartsWith,
    "endsWith": NotEndsWith,
    "matches": NotMatches,
}
ARITHMETIC_OPS: Final[dict[str, type[ast.operator]]] = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
    "/": ast.Div,
    "%": ast.Mod,
    "**": ast.Pow,
    "^": ast.Pow,
}


class Member(ast.expr):
    """``value.key`` / ``value[key]``: map lookup by key, array lookup by index."""

    _fields = ("value", "key")
    value: ast.expr
    key: ast.expr

    def __init__(self, value: ast.expr, key: ast.expr, path: str | None) -> None:
        super().__init__()
        self.value = value
        self.key = key
        self.path = path  # e.g. "cronworkflow.labels.app", for messages


class Coalesce(ast.expr):
    """``left ?? right``: ``right`` only when ``left`` is nil."""

    _fields = ("left", "right")
    left: ast.expr
    right: ast.expr

    def __init__(self, left: ast.expr, right: ast.expr) -> None:
        super().__init__()
        self.left = left
        self.right = right


def path_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, Member):
        return node.path
    return None
