"""Side by side with Argo's cron controller: `python -m bench.argo --crons N [--store URL]`.

N CronWorkflows due at one instant H on the test kube-apiserver (tests/kube/apiserver.py, with
Argo's own CRDs), fired by each side in turn, each on a fresh server with the others not running:

- `argo`: Argo v4.0.5's real workflow-controller (tests/argo/peer.py) at its defaults
  (client rate limit 20 requests/s, burst 30, 8 cron workers);
- `argo-tuned`: the same with `--tuning` (default `--qps 500 --burst 1000
  --cron-workflow-workers 32`; the option can be given more than once, the fastest is named);
- `ours`: `cronsource run --kube` on a throwaway PostgreSQL database (`--store`);
- `limit`: no scheduler; at H a plain client creates the same N Workflows from pre-encoded
  bodies: what the server takes. It is the best of several (`--limit-variants`, each
  `CLIENT:PROTOCOL:CONNECTIONS:IN_FLIGHT`: aiohttp over HTTP/1.1, httpx over HTTP/2, and
  client-go over either, tests/argo/oracle/benchclient), each on a fresh server of its own
  holding the same N CronWorkflows; with no scheduler to load them, its H is 3 s after their
  creation. `limit_per_second`/`ratio_limit` are the best variant's; `limit_variants` and
  `limit_spread` say what each did and how far apart they were.

Argo runs with `--workflow-workers 0` (`--argo-workflow-workers`): its Workflow operator would
otherwise start on the Workflows as they appear, creating a Pod for each and writing their status
through the same client rate limiter the cron controller uses, work no other side does here.

Set-up, not timed: the server, a metadata-only watch on the Workflows of the namespace (started
first), the scheduler, then the N CronWorkflows (`m h d M *` in UTC: one tick a year, at H),
created by the same concurrent loop. H is the first whole minute at least `--lead` seconds
(default 20 s + 15 ms per CronWorkflow) after the server and the scheduler were started; the
run fails, saying so, if the scheduler has not loaded all N by 2 s before H (Argo: its log says
"CronWorkflow added" for each; ours: its store holds N CronWorkflowCreated events).

Timed, from H: each Workflow's arrival is the wall-clock time this process read its ADDED event
from the watch. `creationTimestamp` has whole-second resolution (an object created at H+0.9 s
shows H), so the skew is taken from the arrival instead: skew = arrival - H, which includes the
watch's delivery (a few ms) and is the same for every side. `seconds` is the last first
arrival minus H, `per_second` = N / seconds. A duplicate is a second Workflow for one
CronWorkflow (label `workflows.argoproj.io/cron-workflow`; the annotation
`workflows.argoproj.io/scheduled-time` is recorded too); a miss is a CronWorkflow with no
Workflow within 5 minutes of H. The run waits for all N (up to `--max-wait`), then 3 s more
for late duplicates, and checks the watch against a final list.

`--repeat K` runs all sides K times (a fresh server each time) and reports medians; the
duplicates and misses are totals over the K runs. The last line of stdout is one JSON object,
naming the `command` and the `commit` it ran; `python -m bench.report merge` combines runs of
one commit.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from bench.common import (
    BenchError,
    console,
    emit,
    git_commit,
    machine_note,
    percentile,
    progress,
    r,
    throwaway_store,
)
from cronsource.adapters.runtime.indexes import CREATED_TOPIC

NS = "bench"
GROUP, VERSION = "argoproj.io", "v1alpha1"
LABEL_CRON = "workflows.argoproj.io/cron-workflow"
ANNOTATION_SCHEDULED = "workflows.argoproj.io/scheduled-time"
DEFAULT_TUNING = "--qps 500 --burst 1000 --cron-workflow-workers 32"
MISS_AFTER = 300.0  # a tick with no Workflow this long after H is a miss
SETTLE = 3.0  # seconds to wait after the last first Workflow, for late duplicates
SIDES = ("limit", "argo", "argo-tuned", "ours")
#: Our side under faults (issue 24's fault runs; not in the default `--sides`):
#: `ours-proxy` runs through the fault proxy (tests/kube/faultproxy.py) with no fault, the
#: baseline of the next; `ours-5xx` through the same proxy answering 500 to 1 % of the
#: creates of Workflows; `ours-kill` on two replicas, the first (the one that projects and
#: dispatches) killed with SIGKILL once a quarter of the Workflows arrived.
FAULT_SIDES = ("ours-proxy", "ours-5xx", "ours-kill")
#: The share of `POST .../workflows` the proxy answers with a 500 on `ours-5xx`.
CREATE_5XX = 0.01
#: `ours-kill`: the share of the N Workflows seen before the first replica is killed, and
#: the seconds between the start of the first replica and of the second (so the first holds
#: the projector role: it dispatches, and its death stops the creates mid-burst).
KILL_AFTER_SHARE = 0.25
SECOND_REPLICA_AFTER = 3.0


# ---------------------------------------------------------------------- the server's Workflows


@dataclass
class Seen:
    """A Workflow as the watch delivered it."""

    name: str
    cron: str
    scheduled: str
    created: str  # creationTimestamp (whole seconds)
    arrival: float  # time.time() when its ADDED event was read


class Arrivals:
    """A metadata-only watch (PartialObjectMetadata) on the Workflows of one namespace, in a
    thread of its own: it records when each ADDED event arrived. Metadata only, so that the
    watch costs the server and this process as little as it can on a 2-core machine."""

    def __init__(self, kubeconfig: Path, ns: str) -> None:
        cfg = yaml.safe_load(kubeconfig.read_text())
        cluster = cfg["clusters"][0]["cluster"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.ssl = ssl.create_default_context(cadata=ca)
        self.token = cfg["users"][0]["user"]["token"]
        url = urlsplit(cluster["server"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.path = f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/workflows"
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._conn: http.client.HTTPSConnection | None = None
        self._thread = threading.Thread(target=self._run, name="arrivals", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self.ready.wait(30):
            raise BenchError(f"the watch on Workflows did not start: {self.error}")

    def stop(self) -> None:
        self._stop.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)

    def names(self) -> list[Seen]:
        with self.lock:
            return list(self.seen)

    def _run(self) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                rv = self._watch(rv)
            except Exception as e:  # reconnect from the last resourceVersion
                if self._stop.is_set():
                    return
                self.error = e
                time.sleep(0.2)

    def _watch(self, rv: str) -> str:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ssl, timeout=None)
        self._conn = conn
        query = "?watch=1&timeoutSeconds=3600" + (f"&resourceVersion={rv}" if rv else "")
        conn.request(
            "GET",
            self.path + query,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            },
        )
        resp = conn.getresponse()
        if resp.status != 200:
            raise BenchError(f"watch on Workflows: HTTP {resp.status} {resp.read()[:300]!r}")
        self.ready.set()
        for line in resp:
            arrival = time.time()
            if not line.strip():
                continue
            ev = json.loads(line)
            meta = ev["object"].get("metadata") or {}
            rv = meta.get("resourceVersion") or rv
            if ev["type"] == "ADDED":
                labels = meta.get("labels") or {}
                notes = meta.get("annotations") or {}
                with self.lock:
                    self.seen.append(
                        Seen(
                            meta["name"],
                            labels.get(LABEL_CRON, ""),
                            notes.get(ANNOTATION_SCHEDULED, ""),
                            meta.get("creationTimestamp", ""),
                            arrival,
                        )
                    )
            elif ev["type"] == "ERROR":
                return ""  # expired: list-then-watch again (everything is re-ADDED, deduplicated)
        conn.close()
        return rv


def requests_by_kind(server: Any) -> dict[str, int]:
    """The server's own count of requests (apiserver_request_total) on Workflows,
    CronWorkflows and Kubernetes Events, by `verb resource` (and the code, when it is not a
    success): what each side asked of it, watches and lists aside."""
    text = server.request("GET", "/metrics", timeout=30)
    counts: dict[str, int] = {}
    for line in text.splitlines() if isinstance(text, str) else []:
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(
            part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].split(",")
        )
        resource = labels.get("resource", "").strip('"')
        verb = labels.get("verb", "").strip('"')
        if resource in ("workflows", "cronworkflows", "events") and verb not in ("WATCH", "LIST"):
            code = labels.get("code", "").strip('"')
            key = f"{verb} {resource}" + ("" if code.startswith("2") else f" {code}")
            counts[key] = counts.get(key, 0) + int(float(line.rsplit(" ", 1)[1]))
    return counts


# ---------------------------------------------------------------------- the plain create loop


async def send(post: Callable[[bytes], Awaitable[int]], body: bytes, failures: list[str]) -> None:
    """One creation by `post` (which answers the HTTP status), retried up to 5 times on 429
    and 5xx; any other answer than 201, or the last retry's, is a failure."""
    status = 0
    for attempt in range(5):
        status = await post(body)
        if status == 201:
            return
        if status != 429 and status < 500:
            break
        await asyncio.sleep(0.1 * (attempt + 1))
    failures.append(f"HTTP {status}")


