"""The OCI image of scripts/build-image.sh, built once per test session, and `podman run` as
these VMs need it (runc: crun fails on their hybrid cgroups; limits within theirs). A build
that fails fails the tests that need it: no skip."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PODMAN_RUN = [
    "podman",
    "run",
    "--rm",
    "--runtime",
    "runc",
    "--ulimit",
    "nofile=20000:20000",
    "--ulimit",
    "nproc=32768:32768",
]

_built: dict[str, str] = {}


def build_image() -> str:
    """scripts/build-image.sh (cached per session); returns the name it printed last."""
    if "name" not in _built:
        for tool in ("mmdebstrap", "buildah", "podman"):
            if shutil.which(tool) is None:
                pytest.fail(f"{tool} is missing: apt-get install {tool} (scripts/test.sh does)")
        done = subprocess.run(
            [str(REPO / "scripts" / "build-image.sh")],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert done.returncode == 0, f"build-image.sh failed:\n{done.stderr[-5000:]}"
        _built["name"] = done.stdout.strip().splitlines()[-1]
    return _built["name"]


@pytest.fixture(scope="session")
def image() -> str:
    return build_image()


def inspect(name: str) -> dict[str, object]:
    import json

    done = subprocess.run(
        ["podman", "image", "inspect", name], capture_output=True, text=True, check=True
    )
    got: list[dict[str, object]] = json.loads(done.stdout)
    return got[0]
