"""The OCI image of scripts/build-image.sh: built here (a failed build fails), it runs
`cronsource --version`, and a short `run` in it against the throwaway PostgreSQL (host
network, so 127.0.0.1 reaches it) answers /readyz and /metrics; as the image's non-root user,
on a read-only root filesystem."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.image_helpers import PODMAN_RUN, REPO, image, inspect  # noqa: F401 (fixture)
from tests.probe_helpers import EVERY_SECOND, RunProcess, ready_body, samples, total

pytestmark = [pytest.mark.image, pytest.mark.postgres, pytest.mark.timeout(1800)]


def _version() -> str:
    import tomllib

    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_image_is_named_labelled_and_runs_as_a_user(image: str) -> None:  # noqa: F811
    assert image == f"localhost/cronsource:{_version()}"
    got = inspect(image)
    config = got["Config"]
    assert isinstance(config, dict)
    assert config["Entrypoint"] == ["/opt/cronsource/bin/cronsource"]
    assert config["User"] == "10001:10001"
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == _version()
    assert labels["org.opencontainers.image.source"].startswith("https://")
    done = subprocess.run(
        [*PODMAN_RUN, "--read-only", image, "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"cronsource {_version()} (python 3."), done.stdout
    # The image has no shell and no coreutils (no `id`): its own Python says who runs.
    who = (
        "import grp, os, pwd; print(os.getuid(), pwd.getpwuid(os.getuid()).pw_name,"
        " os.getgid(), grp.getgrgid(os.getgid()).gr_name, os.environ['HOME'])"
    )
    done = subprocess.run(
        [
            *PODMAN_RUN,
            "--read-only",
            "--entrypoint",
            "/opt/cronsource/bin/python",
            image,
            "-c",
            who,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == [
        "10001",
        "cronsource",
        "10001",
        "cronsource",
        "/var/lib/cronsource",
    ], done.stdout


def test_image_is_lean_no_shell_no_pip_no_kubernetes_client(image: str) -> None:  # noqa: F811
    """Issue 25: under 150 MB unpacked, no shell or package manager, no pip, and not the
    official 126 MB Kubernetes client (lightkube and aiohttp instead)."""
    got = inspect(image)
    size = got["Size"]
    assert isinstance(size, int) and size < 150_000_000, size
    probe = (
        "import importlib.util as u, os; "
        "print([m for m in ('kubernetes', 'pip', 'setuptools') if u.find_spec(m)], "
        "[p for p in ('/bin/sh', '/usr/bin/apt', '/usr/bin/dpkg', '/usr/bin/perl') "
        "if os.path.lexists(p)])"
    )
    done = subprocess.run(
        [*PODMAN_RUN, "--entrypoint", "/opt/cronsource/bin/python", image, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[] []", done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_in_the_image_on_postgresql_answers_readyz_and_metrics(
    image: str,  # noqa: F811
    pg_url: str,
    tmp_path: Path,
) -> None:
    base = [*PODMAN_RUN, "--network", "host", "--read-only", "--tmpfs", "/tmp"]
    done = subprocess.run(
        [*base, "-e", f"CRONSOURCE_STORE={pg_url}", image, "migrate"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    manifest = tmp_path / "every-second.yaml"
    manifest.write_text(EVERY_SECOND)
    manifest.chmod(0o644)
    port = free_port()
    run = RunProcess(
        [
            *base,
            "-v",
            f"{manifest}:/etc/cronsource/every-second.yaml:ro",
            "-e",
            f"CRONSOURCE_STORE={pg_url}",
            "-e",
            f"CRONSOURCE_HTTP_PORT={port}",
            image,
            "run",
            "/etc/cronsource/every-second.yaml",
            "--workflows-dir",
            "/tmp/workflows",
        ],
        port=port,
    )
    try:
        run.wait_for_probes(timeout=120)
        code, body = ready_body(run)
        assert code == 200 and body["status"] == "ready", body
        deadline = time.monotonic() + 60
        while True:
            code, _, text = run.get("/metrics")
            assert code == 200, text
            found = samples(text)
            if total(found, "cronsource_fires_total", namespace="probes") >= 2:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        assert total(found, "cronsource_local_shards_owned") == 64
        assert total(found, "cronsource_replicas") == 1
        assert total(found, "cronsource_fire_skew_seconds_count") >= 2
    finally:
        code = run.stop(timeout=60)
    assert code == 0, run.stderr[-3000:]
    assert "cronsource stopped after" in run.stderr
