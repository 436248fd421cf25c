"""examples/python/ runs as a user would run it, and type-checks as a user's own script would
(`mypy --strict` on code that uses the public API: the package ships `py.typed`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"


def test_create_and_wait_creates_a_cronworkflow_and_sees_its_first_run(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    r = subprocess.run(
        [sys.executable, str(EXAMPLES / "create_and_wait.py"), store, "--timeout", "60"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "applied examples/hello-python (version 1)"
    assert lines[1].startswith("first run hello-python-")
    assert lines[2].startswith("lastScheduledTime 20")


def test_the_examples_pass_mypy_strict_as_a_users_code() -> None:
    """Outside the repository's own mypy configuration, with the package found where its
    import name is (the checkout's `cronsource/`), as an installed copy would be."""
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *sorted(map(str, EXAMPLES.glob("*.py")))],
        cwd=EXAMPLES,
        env={**os.environ, "MYPYPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
