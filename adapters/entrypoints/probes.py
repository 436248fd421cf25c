"""The probe server of `cronsource run`: /healthz, /readyz and /metrics on a port of its own.

Kubernetes needs to tell a stuck replica from a healthy one, and Prometheus needs the
scheduler's own figures (shards this replica owns, its worker failures, the rejected writes of
its decisions), which only the process that runs the loop knows. `serve` is a separate process
with commands behind a token; this server carries no commands, so it may bind the pod's address
for the kubelet without one. /metrics still asks for the bearer token when one is configured
(the figures name namespaces); /healthz and /readyz never do (the kubelet sends none).

Ready means all of: the store answers within STORE_TIMEOUT, it takes writes (the loop's write
probe: a full disk, a read-only file system or database, a standby, a revoked privilege fail
it), no worker's last step failed, and the scheduler loop finished a turn no longer than
`max_turn_age` ago. Reads alone are not enough: with the SQLite disk full they went on
working, and /readyz said ready for a minute while every write failed. Healthy (alive)
means the turns only: a store that refuses connections or writes does not stop the turns
(each worker retries with backoff), so the pod is unready but not restarted, since a restart
would not bring the store back; a loop stuck for longer than the bound (a hung connection, a
deadlock) fails both, and the kubelet restarts it.
Before the first turn (start-up catch-up) the process counts as alive and not ready
(docs/operator-guide.md, "Probes and metrics").

The standard library's threading HTTP server is enough here: three GET routes, no body parsing,
and no event loop to share with the scheduler; the metrics come from
adapters/observability/metrics.py.
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cronsource.adapters.clock import Clock
from cronsource.adapters.observability.metrics import Metrics
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop

log = logging.getLogger("cronsource.probes")

#: Seconds /readyz waits for the store to answer before it calls the store unreachable.
STORE_TIMEOUT = 3.0
#: Default bound on the age of the last finished turn. A turn is short (its projection and
#: watcher work is capped at a second, a burst of 10,000 fires takes a few seconds), so a
#: minute without one means the loop is stuck, not busy.
MAX_TURN_AGE = 60.0


class _TurnAge(Collector):
    """Seconds since the loop last finished a turn: the figure /readyz bounds."""

    def __init__(self, loop: SchedulerLoop) -> None:
        self.loop = loop

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        last = self.loop.last_turn
        age = self.loop.clock.monotonic() - last if last is not None else float("nan")
        yield GaugeMetricFamily(
            "cronsource_last_turn_age_seconds",
            "Seconds since the scheduler loop of this process finished a turn (NaN before the"
            " first)",
            value=age,
        )


class Probes:
    """What the three routes answer; the HTTP layer below only frames it."""

    def __init__(
        self,
        engine: Engine,
        loop: SchedulerLoop,
        clock: Clock,
        *,
        token: str | None = None,
        max_turn_age: float = MAX_TURN_AGE,
        per_cronworkflow: bool = False,
    ) -> None:
        self.engine = engine
        self.loop = loop
        self.token = token
        self.max_turn_age = max_turn_age
        self.metrics = Metrics(engine, clock, loop=loop, per_cronworkflow=per_cronworkflow)
        self.metrics.registry.register(_TurnAge(loop))
        # One store check at a time: a hung one is not joined by more threads at every probe.
        self._checker = ThreadPoolExecutor(1, thread_name_prefix="store-check")
        self._pending: Future[tuple[dict[str, int], str | None]] | None = None
        self._lock = threading.Lock()

    def _check_store(self) -> tuple[dict[str, int], str | None]:
        return self.engine.projector.lag(), self.loop.write_probe.check()

    def _store_state(self) -> tuple[dict[str, int], str | None]:
        """(each projection's lag, why the store takes no writes or None)."""
        with self._lock:
            if self._pending is None or self._pending.done():
                self._pending = self._checker.submit(self._check_store)
            pending = self._pending
        return pending.result(timeout=STORE_TIMEOUT)

    def alive(self) -> tuple[int, dict[str, Any]]:
        """503 only when turns have stopped: the one failure a restart mends."""
        last = self.loop.last_turn
        now = self.loop.clock.monotonic()
        if last is not None and now - last > self.max_turn_age:
            age = round(now - last, 3)
            return 503, {"status": "turns stopped", "lastTurnAgeSeconds": age}
        return 200, {"status": "ok"}

    def ready(self) -> tuple[int, dict[str, Any]]:
        """503 with the first reason that fails: the store does not answer, takes no writes,
        a worker's last step failed, no turn yet, or turns stopped."""
        last = self.loop.last_turn
        age = None if last is None else round(self.loop.clock.monotonic() - last, 3)
        body: dict[str, Any] = {"lastTurnAgeSeconds": age, "maxTurnAgeSeconds": self.max_turn_age}
        try:
            body["lag"], unwritable = self._store_state()
        except FutureTimeout:
            body.update(status="store unreachable", error=f"no answer within {STORE_TIMEOUT}s")
            return 503, body
        except Exception as e:
            body.update(status="store unreachable", error=f"{type(e).__name__}: {e}")
            return 503, body
        if unwritable is not None:
            body.update(status="store not writable", error=unwritable)
            return 503, body
        failing = {s.name: s.last_error for s in self.loop.supervisors if s.failing}
        if failing and (unwritable := self.loop.write_probe.check(fresh=True)) is not None:
            # The answer above may be up to a second older than the worker's failure (a disk
            # filled in between): asked again, the store's own reason comes first.
            body.update(status="store not writable", error=unwritable)
            return 503, body
        if failing:
            # The store answered the probe, but a worker's own write failed (a disk with a
            # little room left, a constraint, a target that refuses): not ready until it works.
            body.update(status="workers failing", failing=failing)
            return 503, body
        if age is None:
            return 503, {"status": "starting", **body}
        if age > self.max_turn_age:
            return 503, {"status": "turns stopped", **body}
        return 200, {"status": "ready", **body}

    def authorized(self, header: str | None) -> bool:
        if self.token is None:
            return True
        given = header.removeprefix("Bearer ").strip() if header else ""
        return hmac.compare_digest(given.encode(), self.token.encode())

    def scrape(self) -> bytes:
        self.metrics.refresh()
        return generate_latest(self.metrics.registry)

    def close(self) -> None:
        self._checker.shutdown(wait=False, cancel_futures=True)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        probes = self.server.probes
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            self._json(*probes.alive())
        elif path == "/readyz":
            self._json(*probes.ready())
        elif path == "/metrics":
            if not probes.authorized(self.headers.get("Authorization")):
                self._json(
                    401,
                    {"status": "a valid bearer token is required"},
                    {"WWW-Authenticate": 'Bearer realm="cronsource"'},
                )
                return
            try:
                body = probes.scrape()
            except Exception as e:  # the store is down: say so, keep serving
                self._json(503, {"status": "store unreachable", "error": f"{type(e).__name__}"})
                return
            self._send(200, body, CONTENT_TYPE_LATEST)
        else:
            self._json(404, {"status": "not found", "paths": ["/healthz", "/readyz", "/metrics"]})

    def _json(self, code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(code, json.dumps(body).encode() + b"\n", "application/json", headers)

    def _send(
        self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], probes: Probes) -> None:
        self.probes = probes
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)


class ProbeServer:
    """Serves `probes` on (host, port) from a daemon thread until `stop`."""

    def __init__(self, probes: Probes, host: str, port: int) -> None:
        self.probes = probes
        self._server = _Server((host, port), probes)  # binds now: a taken port fails here
        self.host = host
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="probes", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.probes.close()
