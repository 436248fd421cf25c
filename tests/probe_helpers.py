"""Helpers for the probe tests: a `cronsource run` subprocess with its probe server (on the
host or in the image), HTTP GETs against it, the Prometheus text parsed by prometheus_client's
own parser, and a small disk a test can fill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

#: A CronWorkflow that fires every second, so a short run has fires, skew and runs to count.
EVERY_SECOND = """\
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: every-second, namespace: probes}
spec:
  schedules: ["@every 1s"]
  workflowSpec: {entrypoint: main, templates: [{name: main, container: {image: busybox}}]}
"""


class RunProcess:
    """`cronsource ... run ... --http-port 0` (or a fixed port), its stderr collected by a
    thread; `port` is read from the line the process prints once the probe server listens."""

    def __init__(self, argv: list[str], port: int | None = None, **popen: Any) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **popen
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port = port

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for line in list(self.lines):
                if text in line:
                    return line
            assert self.proc.poll() is None, f"{self.argv} exited: {self.stderr[-3000:]}"
            assert time.monotonic() < deadline, f"no {text!r} in: {self.stderr[-3000:]}"
            time.sleep(0.1)

    def wait_for_probes(self, timeout: float = 60.0) -> int:
        if self.port is None:
            line = self.wait_for_line("cronsource probes on http://", timeout)
            self.port = int(line.strip().rsplit(":", 1)[1])
        self.wait_for_line("cronsource ready after", timeout)
        return self.port

    def get(
        self, path: str, token: str | None = None, timeout: float = 10.0
    ) -> tuple[int, dict[str, str], str]:
        assert self.port is not None
        return http_get(f"http://127.0.0.1:{self.port}{path}", token, timeout)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then the exit code (killed if it does not stop in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        return self.proc.returncode


def http_get(
    url: str, token: str | None = None, timeout: float = 10.0
) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def ready_body(run: RunProcess) -> tuple[int, dict[str, Any]]:
    code, _, body = run.get("/readyz")
    return code, json.loads(body)


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)] of a Prometheus text exposition."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def total(found: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for ls, v in found.get(name, []) if labels.items() <= ls.items())


def mount_tmpfs(where: Path, size: str) -> None:
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"mounting a tmpfs needs root: {done.stderr}"


def small_disk(tmp_path: Path) -> Iterator[Path]:
    """Fixture (tests/conftest.py): a 16 MiB tmpfs of its own, which a test can fill or remount
    read-only (root, as CI runs the suite)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount_tmpfs(disk, "16m")
    try:
        yield disk
    finally:
        # Lazy: a process that outlived its test must not leave the mount behind.
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk has no room left; returns it (removing it frees the disk)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as e:
        assert e.errno == 28, e  # ENOSPC
    finally:
        os.close(fd)
    return filler
