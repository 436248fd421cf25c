"""Buffered overlap through the installed CLI (issue 23 item 4): `lint` and `apply` refuse a
bad `cronsource.io/overlap` or `cronsource.io/max-buffer`, or an overlap without
`concurrencyPolicy: Forbid`, with one line naming the annotation and its value, and store
nothing; a good one is admitted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_cli_first_hour import cs, one_error_line, stored

pytestmark = pytest.mark.timeout(120)


def manifest(overlap: str, max_buffer: str | None = None, policy: str = "Forbid") -> str:
    extra = f'\n    cronsource.io/max-buffer: "{max_buffer}"' if max_buffer is not None else ""
    return f"""\
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: queued
  annotations:
    cronsource.io/overlap: {overlap}{extra}
spec:
  schedules: ["* * * * *"]
  concurrencyPolicy: {policy}
  workflowSpec:
    entrypoint: main
    templates: [{{name: main, container: {{image: busybox}}}}]
"""


@pytest.mark.parametrize(
    ("text", "named", "value"),
    [
        (manifest("Sideways"), "cronsource.io/overlap", "(value: 'Sideways')"),
        (manifest("BufferOne", policy="Allow"), "cronsource.io/overlap", "Allow"),
        (manifest("BufferAll", policy="Replace"), "cronsource.io/overlap", "Replace"),
        (manifest("BufferAll", "0"), "cronsource.io/max-buffer", "(value: '0')"),
        (manifest("BufferAll", "-1"), "cronsource.io/max-buffer", "(value: '-1')"),
        (manifest("BufferAll", "lots"), "cronsource.io/max-buffer", "(value: 'lots')"),
    ],
)
@pytest.mark.parametrize("command", ["lint", "apply"])
def test_bad_buffer_settings_are_one_line_and_nothing_is_stored(
    tmp_path: Path, command: str, text: str, named: str, value: str
) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    args = [command, str(f)] if command == "lint" else [command, "-f", str(f)]
    line = one_error_line(cs(*args, store=store))
    assert named in line and value in line, line
    if command == "apply":
        assert stored(store) == []


def test_a_good_buffer_is_admitted(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    f = tmp_path / "good.yaml"
    f.write_text(manifest("BufferAll", "5"))
    assert cs("apply", "-f", str(f), store=store).returncode == 0
    listed = json.loads(cs("list", "-o", "json", store=store).stdout)["items"]
    assert [i["metadata"]["name"] for i in listed] == ["queued"]
