"""What `pip install` puts on a machine: one import package, `cronsource`, with `py.typed`,
every module of the tree, and an `import cronsource` that works from the installed copy."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q"] + ["-w", str(out), str(ROOT)],
        check=True,
        timeout=600,
    )
    (found,) = out.glob("cronsource-*.whl")
    return found


def test_the_wheel_installs_only_the_cronsource_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"cronsource"}
    assert "cronsource/py.typed" in names


def test_the_wheel_holds_every_module_of_the_tree(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    tree = {
        f"cronsource/{folder}/{p.relative_to(ROOT / folder).as_posix()}"
        for folder in ("domain", "projections", "adapters")
        for p in (ROOT / folder).rglob("*.py")
    } | {f"cronsource/{p.name}" for p in (ROOT / "cronsource").glob("*.py")}
    assert tree - names == set()


def test_import_cronsource_from_a_plain_install(wheel: Path, tmp_path: Path) -> None:
    """A fresh virtualenv with the wheel and nothing of this checkout: the version prints,
    and nothing but `cronsource` is importable from the install."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
        timeout=600,
    )
    r = subprocess.run(
        [str(python), "-c", "import cronsource; print(cronsource.__version__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0.1.0"
    for other in ("domain", "projections", "adapters"):
        r = subprocess.run(
            [str(python), "-c", f"import {other}"], cwd=tmp_path, capture_output=True, timeout=60
        )
        assert r.returncode != 0, f"`import {other}` works from the install"


def test_a_users_script_type_checks_against_the_installed_package(
    wheel: Path, tmp_path: Path
) -> None:
    """mypy reads the installed package's hints (it ships `py.typed`): a wrong use of the
    API is an error in the user's script, not an `Any` that hides it."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
        timeout=600,
    )
    script = tmp_path / "user.py"
    script.write_text(
        "import cronsource\n"
        "def version() -> str:\n"
        "    return cronsource.__version__\n"
        "def wrong() -> int:\n"
        "    return cronsource.__version__\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-executable", str(python)]
        + ["--no-incremental", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # Only the wrong line: no "missing library stubs or py.typed marker" for the import.
    assert r.returncode == 1, r.stdout
    assert "py.typed" not in r.stdout and "import-not-found" not in r.stdout
    assert (
        'user.py:5: error: Incompatible return value type (got "str", expected "int")' in r.stdout
    )
