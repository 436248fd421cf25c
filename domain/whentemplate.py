"""`spec.when` as Argo reads it: a template whose tags are substituted, then a condition.

Argo (workflow/cron/operator.go evalWhen) passes `when` through its template engine
(util/template, fasttemplate with `{{` and `}}`) before evaluating the text that results:

* a simple tag `{{cronworkflow.namespace}}` is replaced by that variable's text; only string
  variables can be (`cronworkflow.name`, `cronworkflow.namespace`); any other tag is an error;
* an expression tag `{{= expr }}` is evaluated as expr-lang and replaced by its JSON form
  (a string without its quotes, `true`/`false`, a number).

So `"'{{cronworkflow.namespace}}' == 'default'"` compares two literals, and Argo's own
`{{= ... }}` examples render to `true` or `false`. The rendered text is then evaluated by
`domain.expressions` (Argo uses govaluate there; on the literals a rendering leaves, both agree).
A `when` without any tag is evaluated directly as expr-lang over the variables, which Argo
cannot do (docs/argo-compatibility.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final

from cronsource.domain.expressions import (
    ExpressionError,
    evaluate,
    evaluate_bool,
    validate_expression,
)
from cronsource.domain.expressions.errors import checked_source
from cronsource.domain.expressions.evaluator import NOW_VARIABLE
from cronsource.domain.expressions.names import UnknownName, unknown_names
from cronsource.domain.expressions.parser import compile_expression
from cronsource.domain.expressions.syntax import Call, Member, Name, Node, children

__all__ = [
    "evaluate_when",
    "render_when",
    "unknown_when_names",
    "validate_when",
    "values_read",
]

#: The variables a simple tag can name: Argo substitutes only string values.
_STRING_TAGS: Final = ("cronworkflow.name", "cronworkflow.namespace")
_ALL_TAGS: Final = (
    *_STRING_TAGS,
    "cronworkflow.labels",
    "cronworkflow.annotations",
    "cronworkflow.labels.json",
    "cronworkflow.annotations.json",
    "cronworkflow.failed",
    "cronworkflow.succeeded",
    "cronworkflow.lastScheduledTime",
)


def _pieces(source: str) -> Iterator[tuple[bool, str]]:
    """(is_tag, text) pieces, split as fasttemplate splits: a tag runs to the next `}}`."""
    pos = 0
    while True:
        start = source.find("{{", pos)
        if start < 0:
            yield False, source[pos:]
            return
        yield False, source[pos:start]
        end = source.find("}}", start + 2)
        if end < 0:
            raise ExpressionError(
                f'cannot find end tag="}}}}" in the template={source!r} starting from '
                f"{source[start:]!r}"
            )
        yield True, source[start + 2 : end]
        pos = end + 2


def _check_simple(tag: str) -> str:
    name = tag.strip()
    if name in _STRING_TAGS:
        return name
    if name in _ALL_TAGS:
        raise ExpressionError(f"failed to resolve {{{{{tag}}}}} to string")
    raise ExpressionError(f"failed to resolve {{{{{tag}}}}}")


def validate_when(source: str) -> None:
    """Admission check: every tag can be substituted and every expression parses."""
    if "{{" not in source:
        validate_expression(source)
        return
    for is_tag, text in _pieces(source):
        if not is_tag:
            continue
        if text.startswith("="):
            validate_expression(text[1:])
        else:
            _check_simple(text)


def unknown_when_names(source: str) -> list[UnknownName]:
    """Names `when` reads that Argo does not define: in each `{{= }}` tag, and in the text
    around the tags, which is evaluated after the tags are substituted (checked with each
    tag standing for `nil`; text that does not parse so has nothing to say here). A simple
    tag with an unknown name is already an admission error."""
    if "{{" not in source:
        return unknown_names(source)
    found: dict[str, UnknownName] = {}
    outside: list[str] = []
    try:
        for is_tag, text in _pieces(source):
            if not is_tag:
                outside.append(text)
                continue
            outside.append(" nil ")
            if text.startswith("="):
                found.update((u.name, u) for u in unknown_names(text[1:]))
    except ExpressionError:
        return []  # an unclosed tag: admission says so
    found.update((u.name, u) for u in unknown_names("".join(outside)))
    return list(found.values())


def _go_quote_body(text: str) -> str:
    """strconv.Quote without its quotes: how Argo escapes what it writes into the text."""
    return json.dumps(text)[1:-1]


def _go_json(value: object) -> str:
    """The JSON Go's encoding/json writes for a result (times RFC 3339, durations in ns)."""
    if isinstance(value, datetime):
        return json.dumps(value.astimezone(UTC).isoformat().replace("+00:00", "Z"))
    if isinstance(value, timedelta):
        return str(value // timedelta(microseconds=1) * 1000)
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            raise ExpressionError(f"json: unsupported value: {value}")
        return json.dumps(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, Mapping):
        value = dict(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def render_when(source: str, variables: Mapping[str, object]) -> str:
    """Substitute the tags of `source` as Argo does; raises ExpressionError."""
    record = variables.get("cronworkflow")
    out: list[str] = []
    for is_tag, text in _pieces(source):
        if not is_tag:
            out.append(text)
        elif text.startswith("="):
            result = evaluate(text[1:], variables)
            if result is None:
                raise ExpressionError(f"failed to evaluate expression {text[1:]!r}")
            encoded = _go_json(result)
            if len(encoded) > 1 and encoded[0] == encoded[-1] == '"':
                out.append(encoded[1:-1])
            else:
                out.append(_go_quote_body(encoded))
        else:
            name = _check_simple(text)
            value = record.get(name.split(".", 1)[1]) if isinstance(record, Mapping) else None
            out.append(_go_quote_body(value if isinstance(value, str) else ""))
    return "".join(out)


def evaluate_when(source: str, variables: Mapping[str, object]) -> bool:
    """`spec.when`'s verdict: tags substituted first, then the text evaluated as a bool."""
    if "{{" not in source:
        return evaluate_bool(source, variables)
    return evaluate_bool(render_when(source, variables), variables)


def _read_paths(tree: Node) -> Iterator[str]:
    """The variables an expression reads, as written (`cronworkflow.labels.app`), outermost
    member paths only; `now()` for the decision time."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Member) and node.path:
            yield node.path
            stack.append(node.key)
            continue
        if isinstance(node, Name):
            yield node.name
        if isinstance(node, Call) and node.function == "now":
            yield "now()"
        stack.extend(reversed(children(node)))


def _sources(source: str) -> list[str]:
    if "{{" not in source:
        return [source]
    try:
        return [t[1:] if t.startswith("=") else t.strip() for tag, t in _pieces(source) if tag]
    except ExpressionError:
        return []


def values_read(source: str, variables: Mapping[str, object]) -> dict[str, str]:
    """Each variable `source` (a `when` or `stopStrategy` expression) reads, with its value
    as Go's JSON writes it (`"nightly"`, `3`, `"2026-05-04T09:00:00Z"`, `null`), in order:
    what the ScheduleSkipped (WhenFalse) and Stopped events record, so that `why` and
    `history` can show what the expression saw. Best effort: a path that does not evaluate
    on its own is left out, never an error."""
    out: dict[str, str] = {}
    for src in _sources(source):
        try:
            tree = compile_expression(checked_source(src))
        except ValueError:
            continue
        for path in _read_paths(tree):
            if path in out:
                continue
            if path == "now()":
                value = variables.get(NOW_VARIABLE)
            else:
                try:
                    value = evaluate(path, variables)
                except ExpressionError:
                    continue
            if callable(value):
                continue
            try:
                out[path] = _go_json(value)
            except ExpressionError:
                continue
    return out
