"""The probe server of `cronsource run` (adapters/entrypoints/probes.py), over real HTTP against a
real `cronsource run` subprocess on SQLite and PostgreSQL, and readiness when the store stops
answering (a TCP relay in front of PostgreSQL that stops relaying)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.probe_helpers import EVERY_SECOND, RunProcess, ready_body, samples, total

CLI = str(Path(sys.executable).parent / "cronsource")


TOKEN = "probe-test-token"


#: The families `run` must export (docs/operator-guide.md, "Probes and metrics").
ALWAYS = {
    "cronsource_local_shards_owned",
    "cronsource_local_projector",
    "cronsource_projection_lag_events",
    "cronsource_fire_skew_seconds_bucket",
    "cronsource_fire_skew_seconds_count",
    "cronsource_due_overdue",
    "cronsource_due_index_size",
    "cronsource_rejected_writes_total",
    "cronsource_dispatch_errors_total",
    "cronsource_worker_failures_total",
    "cronsource_fires_total",
    "cronsource_last_turn_age_seconds",
    "cronsource_clock_backward_jumps_total",
}


POSTGRES_ONLY = {"cronsource_shards_owned", "cronsource_replicas", "cronsource_shards_unowned"}


def _migrate(url: str) -> None:
    done = subprocess.run([CLI, "--store", url, "migrate"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _start(
    store: str, tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> RunProcess:
    manifest = tmp_path / "every-second.yaml"
    manifest.write_text(EVERY_SECOND)
    argv = [CLI, "--store", store, "run", str(manifest), "--http-port", "0", *extra]
    argv += ["--workflows-dir", str(tmp_path / "workflows")]
    return RunProcess(argv, env=env)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cronsource.db'}"
    url: str = request.getfixturevalue("pg_url")
    _migrate(url)
    return url


def test_run_serves_health_readiness_and_the_scheduler_metrics(store: str, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    run = _start(store, tmp_path, "--http-token-file", str(token_file))
    try:
        run.wait_for_probes()
        code, _, body = run.get("/healthz")
        assert (code, json.loads(body)) == (200, {"status": "ok"})
        code, ready = ready_body(run)
        assert code == 200 and ready["status"] == "ready", ready
        assert set(ready["lag"]) == {"readmodel", "dispatch"}
        # /metrics takes the configured token; the probes never ask for one.
        code, headers, _ = run.get("/metrics")
        assert code == 401 and headers["WWW-Authenticate"].startswith("Bearer")
        assert run.get("/metrics", token="wrong")[0] == 401
        deadline = time.monotonic() + 30
        while True:  # until the every-second CronWorkflow has fired a few times
            code, headers, text = run.get("/metrics", token=TOKEN)
            assert code == 200 and headers["Content-Type"].startswith("text/plain")
            found = samples(text)
            if total(found, "cronsource_fire_skew_seconds_count") >= 3:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        want = ALWAYS | (POSTGRES_ONLY if store.startswith("postgresql") else set())
        assert want <= set(found), sorted(want - set(found))
        assert total(found, "cronsource_local_shards_owned") == 64  # the only replica: all
        assert total(found, "cronsource_local_projector") == 1
        assert total(found, "cronsource_fires_total", namespace="probes") >= 3
        # Every scheduled fire lands in a bucket: +Inf holds the count, and they were on time.
        assert total(found, "cronsource_fire_skew_seconds_bucket", le="+Inf") == total(
            found, "cronsource_fire_skew_seconds_count"
        )
        assert total(found, "cronsource_fire_skew_seconds_bucket", le="30.0") == total(
            found, "cronsource_fire_skew_seconds_count"
        )
        workers = {ls["worker"] for ls, _ in found["cronsource_worker_failures_total"]}
        assert {"scheduler", "projections", "dispatch"} <= workers
        assert total(found, "cronsource_worker_failures_total") == 0
        assert 0 <= total(found, "cronsource_last_turn_age_seconds") < 60
        if store.startswith("postgresql"):
            assert total(found, "cronsource_replicas") == 1
            assert total(found, "cronsource_shards_unowned") == 0
        assert run.get("/nothing")[0] == 404
    finally:
        code = run.stop()
    assert code == 0, run.stderr[-3000:]
    assert "cronsource stopped after" in run.stderr


def test_probe_port_from_the_environment_and_bad_values_fail_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        # The port is taken: one clear line, exit 1, no traceback.
        store = f"sqlite:///{tmp_path / 'c.db'}"
        env = {**_env(), "CRONSOURCE_HTTP_PORT": str(port)}
        done = subprocess.run(
            [CLI, "--store", store, "run", "--workflows-dir", str(tmp_path / "w")],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 1, done.stderr
        assert f"--http-port {port}: cannot listen on 127.0.0.1" in done.stderr
        assert "Traceback" not in done.stderr
    done = subprocess.run(
        [CLI, "--store", store, "run", "--http-port", "1", "--max-turn-age", "soon"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "--max-turn-age:" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    empty = tmp_path / "empty-token"
    empty.write_text("")
    done = subprocess.run(
        [CLI, "--store", store, "run", "--http-port", "1", "--http-token-file", str(empty)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "the file is empty" in done.stderr, done.stderr
    # From the environment: the server comes up on the port it names.
    env["CRONSOURCE_HTTP_PORT"] = str(port)  # free again now
    run = RunProcess(
        [CLI, "--store", store, "run", "--workflows-dir", str(tmp_path / "w")], port=None, env=env
    )
    try:
        assert run.wait_for_probes() == port
        assert ready_body(run)[0] == 200
    finally:
        assert run.stop() == 0, run.stderr


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("CRONSOURCE_HTTP")}


class Relay:
    """A TCP relay to PostgreSQL that can stop relaying (connections stay open, bytes stop):
    what a store behind a dead network path looks like to its clients."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.flowing = threading.Event()
        self.flowing.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self.flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self.flowing.set()
        self.listener.close()


