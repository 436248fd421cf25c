"""Real `cronsource serve` processes for the hostile-input tests, over real HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve(store: str, *extra: str) -> Iterator[str]:
    """One `cronsource serve` on `store`; yields its base URL, stops it with SIGTERM."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "--store", store, "serve", "--port", str(port)]
        + list(extra),
        cwd=ROOT,
        env={**os.environ},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"cronsource serve exited: {proc.stderr.read()}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise RuntimeError("cronsource serve did not come up within 30s")
            time.sleep(0.1)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
