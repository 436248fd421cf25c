"""Real `cronsource serve` processes for tests over real HTTP: started, waited for, stopped.

One home for what the hostile-input tests and the status-page browser tests both need: a free
loopback port, the process, `/healthz` polled until it answers, and SIGTERM at the end.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

#: How long a starting server may take to answer /healthz, and a stopping one to exit.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServeProcess:
    base: str  # http://127.0.0.1:PORT
    proc: subprocess.Popen[str]
    #: Set once the process has exited: its exit code (None if it had to be killed) and stderr.
    returncode: int | None = None
    stderr: str = ""


@contextmanager
def serve(
    command: Sequence[str],
    store: str,
    *extra: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[ServeProcess]:
    """`COMMAND --store STORE serve --port P EXTRA...`, up once /healthz answers 200.

    Fails clearly (RuntimeError with its stderr) if it exits before that or is not up within
    START_TIMEOUT. On leaving, SIGTERM; a process still running STOP_TIMEOUT later is killed
    and its `returncode` stays None.
    """
    port = free_port()
    proc = subprocess.Popen(
        [*command, "--store", store, "serve", "--port", str(port), *extra],
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = ServeProcess(f"http://127.0.0.1:{port}", proc)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if httpx.get(f"{served.base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None:
                err = proc.stderr.read() if proc.stderr else ""
                raise RuntimeError(f"cronsource serve exited ({proc.returncode}): {err[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"cronsource serve did not come up within {START_TIMEOUT:.0f}s")
            time.sleep(0.1)
        yield served
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, served.stderr = proc.communicate(timeout=STOP_TIMEOUT)
            served.returncode = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            _, served.stderr = proc.communicate()