@pytest.fixture
def relayed(pg_url: str) -> Iterator[tuple[str, Relay]]:
    _migrate(pg_url)
    u = urlparse(pg_url)
    relay = Relay((u.hostname or "127.0.0.1", u.port or 5432))
    try:
        yield u._replace(netloc=f"{u.username}@127.0.0.1:{relay.port}").geturl(), relay
    finally:
        relay.close()


@pytest.mark.postgres
def test_readyz_fails_while_the_store_does_not_answer_and_recovers(
    relayed: tuple[str, Relay], tmp_path: Path
) -> None:
    url, relay = relayed
    run = _start(url, tmp_path, "--max-turn-age", "5s")
    try:
        run.wait_for_probes()
        assert ready_body(run)[0] == 200
        relay.flowing.clear()
        deadline = time.monotonic() + 30
        while True:
            code, body = ready_body(run)
            if code == 503:
                break
            assert time.monotonic() < deadline, body
            time.sleep(0.5)
        assert body["status"] == "store unreachable", body
        # The loop is blocked on the store too: its last turn ages past the bound.
        deadline = time.monotonic() + 30
        while (body.get("lastTurnAgeSeconds") or 0) <= 5:
            assert time.monotonic() < deadline, body
            time.sleep(0.5)
            code, body = ready_body(run)
        assert code == 503
        # Turns stopped: not alive either (the kubelet would restart it).
        code, _, text = run.get("/healthz")
        assert code == 503 and json.loads(text)["status"] == "turns stopped", text
        relay.flowing.set()
        deadline = time.monotonic() + 60
        while (code := ready_body(run)[0]) != 200:
            assert time.monotonic() < deadline, ready_body(run)
            time.sleep(0.5)
    finally:
        relay.flowing.set()
        code = run.stop()
    assert code == 0, run.stderr[-3000:]
