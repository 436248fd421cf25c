"""Names in `when` and `stopStrategy` that Argo's expression environment does not define are
never reported on Argo's own tree (its examples, tests and docs, from the Go module cache):
a report there would be a false alarm (the table of typos: tests/unit/test_expression_names.py)."""

from __future__ import annotations

from cronsource.domain.expressions.names import unknown_names
from cronsource.domain.whentemplate import unknown_when_names
from tests.argo import corpus, peer


def test_no_expression_in_argos_own_tree_is_reported() -> None:
    """Argo's examples, tests and docs use only names Argo defines: a report on any of them
    would be a false alarm."""
    expressions = corpus.expressions(peer.source_tree())
    assert len(expressions) >= 10
    for e in expressions:
        check = unknown_when_names if e.kind == "when" else unknown_names
        assert check(e.source) == [], (e.origin, e.source)
