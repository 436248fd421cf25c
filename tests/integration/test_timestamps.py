"""domain/timestamps.py's bounds through the installed CLI as a process: a year-9999 `backfill`
flag or `simulate` scenario time is one line naming the field and the value and a non-zero
exit, never a traceback (the reader itself and the HTTP API: tests/unit/test_timestamps.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_timestamps import _YEAR_9999

ROOT = Path(__file__).resolve().parents[2]


_EXE = shutil.which("cronsource", path=str(Path(sys.executable).parent))


def _cronsource(*args: str) -> subprocess.CompletedProcess[str]:
    assert _EXE, "the cronsource entry point is not installed in this venv"
    env = {k: v for k, v in os.environ.items() if k != "CRONSOURCE_STORE"}
    return subprocess.run(
        [_EXE, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_cli_backfill_in_year_9999_is_one_line_naming_the_flag_and_value(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    assert _cronsource("--store", store, "apply", "-f", "examples/hello.yaml").returncode == 0
    result = _cronsource(
        "--store", store, "backfill", "hello", "--start", _YEAR_9999,
        "--end", "9999-12-31T23:30:00Z",
    )  # fmt: skip
    line = _one_error_line(result)
    assert line == f"error: --start: {_YEAR_9999!r} must be between 1970-01-01 and 2199-12-31"


@pytest.mark.parametrize("quoted", [True, False], ids=["string", "yaml timestamp"])
def test_simulate_with_a_year_9999_scenario_time_names_the_field_and_value(
    tmp_path: Path, quoted: bool
) -> None:
    start = f'"{_YEAR_9999}"' if quoted else _YEAR_9999
    scenario = tmp_path / "far.yaml"
    scenario.write_text(f"start: {start}\nend: 9999-12-31T23:30:00Z\ncronWorkflows: []\n")
    line = _one_error_line(_cronsource("simulate", str(scenario)))
    assert "start: '9999-12-31T23:00:00" in line
    assert "must be between 1970-01-01 and 2199-12-31" in line