class Creator:
    """Create objects with a plain Python client, pre-encoded bodies, `in_flight` requests at
    once over `connections` connections: aiohttp (HTTP/1.1, the cheapest client Python has) or
    httpx with http2=True (`connections` clients, each one HTTP/2 connection when the server
    negotiates h2), so that what it measures is the server. `protocol` is what the server
    answered with (the last warm-up's HTTP version)."""

    def __init__(
        self,
        kubeconfig: Path,
        in_flight: int,
        connections: int | None = None,
        client: str = "aiohttp",
    ) -> None:
        cfg = yaml.safe_load(kubeconfig.read_text())
        cluster = cfg["clusters"][0]["cluster"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.ssl = ssl.create_default_context(cadata=ca)
        self.base = cluster["server"].rstrip("/")
        self.headers = {
            "Authorization": f"Bearer {cfg['users'][0]['user']['token']}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        self.in_flight = in_flight
        self.connections = connections or in_flight
        self.client = client
        self.protocol = ""
        self.late_start_ms: float | None = None

    def create(
        self,
        plural: str,
        bodies: Sequence[dict[str, Any]],
        advance: Callable[[], None],
        at: float | None = None,
    ) -> float:
        """Seconds it took to create all `bodies` (every answer must be 201). With `at` (a
        time.time()), the connections are opened first and the creations start at `at`, so
        that the timed part pays no TLS handshakes, as a running controller would not."""
        encoded = [json.dumps(b).encode() for b in bodies]
        if self.client == "httpx":
            return asyncio.run(self._create_httpx(plural, encoded, advance, at))
        return asyncio.run(self._create(plural, encoded, advance, at))

    def _url(self, plural: str) -> str:
        return f"{self.base}/apis/{GROUP}/{VERSION}/namespaces/{NS}/{plural}"

    async def _start_at(self, at: float | None) -> None:
        if at is not None:
            await asyncio.sleep(max(0.0, at - time.time()))
            self.late_start_ms = (time.time() - at) * 1000

    async def _create(
        self, plural: str, bodies: list[bytes], advance: Callable[[], None], at: float | None
    ) -> float:
        import aiohttp

        url = self._url(plural)
        failures: list[str] = []
        connector = aiohttp.TCPConnector(limit=self.connections, ssl=self.ssl)
        async with aiohttp.ClientSession(connector=connector, headers=self.headers) as session:
            queue = iter(bodies)
            self.protocol = "HTTP/1.1"
            if at is not None:

                async def warm() -> None:
                    async with session.get(url + "?limit=1") as resp:
                        await resp.read()

                await asyncio.gather(*(warm() for _ in range(self.connections)))
                await self._start_at(at)

            async def post(body: bytes) -> int:
                async with session.post(url, data=body) as resp:
                    await resp.read()
                    return resp.status

            async def worker() -> None:
                for body in queue:
                    await send(post, body, failures)
                    advance()

            began = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(self.in_flight)))
            seconds = time.perf_counter() - began
        if failures:
            raise BenchError(f"{len(failures)} creations of {plural} failed: {failures[:3]}")
        return seconds

    async def _create_httpx(
        self, plural: str, bodies: list[bytes], advance: Callable[[], None], at: float | None
    ) -> float:
        """`connections` httpx clients (http2=True, one connection each), the `in_flight`
        workers spread over them."""
        import httpx

        try:
            import h2  # noqa: F401  (httpx's HTTP/2 needs it)
        except ImportError as e:
            raise BenchError("httpx HTTP/2 needs the h2 package (the [bench] extra)") from e
        url = self._url(plural)
        failures: list[str] = []
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    httpx.AsyncClient(
                        http2=True, verify=self.ssl, headers=self.headers, limits=limits
                    )
                )
                for _ in range(self.connections)
            ]
            queue = iter(bodies)

            async def warm(c: httpx.AsyncClient) -> None:
                resp = await c.get(url, params={"limit": "1"})
                self.protocol = resp.http_version

            await asyncio.gather(*(warm(c) for c in clients))
            await self._start_at(at)

            async def worker(c: httpx.AsyncClient) -> None:
                async def post(body: bytes) -> int:
                    return (await c.post(url, content=body)).status_code

                for body in queue:
                    await send(post, body, failures)
                    advance()

            began = time.perf_counter()
            await asyncio.gather(
                *(worker(clients[w % len(clients)]) for w in range(self.in_flight))
            )
            seconds = time.perf_counter() - began
        if failures:
            raise BenchError(f"{len(failures)} creations of {plural} failed: {failures[:3]}")
        return seconds


