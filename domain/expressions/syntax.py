"""The syntax tree the parser builds and the evaluator walks.

Our own nodes rather than Python's `ast`: expr-lang has operators Python does not
(``contains``, ``startsWith``, ``??``, member access by key), so a Python tree needed custom
node types and an evaluator that knew them anyway. Nodes are frozen, so a tree cached per
source text (the parser's cache) cannot be changed by one evaluation for the next.
Operators are kept as their expr-lang spelling (``^`` is stored as ``**``, a negated
``not in`` as ``"not in"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Literal:
    """A number, string, ``true``/``false`` or ``nil`` (None)."""

    value: int | float | str | bool | None


@dataclass(frozen=True, slots=True)
class Name:
    """A top-level variable."""

    name: str


@dataclass(frozen=True, slots=True)
class Array:
    elements: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Unary:
    """``!x`` (also ``not x``), ``-x`` or ``+x``."""

    operator: str
    operand: Node


@dataclass(frozen=True, slots=True)
class Binary:
    """Arithmetic: one of ARITHMETIC_OPERATORS."""

    operator: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Comparison:
    """``a < b <= c``: a chain, true when every adjacent pair holds (evaluated lazily, left
    to right, like expr-lang's ``a < b && b <= c``). Operators are COMPARISON_OPERATORS."""

    left: Node
    operators: tuple[str, ...]
    comparators: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Logic:
    """``a && b && c`` (conjunction) or ``a || b || c``, flattened."""

    conjunction: bool
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Conditional:
    """``test ? body : orelse``."""

    test: Node
    body: Node
    orelse: Node


@dataclass(frozen=True, slots=True)
class Coalesce:
    """``left ?? right``: ``right`` only when ``left`` is nil."""

    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Member:
    """``value.key`` / ``value[key]``: map lookup by key, array lookup by index."""

    value: Node
    key: Node
    path: str | None  # e.g. "cronworkflow.labels.app", for messages


@dataclass(frozen=True, slots=True)
class Call:
    """``len(x)``, ``sprig.trim(x)``: a function of domain.expressions.builtins.FUNCTIONS."""

    function: str
    arguments: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class MethodCall:
    """``d.Seconds()``, ``t.Add(d)``: a method of domain.expressions.builtins.METHODS."""

    method: str
    receiver: Node
    arguments: tuple[Node, ...]


Node = (
    Literal
    | Name
    | Array
    | Unary
    | Binary
    | Comparison
    | Logic
    | Conditional
    | Coalesce
    | Member
    | Call
    | MethodCall
)

#: Comparison operators as source spells them; the negated forms are written ``not <op>``.
COMPARISON_OPERATORS: Final = frozenset(
    {"==", "!=", "<", "<=", ">", ">=", "in", "contains", "startsWith", "endsWith", "matches"}
)
#: Source spelling -> the operator stored (``^`` is ``**``).
ARITHMETIC_OPERATORS: Final = {
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
    "**": "**",
    "^": "**",
}


def children(node: Node) -> tuple[Node, ...]:
    """The direct subexpressions of `node`."""
    match node:
        case Literal() | Name():
            return ()
        case Array(elements):
            return elements
        case Unary(_, operand):
            return (operand,)
        case Binary(_, left, right) | Coalesce(left, right):
            return (left, right)
        case Comparison(left, _, comparators):
            return (left, *comparators)
        case Logic(_, operands):
            return operands
        case Conditional(test, body, orelse):
            return (test, body, orelse)
        case Member(value, key, _):
            return (value, key)
        case Call(_, arguments):
            return arguments
        case MethodCall(_, receiver, arguments):
            return (receiver, *arguments)


def depth(tree: Node) -> int:
    """The number of nodes on the longest path from `tree` to a leaf (without recursing)."""
    deepest = 0
    stack: list[tuple[Node, int]] = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children(node))
    return deepest


def path_of(node: Node) -> str | None:
    """The dotted name of a variable or member chain (for messages), or None."""
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Member):
        return node.path
    return None
