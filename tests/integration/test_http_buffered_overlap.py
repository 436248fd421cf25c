"""Buffered overlap over real HTTP (issue 23 item 4): a bad `cronsource.io/overlap` or
`cronsource.io/max-buffer`, or an overlap without Forbid, is a 422 naming the annotation and
its value, and nothing is stored."""

from __future__ import annotations

import pytest

from tests.http_helpers import manifest
from tests.integration.test_http import CW, Api, api, assert_problem

__all__ = ["api"]  # the fixture, imported for the tests below

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


def buffered(name: str, annotations: dict[str, str], policy: str) -> dict[str, object]:
    body = manifest(name)
    body["metadata"]["annotations"] = annotations  # type: ignore[index]
    body["spec"]["concurrencyPolicy"] = policy  # type: ignore[index]
    return body


@pytest.mark.parametrize(
    ("annotations", "policy", "named", "value"),
    [
        ({"cronsource.io/overlap": "Sideways"}, "Forbid", "cronsource.io/overlap", "'Sideways'"),
        ({"cronsource.io/overlap": "BufferOne"}, "Allow", "cronsource.io/overlap", "Allow"),
        (
            {"cronsource.io/overlap": "BufferAll", "cronsource.io/max-buffer": "lots"},
            "Forbid",
            "cronsource.io/max-buffer",
            "'lots'",
        ),
    ],
)
def test_bad_buffer_settings_are_refused_naming_the_annotation(
    api: Api, annotations: dict[str, str], policy: str, named: str, value: str
) -> None:
    body = assert_problem(api.apply(buffered("bad", annotations, policy)), 422)
    [error] = body["errors"]
    assert error["field"].startswith("metadata.annotations")
    assert named in error["message"] and value in error["message"]
    assert api.http.get(f"{CW}/bad").status_code == 404  # nothing stored
