"""The import contracts (pyproject.toml, [tool.importlinter]) hold, and they can fail: a copy of
the package with one wrong import planted is refused by the same check CI runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(config: Path, cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def planted_copy(tmp_path: Path, module: str, line: str) -> Path:
    """The package copied (links followed) under tmp_path, `line` added to `module`."""
    shutil.copytree(ROOT / "cronsource", tmp_path / "cronsource", symlinks=False)
    target = tmp_path / "cronsource" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    return tmp_path


def test_the_contracts_hold_on_the_tree() -> None:
    r = lint(ROOT / "pyproject.toml", ROOT, ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 kept, 0 broken" in r.stdout


def test_domain_importing_an_entrypoint_breaks_the_layers(tmp_path: Path) -> None:
    src = planted_copy(
        tmp_path, "domain/decisions.py", "from cronsource.adapters.entrypoints import cli  # noqa"
    )
    r = lint(ROOT / "pyproject.toml", src, src)
    assert r.returncode != 0
    assert "BROKEN" in r.stdout and "cronsource.domain.decisions" in r.stdout


def test_a_circle_between_siblings_breaks_the_acyclic_contract(tmp_path: Path) -> None:
    # runtime/projector.py is imported by runtime/engine.py; the reverse closes a circle
    # inside one layer, which the layers contract alone would not see.
    src = planted_copy(
        tmp_path,
        "adapters/runtime/projector.py",
        "from cronsource.adapters.runtime import engine as _engine  # noqa",
    )
    r = lint(ROOT / "pyproject.toml", src, src)
    assert r.returncode != 0
    assert "no circles between the modules of a package BROKEN" in r.stdout
