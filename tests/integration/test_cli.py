"""The command line as a user drives it, through the installed console script as a process (the
commands themselves by CliRunner: tests/unit/test_cli.py)."""

import json
import subprocess
import sys
from pathlib import Path


def test_console_script_runs_simulate(tmp_path):
    """One end-to-end run through the installed entry point, as a user would."""
    exe = Path(sys.executable).parent / "cronsource"
    out = subprocess.run(
        [str(exe), "simulate", "scenarios/day.yaml", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    result = json.loads(out.stdout)
    assert result["workflows"] and result["rejectedWrites"] == 0
