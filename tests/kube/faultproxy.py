"""A fault-injecting HTTPS proxy between a Kubernetes client and the test API server.

The client talks TLS to the proxy (a self-signed certificate made with the ``openssl`` command,
trusted through the kubeconfig the proxy writes); the proxy reads each HTTP request, decides on a
fault from a seeded random schedule, and forwards what survives to the real server over its own
TLS connection. One request per client connection: the proxy sends the request upstream with
``Connection: close``, so the server's answer says ``Connection: close`` too and the client never
reuses a connection the proxy is about to drop. That keeps the proxy byte-level simple: it never
parses a response, it relays it (watch streams included) until the server closes.

Faults, each with its own probability (``Faults``):

- ``error``: a canned ``500 Internal Server Error`` (a Kubernetes Status body); nothing forwarded.
- ``reset``: the client connection is reset (RST) before anything is forwarded.
- ``delay``: the request waits up to ``max_delay`` seconds before it is forwarded.
- ``lost``: the request is forwarded and applied by the server, then the client's connection is
  reset instead of relaying the answer: the create/patch happened but the client cannot know.
- ``cut``: a watch stream is relayed for up to ``max_delay`` seconds, then reset.

``force`` picks a fault for chosen requests (by their request line), so a test can make, say,
every create of a Workflow fail while everything else goes through. ``enabled`` switches all of
them off (and on) at once, so a test can stop the faults and wait
for convergence. ``counts`` says how many of each were injected, and ``requests`` how many
requests came.
"""

from __future__ import annotations

import base64
import contextlib
import random
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

CANNED_500 = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
    b'"message":"injected by the fault proxy","reason":"InternalError","code":500}'
)
HEAD_LIMIT = 64 * 1024


@dataclass
class Faults:
    """Probabilities per request (they are tried in this order; at most one applies)."""

    error: float = 0.0
    reset: float = 0.0
    lost: float = 0.0
    delay: float = 0.0
    cut: float = 0.0
    max_delay: float = 0.5


