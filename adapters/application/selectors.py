"""Kubernetes label selectors (`team=data,tier in (a,b),!legacy`): parsed, and matched
against the labels of status rows. Shared by `cronsource get -l` and `?labelSelector=`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cronsource.adapters.application.inputs import FieldError
from cronsource.domain.objectlimits import label_problems
from cronsource.projections.readmodel import StatusRow

_KEY = r"[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)?"
_EXISTS = re.compile(rf"(?P<neg>!)?\s*(?P<key>{_KEY})")
_EQUALITY = re.compile(rf"(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})")
_SET = re.compile(rf"(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "exists" | "!exists" | "=" | "!=" | "in" | "notin"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # "!=", "notin"


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Kubernetes label selector syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
    `a`, `!a`, comma-separated (all must hold)."""
    if text is None or not text.strip():
        return []
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    out = []
    for raw in parts:
        part = raw.strip()
        if m := _SET.fullmatch(part):
            values = [v.strip() for v in m["values"].split(",")]
            if not all(re.fullmatch(_VALUE, v) for v in values):
                raise FieldError("labelSelector", f"bad value in {part!r}")
            if values == [""]:
                # As the API server: `in ()` matched nothing, `notin ()` everything.
                raise FieldError(
                    "labelSelector", f"{part!r}: for 'in', 'notin' the values can't be empty"
                )
            req = Requirement(m["key"], m["op"], frozenset(values))
        elif m := _EQUALITY.fullmatch(part):
            op = "!=" if m["op"] == "!=" else "="
            req = Requirement(m["key"], op, frozenset([m["value"]]))
        elif m := _EXISTS.fullmatch(part):
            req = Requirement(m["key"], "!exists" if m["neg"] else "exists")
        else:
            raise FieldError(
                "labelSelector",
                f"cannot parse {part!r} (use key=value, key!=value, key in (a,b), key, !key)",
            )
        out.append(_valid(req, part))
    return out


def _valid(req: Requirement, part: str) -> Requirement:
    """`req`, whose key is a label key and values label values, as the API server checks a
    selector: `a/b/c=d` or a key of 70 characters matched nothing, and said nothing."""
    problems = label_problems({req.key: ""}) or [
        p for v in sorted(req.values) for p in label_problems({req.key: v})
    ]
    if problems:
        raise FieldError("labelSelector", f"{part!r}: {problems[0]}")
    return req


def select(rows: list[StatusRow], selector: list[Requirement]) -> list[StatusRow]:
    return [r for r in rows if all(req.matches(r.metadata.get("labels") or {}) for req in selector)]
