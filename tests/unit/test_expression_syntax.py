"""The expression package's own bounds: the deepest tree the parser accepts is one the
evaluator walks without running out of stack, and one node deeper is refused at parse time."""

from __future__ import annotations

import pytest

from cronsource.domain.expressions import ExpressionError, evaluate, validate_expression
from cronsource.domain.expressions.parser import compile_expression
from cronsource.domain.expressions.syntax import depth

_DEPTH_LIMIT = 100


def _member_chain(links: int) -> str:
    return "x" + ".y" * links


def test_the_deepest_accepted_tree_evaluates() -> None:
    # a member chain of n links is n Member nodes above a Name, each with a key Literal
    source = _member_chain(_DEPTH_LIMIT - 1)
    assert depth(compile_expression(source)) == _DEPTH_LIMIT
    nested: dict[str, object] = {"y": "leaf"}
    for _ in range(_DEPTH_LIMIT - 2):
        nested = {"y": nested}
    assert evaluate(source, {"x": nested}) == "leaf"


def test_one_node_deeper_is_refused_at_parse_time() -> None:
    with pytest.raises(ExpressionError, match="nested too deeply"):
        validate_expression(_member_chain(_DEPTH_LIMIT))


def test_a_cached_tree_is_shared_and_cannot_be_changed() -> None:
    tree = compile_expression("1 + 2")
    assert compile_expression("1 + 2") is tree
    with pytest.raises(AttributeError):
        tree.left = tree.right  # type: ignore[misc, union-attr]
