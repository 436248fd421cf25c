"""The real `cronsource serve` command as a user starts it (a token file, the embedded store):
it serves the status page and the API (the API itself: tests/integration/test_http.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.http_helpers import manifest
from tests.integration.test_http import CW

pytestmark = pytest.mark.timeout(120)


ROOT = Path(__file__).resolve().parents[2]


def test_cronsource_serve_serves_the_page_and_the_api(tmp_path: Path) -> None:
    """The real command, as a user starts it: a token file, the embedded store."""
    import socket

    token = tmp_path / "token"
    token.write_text("tok-123\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "CRONSOURCE_STORE": f"sqlite:///{tmp_path}/c.db"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronsource.adapters.entrypoints.cli", "serve", "--port", str(port)]
        + ["--token-file", str(token)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "cronsource serve did not come up"
            time.sleep(0.1)
        page = httpx.get(base + "/")
        assert page.status_code == 200 and "<title>cronsource</title>" in page.text
        assert httpx.get(base + CW).status_code == 401
        auth = {"Authorization": "Bearer tok-123"}
        assert httpx.post(base + CW, json=manifest("hello"), headers=auth).status_code == 201
        # Kubernetes' verbs: a second create is refused, a patch and an apply update
        again = httpx.post(base + CW, json=manifest("hello", "5 * * * *"), headers=auth)
        assert again.status_code == 409 and again.json()["reason"] == "AlreadyExists"
        merge = {**auth, "Content-Type": "application/merge-patch+json"}
        patched = httpx.patch(
            f"{base}{CW}/hello", content=b'{"spec": {"schedules": ["7 * * * *"]}}', headers=merge
        )
        assert patched.status_code == 200 and patched.json()["metadata"]["resourceVersion"] == "2"
        applied = httpx.patch(
            f"{base}{CW}/hello",
            json=manifest("hello", "9 * * * *"),
            params={"fieldManager": "cronsource"},
            headers={**auth, "Content-Type": "application/apply-patch+yaml"},
        )
        assert applied.status_code == 200 and applied.json()["spec"]["schedules"] == ["9 * * * *"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    created = [r for r in lines if r.get("cronWorkflow") == "default/hello"]
    assert created and created[0]["version"] == 1 and created[0]["msg"].endswith("created")
