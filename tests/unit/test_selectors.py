"""Label selectors (adapters/application/selectors.py), as the API server parses them: what
it refuses is refused naming the part, never taken as a filter that matches nothing (or
everything)."""

from __future__ import annotations

import pytest

from cronsource.adapters.application.inputs import FieldError
from cronsource.adapters.application.selectors import Requirement, parse_label_selector


def test_the_kubernetes_forms_parse() -> None:
    got = parse_label_selector("team=data, tier in (a,b),!legacy,example.com/owner!=x,env")
    assert got == [
        Requirement("team", "=", frozenset({"data"})),
        Requirement("tier", "in", frozenset({"a", "b"})),
        Requirement("legacy", "!exists"),
        Requirement("example.com/owner", "!=", frozenset({"x"})),
        Requirement("env", "exists"),
    ]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("team in ()", "'team in ()': for 'in', 'notin' the values can't be empty"),
        ("team notin ()", "'team notin ()': for 'in', 'notin' the values can't be empty"),
        ("a/b/c=d", "'a/b/c=d': key 'a/b/c': prefix 'a/b' must be a DNS-1123 subdomain"),
        ("k" * 64 + "=x", "name part must be at most 63 characters"),
        ("a=" + "v" * 64, "a: value is 64 characters, at most 63 allowed"),
    ],
)
def test_what_the_api_server_refuses_is_refused_naming_the_part(text: str, said: str) -> None:
    with pytest.raises(FieldError) as e:
        parse_label_selector(text)
    assert e.value.field == "labelSelector"
    assert said in str(e.value)
