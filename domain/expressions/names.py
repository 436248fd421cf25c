"""Names an expression reads that Argo's expression environment does not define.

`when: "{{= cronworkflow.faild < 3 }}"` (a typo of `failed`) parses, so Argo's lint passes
it, and then it fails or reads nil at every tick. Walking the parsed tree finds such names
before that: a top-level name other than `cronworkflow`, and a field of `cronworkflow` that
Argo's `expressionEnv` (workflow/cron/operator.go) does not set. The keys of
`cronworkflow.labels` and `cronworkflow.annotations` are the user's own, so nothing below
those maps is checked. This is advice (a warning at lint and apply): Argo's verdict stays.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from cronsource.domain.expressions.builtins import FUNCTIONS
from cronsource.domain.expressions.errors import checked_source
from cronsource.domain.expressions.parser import compile_expression
from cronsource.domain.expressions.syntax import Literal, Member, Name, Node, children
from cronsource.domain.expressions.values import cronworkflow_variables

ROOT: Final = "cronworkflow"


def _argo_fields() -> tuple[str, ...]:
    """The fields of the `cronworkflow` record every evaluation gets (so the two cannot
    drift), plus the two keys Argo's environment also has, `labels.json` and
    `annotations.json` (`cronworkflow['labels.json']` in a stop expression)."""
    record = cronworkflow_variables(
        name="",
        namespace="",
        labels={},
        annotations={},
        failed=0,
        succeeded=0,
        last_scheduled_time=None,
    )[ROOT]
    assert isinstance(record, Mapping)
    return (*record, "labels.json", "annotations.json")


FIELDS: Final = _argo_fields()
#: What a misspelt name is compared with: every variable, and the functions without a
#: receiver (`now` written without its parentheses).
KNOWN: Final = (
    *(f"{ROOT}.{f}" for f in FIELDS if "." not in f),
    *(f"{name}()" for name in FUNCTIONS if "." not in name),
)


@dataclass(frozen=True)
class UnknownName:
    """A name as the expression spells it, and the known names nearest to it (none: nothing
    is close, and the message lists the variables instead)."""

    name: str
    nearest: tuple[str, ...]

    def describe(self) -> str:
        if self.nearest:
            return (
                f"{self.name} is not a variable Argo defines (nearest: {', '.join(self.nearest)})"
            )
        known = ", ".join(k for k in KNOWN if not k.endswith("()"))
        return f"{self.name} is not a variable Argo defines (it defines {known})"


def nearest(name: str) -> tuple[str, ...]:
    """Up to three known names close to `name`. The last part is compared, since a typo is
    usually in one part (`cronworkflow.faild`: `failed`; compared whole, every
    `cronworkflow.*` would be close for the prefix alone); then, for a name that is not
    under `cronworkflow`, the whole name (`cronWorkflow`, `cronworkflows.failed`)."""
    by_last: dict[str, str] = {}
    for k in KNOWN:
        by_last.setdefault(k.rsplit(".", 1)[-1], k)
    last = name.rsplit(".", 1)[-1]
    close = [by_last[m] for m in difflib.get_close_matches(last, by_last, n=3, cutoff=0.5)]
    if not close and not name.startswith(f"{ROOT}."):
        close = difflib.get_close_matches(name, KNOWN, n=3)
    return tuple(close)


def unknown_names(source: str) -> list[UnknownName]:
    """The names `source` reads that Argo does not define, each once, in order. An
    expression that does not parse has none here (admission reports it)."""
    try:
        tree = compile_expression(checked_source(source))
    except ValueError:
        return []
    found = dict(_unknown(tree))  # each name once, in order
    return [UnknownName(shown, nearest(plain)) for shown, plain in found.items()]


def _unknown(tree: Node) -> Iterator[tuple[str, str]]:
    """(the name as written, the same in dotted form: `cronworkflow['faild']` is compared
    as `cronworkflow.faild`)."""
    checked: set[int] = set()  # Name nodes already judged as the root of a member access
    stack = [tree]
    while stack:
        node = stack.pop()
        stack.extend(reversed(children(node)))
        if isinstance(node, Member) and isinstance(node.value, Name):
            checked.add(id(node.value))
            key = node.key.value if isinstance(node.key, Literal) else None
            dotted = f"{node.value.name}.{key}" if isinstance(key, str) else node.value.name
            if node.value.name != ROOT:
                yield node.path or dotted, dotted
            elif isinstance(key, str) and key not in FIELDS:
                yield node.path or dotted, dotted
        elif isinstance(node, Name) and id(node) not in checked and node.name != ROOT:
            yield node.name, node.name