# ---------------------------------------------------------------------- the limit's clients


@dataclass(frozen=True)
class Variant:
    """One plain client of the `limit` side: `CLIENT:PROTOCOL:CONNECTIONS:IN_FLIGHT`, e.g.
    `go:h2:1:256` (client aiohttp, httpx or go; protocol h1 or h2)."""

    client: str
    protocol: str
    connections: int
    in_flight: int

    @property
    def label(self) -> str:
        return f"limit-{self.client}-{self.protocol}-c{self.connections}-f{self.in_flight}"

    @property
    def spec(self) -> str:
        return f"{self.client}:{self.protocol}:{self.connections}:{self.in_flight}"

    @classmethod
    def parse(cls, spec: str) -> Variant:
        parts = spec.strip().split(":")
        ok = {("aiohttp", "h1"), ("httpx", "h2"), ("go", "h1"), ("go", "h2")}
        if len(parts) != 4 or (parts[0], parts[1]) not in ok:
            raise BenchError(
                f"--limit-variants: {spec!r} is not CLIENT:PROTOCOL:CONNECTIONS:IN_FLIGHT with"
                " CLIENT:PROTOCOL one of aiohttp:h1, httpx:h2, go:h1, go:h2"
            )
        try:
            conns, in_flight = int(parts[2]), int(parts[3])
        except ValueError:
            conns = in_flight = 0
        if conns < 1 or in_flight < conns:
            raise BenchError(
                f"--limit-variants: {spec!r}: CONNECTIONS must be at least 1 and at most IN_FLIGHT"
            )
        return cls(parts[0], parts[1], conns, in_flight)


# The aiohttp loop of earlier runs (64/64) and its neighbours; httpx and client-go over
# HTTP/2, one connection (what client-go does by default) and four; client-go over HTTP/1.1.
DEFAULT_LIMIT_VARIANTS = (
    "aiohttp:h1:16:16,aiohttp:h1:64:64,httpx:h2:1:64,httpx:h2:4:256,"
    "go:h2:1:64,go:h2:1:256,go:h2:4:256,go:h1:64:64"
)
LIMIT_LEAD = 3.0  # seconds from the set-up's end to H on the limit side (warm-up included)