def self_signed(workdir: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1 (the openssl command; Python has no X.509 writer)."""
    cert, key = workdir / "proxy.crt", workdir / "proxy.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=cronsource-fault-proxy",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],  # fmt: skip
        check=True,
        capture_output=True,
    )
    return cert, key


class FaultProxy:
    """Start with ``start()``; point clients at ``kubeconfig``; ``stop()`` when done."""

    def __init__(
        self,
        upstream_kubeconfig: Path,
        workdir: Path,
        faults: Faults,
        seed: int = 0,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.faults = faults
        self.enabled = True
        #: A fault for chosen requests, before the random schedule: called with the request
        #: line (`POST /apis/... HTTP/1.1`), it names the fault ("error", "reset", "lost") or
        #: None. Applies while `enabled`.
        self.force: Callable[[str], str | None] | None = None
        self.counts: Counter[str] = Counter()
        #: How long a request `force` names "hang" waits before it is forwarded (or until
        #: the proxy stops): an API server that stopped answering (SIGSTOP).
        self.hang_seconds = 60.0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        cfg = yaml.safe_load(Path(upstream_kubeconfig).read_text())
        self._upstream_cfg = cfg
        cluster = cfg["clusters"][0]["cluster"]
        url = urlsplit(cluster["server"])
        self.upstream = (url.hostname or "127.0.0.1", url.port or 443)
        self._upstream_ssl = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        cert, key = self_signed(self.workdir)
        self._cert = cert
        self._server_ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ssl.load_cert_chain(cert, key)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = self._write_kubeconfig()
        self._thread: threading.Thread | None = None

    def _write_kubeconfig(self) -> Path:
        cfg = yaml.safe_load(yaml.safe_dump(self._upstream_cfg))
        cluster = cfg["clusters"][0]["cluster"]
        cluster["server"] = self.url
        cluster["certificate-authority-data"] = base64.b64encode(self._cert.read_bytes()).decode()
        path = self.workdir / "kubeconfig"
        path.write_text(yaml.safe_dump(cfg))
        return path

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- the proxy ------------------------------------------------------------------------

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _decide(self, watch: bool) -> tuple[str, float]:
        """One fault (or "" for none) and, for delay/cut, how many seconds."""
        if not self.enabled:
            return "", 0.0
        f = self.faults
        with self._lock:
            r = self._rng.random()
            seconds = self._rng.uniform(0, f.max_delay)
        for name, p in (("error", f.error), ("reset", f.reset), ("lost", f.lost)):
            if name == "lost" and watch:
                continue
            if r < p:
                return name, 0.0
            r -= p
        if watch and r < f.cut:
            return "cut", seconds
        if watch:
            r -= f.cut
        if r < f.delay:
            return "delay", seconds
        return "", 0.0

    def _serve(self, raw: socket.socket) -> None:
        try:
            raw.settimeout(30)
            client = self._server_ssl.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        try:
            request = _read_request(client)
            if request is None:
                return
            head, body, watch = request
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            forced = self.force(line) if self.force is not None and self.enabled else None
            fault, seconds = (forced, 0.0) if forced else self._decide(watch)
            with self._lock:
                self.counts["requests"] += 1
                if fault:
                    self.counts[fault] += 1
            if fault == "error":
                client.sendall(
                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(CANNED_500)}\r\nConnection: close\r\n\r\n".encode()
                    + CANNED_500
                )
                return
            if fault == "reset":
                _reset(client)
                return
            if fault == "delay":
                time.sleep(seconds)
            if fault == "hang":  # forced only: an API server that stopped answering
                self._stop.wait(self.hang_seconds)
            upstream = self._connect()
            try:
                upstream.sendall(head + body)
                if fault == "lost":
                    while upstream.recv(65536):  # let the server finish: it applied the request
                        pass
                    _reset(client)
                    return
                deadline = time.monotonic() + seconds if fault == "cut" else None
                upstream.settimeout(0.2 if deadline is not None else 60)
                while not self._stop.is_set():
                    try:
                        chunk = upstream.recv(65536)
                    except TimeoutError:
                        if deadline is not None and time.monotonic() >= deadline:
                            _reset(client)
                            return
                        continue
                    if not chunk:
                        break
                    client.sendall(chunk)
                    if deadline is not None and time.monotonic() >= deadline:
                        _reset(client)
                        return
            finally:
                with contextlib.suppress(OSError):
                    upstream.close()
        except (OSError, ssl.SSLError):
            pass
        finally:
            with contextlib.suppress(OSError):
                client.close()

    def _connect(self) -> ssl.SSLSocket:
        sock = socket.create_connection(self.upstream, timeout=30)
        return self._upstream_ssl.wrap_socket(sock, server_hostname=self.upstream[0])


def _read_request(sock: ssl.SSLSocket) -> tuple[bytes, bytes, bool] | None:
    """The request head (rewritten to ``Connection: close``), its body, and whether it is a
    watch. None if the client went away first."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
        if len(buf) > HEAD_LIMIT:
            raise OSError("request head too large")
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    request_line, headers = lines[0], lines[1:]
    length = 0
    kept = []
    for h in headers:
        name, _, value = h.partition(":")
        lname = name.strip().lower()
        if lname == "content-length":
            length = int(value.strip())
        if lname in ("connection", "keep-alive"):
            continue
        kept.append(h)
    if any(h.lower().startswith("transfer-encoding:") for h in kept):
        raise OSError("chunked request bodies are not supported by the fault proxy")
    body = rest
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    target = request_line.split(" ")[1] if " " in request_line else ""
    watch = "watch=true" in target or "watch=1" in target or "watch=True" in target
    new_head = "\r\n".join([request_line, *kept, "Connection: close"]) + "\r\n\r\n"
    return new_head.encode("latin-1"), body[:length], watch


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a crashed peer or a dropped NAT entry looks."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
