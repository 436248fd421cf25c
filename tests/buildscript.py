"""Run one of scripts/build-*.sh and take the binaries it prints, or fail saying why.

The build scripts build once per machine and print the paths of what they built on the last
lines of stdout (their progress goes to stderr). A script that fails, hangs or prints no
executable path raises the caller's error type with the script's own words, so the test that
needed the binary fails clearly instead of skipping.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def built_paths(
    script: Path, count: int, timeout: float, error: type[Exception] = RuntimeError
) -> list[Path]:
    """The last `count` stdout lines of `bash SCRIPT`, each an executable file."""
    try:
        proc = subprocess.run(
            ["bash", str(script)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise error(f"{script} did not finish in {timeout:.0f} s") from exc
    if proc.returncode != 0:
        raise error(f"{script} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    lines = proc.stdout.strip().splitlines()
    paths = [Path(line) for line in lines[-count:]]
    if len(lines) < count or not all(os.access(p, os.X_OK) for p in paths):
        raise error(
            f"{script} printed no path of {count} executable file(s) on its last lines:\n"
            f"{proc.stdout[-2000:]}"
        )
    return paths