def go_create(
    kubeconfig: Path, variant: Variant, bodies: Sequence[dict[str, Any]], at: float, work: Path
) -> subprocess.Popen[str]:
    """Start tests/argo/oracle/benchclient (built by scripts/build-argo.sh) on `bodies`, to
    begin at `at`; `go_result` reads its answer."""
    from tests.argo import peer

    path = work / "bodies.jsonl"
    with open(path, "w") as f:
        for b in bodies:
            f.write(json.dumps(b) + "\n")
    return subprocess.Popen(
        [
            str(peer.bench_client()),
            "-kubeconfig",
            str(kubeconfig),
            "-path",
            f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/workflows",
            "-bodies",
            str(path),
            "-connections",
            str(variant.connections),
            "-in-flight",
            str(variant.in_flight),
            "-at",
            f"{at:.6f}",
            *(["-http1"] if variant.protocol == "h1" else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def go_result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=MISS_AFTER)
    if proc.returncode != 0:
        raise BenchError(f"benchclient exited with {proc.returncode}: {err[-2000:]}")
    res: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    if res.get("failures"):
        raise BenchError(f"benchclient: {res['failures']} creations failed: {res['first_errors']}")
    return res


def cron_name(i: int) -> str:
    return f"cron-{i:06d}"


def cron_manifest(i: int, at: datetime) -> dict[str, Any]:
    """One tick a year, at `at` (UTC); concurrencyPolicy Allow, so no side looks at runs."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": cron_name(i), "namespace": NS},
        "spec": {
            "schedules": [f"{at.minute} {at.hour} {at.day} {at.month} *"],
            "timezone": "UTC",
            "concurrencyPolicy": "Allow",
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [
                    {"name": "main", "container": {"image": "busybox", "command": ["true"]}}
                ],
            },
        },
    }


def plain_workflow(i: int, at: datetime, owner_uid: str) -> dict[str, Any]:
    """The Workflow a cron controller makes for `cron_name(i)` at `at`: name, label, annotation,
    spec and the controller owner reference to the CronWorkflow's uid, as Argo's
    (`metav1.NewControllerRef`) and ours set them. The reference is not free: the API server
    took a fifth to a third more time per create with it (aiohttp:h1:64:64, N=1,000: 1,076
    and 1,132 Workflows/s against 1,269 and 1,550 without), so a limit without it is not the
    limit of creating these Workflows."""
    cron = cron_manifest(i, at)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workflow",
        "metadata": {
            "name": f"{cron_name(i)}-{int(at.timestamp())}",
            "namespace": NS,
            "labels": {LABEL_CRON: cron_name(i)},
            "annotations": {ANNOTATION_SCHEDULED: at.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "CronWorkflow",
                    "name": cron_name(i),
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": cron["spec"]["workflowSpec"],
    }


def cron_uids(server: Any) -> dict[str, str]:
    """The uid of each CronWorkflow on the server, by name (one list, before H)."""
    listed = server.request(
        "GET", f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/cronworkflows", timeout=120
    )
    return {o["metadata"]["name"]: o["metadata"]["uid"] for o in listed.get("items") or []}


# ---------------------------------------------------------------------- one side


@dataclass
class Side:
    """One scheduler (or none, for the limit) as it runs on a fresh server."""

    kind: str  # "argo" | "ours" | "limit"
    label: str  # "argo", "argo-tuned", "argo-tuned-2", "ours", "ours-<fault>", "limit-<variant>"
    args: list[str] = field(default_factory=list)
    variant: Variant | None = None  # the limit side's client


def load() -> str:
    """The 1-, 5- and 15-minute load averages (the machine is shared)."""
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "unknown"


def default_lead(n: int) -> float:
    """Enough for the creation of N CronWorkflows and their admission by `cronsource run
    --kube`, the slower of the two loaders (about 80 a second at N=10,000 on the shared
    2-core machine, where 20 s + 6 ms each fell short)."""
    return 20.0 + 0.015 * n


def next_minute(t: float) -> datetime:
    return datetime.fromtimestamp((int(t) // 60 + 1) * 60, UTC)


class ArgoLoaded:
    """How many CronWorkflows Argo's cron controller has added to its schedule, from its log."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.offset = 0
        self.added: set[str] = set()

    def count(self) -> int:
        with contextlib.suppress(OSError), open(self.log, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
            cut = chunk.rfind(b"\n") + 1
            self.offset += cut
            for line in chunk[:cut].decode(errors="replace").splitlines():
                if 'msg="CronWorkflow added"' in line:
                    for part in line.split():
                        if part.startswith(f"cronWorkflow={NS}/"):
                            self.added.add(part.split("/", 1)[1])
        return len(self.added)


class OursLoaded:
    """How many CronWorkflows `cronsource run --kube` has admitted, from its log."""

    def __init__(self, store: Any) -> None:
        from cronsource.adapters.bootstrap import bootstrap

        self.engine = bootstrap(store, create_tables=False)

    def count(self) -> int:
        from bench.common import count_topic

        return len(count_topic(self.engine.service, CREATED_TOPIC))

    def close(self) -> None:
        self.engine.close()


def limit_create(
    kubeconfig: Path, side: Side, n: int, h: datetime, work: Path, uids: dict[str, str]
) -> dict[str, Any]:
    """The limit side's creations of the N Workflows from H with `side.variant`'s client,
    each owned by its CronWorkflow (`uids`); what the client saw (protocol, its own seconds,
    how late it started)."""
    v = side.variant
    assert v is not None
    bodies = [plain_workflow(i, h, uids[cron_name(i)]) for i in range(n)]
    hts = h.timestamp()
    if v.client == "go":
        res = go_result(go_create(kubeconfig, v, bodies, hts, work))
        seconds, protocol, late = res["seconds"], res["protocol"], res["late_start_ms"]
    else:
        creator = Creator(kubeconfig, v.in_flight, v.connections, v.client)
        seconds = creator.create("workflows", bodies, lambda: None, at=hts)
        protocol, late = creator.protocol, creator.late_start_ms
    if late is not None and late > 1000:
        raise BenchError(f"{side.label}: the client started {late:.0f} ms after H")
    return {
        "client": v.spec,
        "protocol": protocol,
        "client_seconds": r(seconds, 3),
        "late_start_ms": r(late),
    }


def start_ours(store: str, kubeconfig: Path, log: Path, args: list[str]) -> subprocess.Popen[str]:
    """One `cronsource run --kube` replica on `store`, its output in `log`."""
    exe = Path(sys.executable).parent / "cronsource"
    with open(log, "w") as out:
        return subprocess.Popen(
            [str(exe), "--store", store, "run", "--kube", "--kubeconfig", str(kubeconfig), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )


@contextlib.contextmanager
def fault_proxy(kubeconfig: Path, workdir: Path, label: str) -> Iterator[Any]:
    """The fault proxy in front of the server: no fault (`ours-proxy`), or a 500 for
    CREATE_5XX of the creates of Workflows (`ours-5xx`). The proxy opens a connection per
    request (tests/kube/faultproxy.py), so both sides pay the same for it, and the cost of
    the 500s is the difference between them."""
    import random

    from tests.kube.faultproxy import FaultProxy, Faults

    with FaultProxy(kubeconfig, workdir / "proxy", Faults(), seed=24) as proxy:
        if label == "ours-5xx":
            rng, lock = random.Random(24), threading.Lock()

            def force(line: str) -> str | None:
                if not (line.startswith("POST ") and f"/namespaces/{NS}/workflows" in line):
                    return None
                with lock:
                    return "error" if rng.random() < CREATE_5XX else None

            proxy.force = force
        yield proxy


def run_side(
    side: Side,
    n: int,
    pg: str | None,
    lead: float | None,
    in_flight: int,
    max_wait: float,
    bar: Any,
    profile: str | None = None,
) -> dict[str, Any]:
    from tests.argo import peer
    from tests.kube import apiserver

    began = time.time()
    load_before = load()
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cronsource-argo-")))
        task = bar.add_task(f"{side.label}: start the server", total=None)
        server = apiserver.start(workdir / "server", crds=peer.argo_crds())
        stack.callback(server.stop, remove_data=True)
        server.create_namespace(NS)
        arrivals = Arrivals(server.kubeconfig, NS)
        arrivals.start()
        stack.callback(arrivals.stop)
        bar.update(task, total=1, completed=1)

        log = workdir / f"{side.label}.log"
        loaded: Callable[[], int] | None = None
        proc: subprocess.Popen[str] | None = None
        second: subprocess.Popen[str] | None = None  # ours-kill's surviving replica
        proxy: Any = None  # ours-proxy, ours-5xx: the fault proxy in front of the server
        killed: dict[str, Any] | None = None  # ours-kill: when, and how far the burst was
        if side.kind == "argo":
            proc = peer.start_argo(server, NS, log, side.args)
            stack.callback(peer.stop, proc)
            loaded = ArgoLoaded(log).count
        elif side.kind == "ours":
            t = stack.enter_context(throwaway_store(pg, "argo"))
            kubeconfig = server.kubeconfig
            if side.label in ("ours-proxy", "ours-5xx"):
                proxy = stack.enter_context(fault_proxy(server.kubeconfig, workdir, side.label))
                kubeconfig = proxy.kubeconfig
            proc = start_ours(t.url, kubeconfig, log, side.args)
            stack.callback(peer.stop, proc, 30.0)
            if side.label == "ours-kill":
                time.sleep(SECOND_REPLICA_AFTER)  # the first takes the projector role alone
                second = start_ours(t.url, kubeconfig, workdir / "second.log", side.args)
                stack.callback(peer.stop, second, 30.0)
            ours = OursLoaded(t.config)
            stack.callback(ours.close)
            loaded = ours.count

        def alive() -> None:
            if second is not None and second.poll() is not None:
                tail = (workdir / "second.log").read_text(errors="replace")[-3000:]
                raise BenchError(f"{side.label}'s second replica exited:\n{tail}")
            if killed is None and proc is not None and proc.poll() is not None:
                tail = log.read_text(errors="replace")[-3000:]
                raise BenchError(f"{side.label} exited with {proc.returncode}:\n{tail}")

        # H counts from now: the server and the scheduler's process are up
        h = next_minute(time.time() + (lead if lead is not None else default_lead(n)))
        hts = h.timestamp()
        creator = Creator(server.kubeconfig, in_flight)
        task = bar.add_task(f"{side.label}: create CronWorkflows (H {h:%H:%M:%S})", total=n)
        create_s = creator.create(
            "cronworkflows", [cron_manifest(i, h) for i in range(n)], lambda: bar.advance(task)
        )
        uids: dict[str, str] = {}
        if side.kind == "limit":
            # No scheduler to load them (they are there so that the server holds what it
            # holds for the other sides, and own the Workflows as they would): H is a few
            # seconds on, not a whole minute.
            uids = cron_uids(server)
            h = datetime.fromtimestamp(int(time.time() + LIMIT_LEAD) + 1, UTC)
            hts = h.timestamp()
        if loaded is not None:
            task = bar.add_task(f"{side.label}: loaded by the scheduler", total=n)
            while (k := loaded()) < n:
                alive()
                bar.update(task, completed=k)
                if time.time() > hts - 2:
                    raise BenchError(
                        f"{side.label} had loaded {k} of {n} CronWorkflows 2 s before the"
                        f" instant {h:%H:%M:%S}: give a longer --lead"
                    )
                time.sleep(0.5)
            bar.update(task, completed=n)
        loaded_s = time.time() - began
        load_at = load()
        if time.time() > hts - 1:
            raise BenchError(
                f"set-up took {loaded_s:.0f} s, past the instant: give a longer --lead"
            )

        spy: subprocess.Popen[bytes] | None = None
        if profile and side.kind == "ours" and proc is not None:
            time.sleep(max(0.0, hts - 1 - time.time()))
            spy = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "py-spy"),
                    "record",
                    "--pid",
                    str(proc.pid),
                    "--rate",
                    "200",
                    "--format",
                    "raw",
                    "--output",
                    profile,
                    "--threads",
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        # Counted from just before H: the set-up's own requests (our side writes the first
        # status of each admitted CronWorkflow after loading) are not the burst's.
        time.sleep(max(0.0, hts - 0.5 - time.time()))
        before = requests_by_kind(server)
        task = bar.add_task(f"{side.label}: Workflows after H", total=n)
        client: dict[str, Any] = {}
        if side.kind == "limit":
            client = limit_create(server.kubeconfig, side, n, h, workdir, uids)
        deadline = hts + max_wait
        firsts: dict[str, float] = {}
        while time.time() < deadline:
            alive()
            seen = arrivals.names()
            firsts = {}
            for s in seen:
                if s.cron not in firsts or s.arrival < firsts[s.cron]:
                    firsts[s.cron] = s.arrival
            bar.update(task, completed=len(firsts))
            if len(firsts) >= n:
                break
            if second is not None and killed is None and len(firsts) >= n * KILL_AFTER_SHARE:
                assert proc is not None
                proc.kill()  # SIGKILL: no stop, no snapshot, a crash mid-burst
                killed = {"killed_after_ms": r((time.time() - hts) * 1000), "seen": len(firsts)}
                continue  # no sleep: the kill is taken as soon as the quarter is seen
            time.sleep(0.25)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        time.sleep(SETTLE)
        seen = arrivals.names()
        after = requests_by_kind(server)
        asked = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
        listed = len(
            server.request("GET", f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/workflows")["items"]
        )
        load_after = load()
    faults: dict[str, Any] = {}
    if proxy is not None:
        faults = {"injected_5xx": proxy.counts["error"], "proxied": proxy.counts["requests"]}
    if side.label == "ours-kill":
        if killed is None:
            raise BenchError(f"{side.label}: the burst ended before the first replica was killed")
        faults = killed
    return (
        {"requests_after_h": asked}
        | client
        | ({"faults": faults} if faults else {})
        | measure(
            side,
            n,
            h,
            seen,
            listed,
            create_s,
            loaded_s,
            hts - began,
            [load_before, load_at, load_after],
            arrivals.error,
        )
    )


def measure(
    side: Side,
    n: int,
    h: datetime,
    seen: list[Seen],
    listed: int,
    create_s: float,
    loaded_s: float,
    lead_s: float,
    loads: list[str],
    watch_error: BaseException | None,
) -> dict[str, Any]:
    hts = h.timestamp()
    by_name: dict[str, Seen] = {}
    for s in seen:  # a re-list after a watch error re-ADDs what was seen: one per name
        by_name.setdefault(s.name, s)
    if listed != len(by_name):
        raise BenchError(
            f"{side.label}: the watch saw {len(by_name)} Workflows, the server lists {listed}"
            f" (watch error: {watch_error})"
        )
    per_cron: dict[str, list[Seen]] = {}
    for s in by_name.values():
        per_cron.setdefault(s.cron, []).append(s)
    wanted = {cron_name(i) for i in range(n)}
    stray = sorted(set(per_cron) - wanted)
    if stray:
        raise BenchError(f"{side.label}: Workflows of unknown CronWorkflows: {stray[:5]}")
    firsts = {c: min(x.arrival for x in ws) for c, ws in per_cron.items()}
    skews = [(t - hts) * 1000 for t in firsts.values()]
    in_time = [c for c, t in firsts.items() if t - hts <= MISS_AFTER]
    duplicates = sum(len(ws) - 1 for ws in per_cron.values())
    misses = n - len(in_time)
    seconds = max(firsts.values()) - hts if len(firsts) == n else float("nan")
    scheduled = {x.scheduled for ws in per_cron.values() for x in ws}
    created = [
        datetime.strptime(x.created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp() - hts
        for ws in per_cron.values()
        for x in ws
        if x.created
    ]
    return {
        "side": side.label,
        "args": " ".join(side.args),
        "n": n,
        "instant": h.isoformat(),
        "seconds": r(seconds, 3),
        "per_second": r(n / seconds if seconds == seconds and seconds > 0 else float("nan")),
        "p50_ms": r(percentile(skews, 0.5)),
        "p99_ms": r(percentile(skews, 0.99)),
        "max_ms": r(max(skews) if skews else float("nan")),
        "first_ms": r(min(skews) if skews else float("nan")),
        # creationTimestamp - H, whole seconds as the server stores them
        "created_p99_s": r(percentile(created, 0.99), 0),
        "workflows": len(by_name),
        "duplicates": duplicates,
        "misses": misses,
        "late": len(firsts) - len(in_time),
        "scheduled_times": sorted(scheduled)[:3],
        "create_crons_seconds": r(create_s, 2),
        "setup_seconds": r(loaded_s, 1),
        "lead_seconds": r(lead_s, 1),
        "load": loads,  # /proc/loadavg at the start, at H, at the end
    }


# ---------------------------------------------------------------------- all sides


def median(xs: list[float | None]) -> float | None:
    nums = [x for x in xs if x is not None and x == x]
    return statistics.median(nums) if nums else None


def summarise(runs: dict[str, list[dict[str, Any]]], key: str) -> dict[str, Any]:
    rs = runs.get(key) or []
    return {
        "per_second": r(median([x["per_second"] for x in rs])),
        "seconds": r(median([x["seconds"] for x in rs]), 3),
        "p50_ms": r(median([x["p50_ms"] for x in rs])),
        "p99_ms": r(median([x["p99_ms"] for x in rs])),
        # None, not 0, for a side that did not run: no figure is not a clean figure
        "duplicates": sum(x["duplicates"] for x in rs) if rs else None,
        "misses": sum(x["misses"] for x in rs) if rs else None,
        "late": sum(x["late"] for x in rs) if rs else None,
    }


def go_client_error(sides: list[Side]) -> str | None:
    """Build (or find) the Go client before any side runs, not at H: why it cannot be had."""
    if not any(s.variant and s.variant.client == "go" for s in sides):
        return None
    from tests.argo import peer

    try:
        peer.bench_client()
    except peer.ArgoPeerError as e:
        return f"the Go client (go:* variants) could not be built: {e}"
    return None


def limit_summary(
    runs: dict[str, list[dict[str, Any]]], limits: list[Side]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each plain client's figures (median over --repeat) and the spread of the limit side:
    over the variants' medians and over every run of every variant. The best is the variant
    with the highest median Workflows/s: the figure the limit keys report."""
    variants: list[dict[str, Any]] = []
    every: list[float] = []
    for side in limits:
        rs = runs.get(side.label) or []
        per = [x["per_second"] for x in rs if x.get("per_second") is not None]
        every += per
        assert side.variant is not None
        variants.append(
            {
                "label": side.label,
                "client": side.variant.spec,
                "protocol": sorted({x.get("protocol", "") for x in rs}),
                "runs": len(rs),
                "per_second": r(median(list(per))),
                "per_second_runs": per,
                "p99_ms": r(median([x["p99_ms"] for x in rs])),
            }
        )
    ran = [v for v in variants if v["per_second"] is not None]
    best = max(ran, key=lambda v: v["per_second"], default=None)
    medians = [v["per_second"] for v in ran]

    def span(xs: list[float]) -> dict[str, float | None]:
        return {
            "min": min(xs) if xs else None,
            "median": r(median(list(xs))),
            "max": max(xs) if xs else None,
        }

    spread = {
        "best": best["label"] if best else None,
        "over_variants": span(medians),
        "over_runs": span(every),
        "best_runs": span(best["per_second_runs"]) if best else span([]),
    }
    return variants, spread


def ratio(a: float | None, b: float | None) -> float | None:
    return r(a / b, 3) if a and b else None


@contextlib.contextmanager
def postgres(url: str | None) -> Iterator[str]:
    """The given server, else $CRONSOURCE_BENCH_PG or $CRONSOURCE_TEST_PG, else a throwaway
    one started by tests/pgserver.py."""
    url = url or os.environ.get("CRONSOURCE_BENCH_PG") or os.environ.get("CRONSOURCE_TEST_PG")
    if url:
        yield url
        return
    from tests import pgserver

    with pgserver.running_server() as (found, _handle):
        yield found


def peer_version() -> str:
    from tests.argo import peer

    out = subprocess.run(
        [str(peer.controller()), "version"], capture_output=True, text=True, timeout=30
    ).stdout
    for line in out.splitlines():
        if line.startswith("workflow-controller:"):
            return line.split(":", 1)[1].strip()
    return peer.ARGO_VERSION


def run(a: argparse.Namespace, argv: list[str] | None = None) -> dict[str, Any]:
    argo_base = ["--workflow-workers", str(a.argo_workflow_workers)]
    tunings = a.tuning or [DEFAULT_TUNING]
    sides: list[Side] = []
    for name in a.sides.split(","):
        if name == "limit":
            for spec in a.limit_variants.split(","):
                v = Variant.parse(spec)
                sides.append(Side("limit", v.label, [], v))
        elif name == "argo":
            sides.append(Side("argo", "argo", argo_base))
        elif name == "argo-tuned":
            for k, tuning in enumerate(tunings):
                label = "argo-tuned" if k == 0 else f"argo-tuned-{k + 1}"
                sides.append(Side("argo", label, argo_base + tuning.split()))
        elif name == "ours" or name in FAULT_SIDES:
            sides.append(Side("ours", name, []))
        else:
            known = ", ".join(SIDES + FAULT_SIDES)
            raise BenchError(f"--sides: unknown side {name!r} (one of {known})")
    runs: dict[str, list[dict[str, Any]]] = {}
    errors: list[str] = []
    out = console()
    go_error = go_client_error(sides)
    if go_error:  # the Python variants still run
        errors.append(go_error)
        out.log(go_error)
        sides = [s for s in sides if not (s.variant and s.variant.client == "go")]
    defaults_repeat = a.repeat if a.argo_defaults_repeat is None else a.argo_defaults_repeat
    commit = git_commit()  # the code as the sides start (a commit during the runs is not theirs)
    with postgres(a.store) as pg, progress() as bar:
        for k in range(a.repeat):
            for side in sides:
                if side.label == "argo" and k >= defaults_repeat:
                    continue
                try:
                    res = run_side(
                        side,
                        a.crons,
                        pg,
                        a.lead,
                        a.in_flight,
                        a.max_wait,
                        bar,
                        f"{a.profile}.{k + 1}" if a.profile else None,
                    )
                except BenchError as e:  # the other sides' figures are kept
                    errors.append(f"run {k + 1} {side.label}: {e}")
                    out.log(f"run {k + 1}/{a.repeat} {side.label} failed: {e}")
                    continue
                # every side's figures on stderr as they come, so none is lost with a later one
                print("side-result: " + json.dumps(res), file=sys.stderr, flush=True)
                out.log(
                    f"run {k + 1}/{a.repeat} {side.label}: {res['per_second']}/s, p99"
                    f" {res['p99_ms']} ms, dup {res['duplicates']}, miss {res['misses']},"
                    f" load {res['load']}"
                )
                runs.setdefault(side.label, []).append(res)
    command = " ".join(["python -m bench.argo", *(argv if argv is not None else sys.argv[1:])])
    version = peer_version() if any(s.kind == "argo" for s in sides) else None
    return summary(runs, sides, a.crons, a.repeat, errors, commit, command, version)


def summary(
    runs: dict[str, list[dict[str, Any]]],
    sides: list[Side],
    n: int,
    repeat: int,
    errors: list[str],
    commit: str,
    command: str,
    version: str | None,
) -> dict[str, Any]:
    """The result object from every side's runs: medians, ratios, the limit's spread."""
    ours, argo = summarise(runs, "ours"), summarise(runs, "argo")
    variants, spread = limit_summary(runs, [s for s in sides if s.kind == "limit"])
    best_limit = spread["best"]
    limit = summarise(runs, best_limit) if best_limit else summarise(runs, "limit")
    tuned_labels = [s for s in runs if s.startswith("argo-tuned")]
    best = max(tuned_labels, key=lambda s: summarise(runs, s)["per_second"] or 0, default=None)
    tuned = summarise(runs, best) if best else summarise(runs, "argo-tuned")
    tuning_of = {s.label: " ".join(s.args) for s in sides}
    return {
        "name": "argo",
        "n": n,
        "repeat": repeat,
        "seconds": ours["seconds"],
        "per_second": ours["per_second"],
        "p50_ms": ours["p50_ms"],
        "p99_ms": ours["p99_ms"],
        "duplicates": ours["duplicates"],
        "misses": ours["misses"],
        "peer_per_second": argo["per_second"],
        "ratio": ratio(ours["per_second"], argo["per_second"]),
        "peer_tuned_per_second": tuned["per_second"],
        "ratio_tuned": ratio(ours["per_second"], tuned["per_second"]),
        "limit_per_second": limit["per_second"],
        "ratio_limit": ratio(ours["per_second"], limit["per_second"]),
        "peer_version": version,
        "peer_seconds": argo["seconds"],
        "peer_p50_ms": argo["p50_ms"],
        "peer_p99_ms": argo["p99_ms"],
        "peer_duplicates": argo["duplicates"],
        "peer_misses": argo["misses"],
        "peer_late": argo["late"],
        "peer_tuned_seconds": tuned["seconds"],
        "peer_tuned_p99_ms": tuned["p99_ms"],
        "peer_tuned_duplicates": tuned["duplicates"],
        "peer_tuned_misses": tuned["misses"],
        "peer_tuning": tuning_of.get(best or "", ""),
        "peer_defaults": tuning_of.get("argo", ""),
        "limit_p99_ms": limit["p99_ms"],
        "limit_best": best_limit,
        "limit_variants": variants,
        "limit_spread": spread,
        "commit": commit,
        "command": command,
        "timing": "skew = arrival of the ADDED watch event at this process - H",
        # "limit": the best plain client, as the keys above (each variant is under its label)
        "sides": {label: summarise(runs, label) | {"args": tuning_of[label]} for label in runs}
        | ({"limit": limit | {"args": best_limit, "variant": best_limit}} if best_limit else {}),
        # Our side under faults, each with what was injected per run; the duplicates and
        # misses are totals, as above.
        "faults": {
            label: summarise(runs, label) | {"injected": [x.get("faults") for x in runs[label]]}
            for label in FAULT_SIDES
            if label in runs
        },
        "errors": errors,
        "each_run": runs,
        "store": "postgresql",
        "machine": machine_note(),
    }


def sides_of(result: dict[str, Any]) -> list[Side]:
    """The sides a result ran, rebuilt from its JSON (for `merge`)."""
    sides: list[Side] = []
    for label, rs in (result.get("each_run") or {}).items():
        args = str((result.get("sides") or {}).get(label, {}).get("args") or "").split()
        if label.startswith("limit-"):
            sides.append(Side("limit", label, [], Variant.parse(rs[0]["client"])))
        elif label.startswith("argo"):
            sides.append(Side("argo", label, args))
        elif label == "ours" or label in FAULT_SIDES:
            sides.append(Side("ours", label, args))
        else:
            raise BenchError(f"merge: a side {label!r} this version of bench.argo does not know")
    return sides


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from several runs of bench.argo at one commit and one N (e.g. the limit and
    Argo from one run, our side from another): every side's runs are kept as they were
    measured, the medians and ratios are computed again. Runs without a commit, at other
    commits or at another N are refused, saying which."""
    if not parts:
        raise BenchError("merge: no runs to merge")
    for k, part in enumerate(parts, 1):
        if part.get("name") != "argo" or not part.get("commit") or part["commit"] == "unknown":
            raise BenchError(f"merge: part {k} is not a bench.argo result naming its commit")
    commits = sorted({p["commit"] for p in parts})
    if len(commits) > 1:
        raise BenchError(f"merge: the runs are of different commits: {', '.join(commits)}")
    sizes = sorted({p["n"] for p in parts})
    if len(sizes) > 1:
        raise BenchError(f"merge: the runs are of different N: {sizes}")
    runs: dict[str, list[dict[str, Any]]] = {}
    sides: dict[str, Side] = {}
    for part in parts:
        for side in sides_of(part):
            sides.setdefault(side.label, side)
            runs.setdefault(side.label, []).extend(part["each_run"][side.label])
    out = summary(
        runs,
        list(sides.values()),
        sizes[0],
        max(len(rs) for rs in runs.values()) if runs else 0,
        [e for p in parts for e in p.get("errors") or []],
        commits[0],
        " + ".join(p.get("command", "?") for p in parts),
        next((p["peer_version"] for p in parts if p.get("peer_version")), None),
    )
    out["merged_from"] = [
        {"command": p.get("command"), "commit": p["commit"], "sides": sorted(p["each_run"])}
        for p in parts
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.argo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--crons", type=int, default=1000, help="N CronWorkflows (default 1000)")
    ap.add_argument("--store", default=None, help="PostgreSQL server URL for our side")
    ap.add_argument("--repeat", type=int, default=1, help="K runs of every side; medians")
    ap.add_argument(
        "--sides",
        default=",".join(SIDES),
        help=f"comma-separated (default {','.join(SIDES)}; under faults: {','.join(FAULT_SIDES)})",
    )
    ap.add_argument(
        "--tuning",
        action="append",
        help=f"Argo's tuned flags (default {DEFAULT_TUNING!r}); repeat to try several",
    )
    ap.add_argument(
        "--argo-workflow-workers",
        type=int,
        default=0,
        help="Argo's --workflow-workers (default 0: its Workflow operator off, see above)",
    )
    ap.add_argument(
        "--argo-defaults-repeat",
        type=int,
        default=None,
        help="runs of Argo at its defaults (default --repeat; at 20 requests/s they are slow)",
    )
    ap.add_argument("--lead", type=float, default=None, help="seconds of set-up before H")
    ap.add_argument(
        "--in-flight", type=int, default=32, help="CronWorkflow creations at once (set-up)"
    )
    ap.add_argument(
        "--limit-variants",
        default=DEFAULT_LIMIT_VARIANTS,
        help="the limit side's plain clients, comma-separated CLIENT:PROTOCOL:CONNECTIONS:IN_FLIGHT"
        f" (default {DEFAULT_LIMIT_VARIANTS})",
    )
    ap.add_argument(
        "--max-wait", type=float, default=1800.0, help="seconds after H to wait for all N"
    )
    ap.add_argument(
        "--profile",
        metavar="FILE",
        help="py-spy (raw, all threads) our cronsource process from H - 1 s to the last"
        " Workflow, into FILE.<run>",
    )
    a = ap.parse_args(argv)
    if min(a.crons, a.repeat, a.in_flight) < 1:
        ap.error("--crons, --repeat and --in-flight must be at least 1")
    try:
        for spec in a.limit_variants.split(","):
            Variant.parse(spec)
    except BenchError as e:
        ap.error(str(e))
    if a.profile and not (Path(sys.executable).parent / "py-spy").exists():
        ap.error("--profile needs py-spy beside this Python: pip install -e '.[bench]'")
    if a.max_wait < MISS_AFTER:
        ap.error(f"--max-wait must be at least {MISS_AFTER:.0f} (a miss is 5 minutes late)")
    from tests.argo.peer import ArgoPeerError
    from tests.kube.apiserver import ApiServerError

    try:
        result = run(a, argv)
    except (BenchError, ArgoPeerError, ApiServerError) as e:
        print(f"bench.argo: {e}", file=sys.stderr)
        return 2
    emit(result)
    for error in result["errors"]:
        print(f"bench.argo: {error}", file=sys.stderr)
    if result["errors"]:
        return 2
    # None: our side was not among --sides (a failed side is in "errors" above)
    clean = [(result["duplicates"], result["misses"])] + [
        (f["duplicates"], f["misses"]) for f in result["faults"].values()
    ]
    return 0 if all(d in (0, None) and m in (0, None) for d, m in clean) else 1


if __name__ == "__main__":
    sys.exit(main())
