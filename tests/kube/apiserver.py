"""A real Kubernetes API server for the tests: start, stop, pytest fixture functions.

The server is ``tests/kube/apiserver/`` (Go): the full ``kube-apiserver`` of Kubernetes v1.37.2
(the core API, apps, batch, RBAC, admission, the aggregator, CustomResourceDefinitions:
resourceVersion preconditions, 409 conflicts, the watch cache, bookmarks, 410 Gone) on an
embedded etcd, all on 127.0.0.1. ``scripts/build-test-apiserver.sh`` builds it once per machine
into a cache directory (many minutes cold, instant after). ``start`` runs it, waits for READY
and ``/readyz``, installs our CronWorkflow and Workflow CRDs from ``deploy/crds/`` and waits
until they are Established.

Authorization is RBAC; the admin token of the kubeconfig is a user in ``system:masters``, which
may do everything (including impersonation and SubjectAccessReviews). Admission is the default
set, so a namespaced object needs its Namespace: ``kube_namespace`` creates one.

What this server is not: there is no controller manager, scheduler or kubelet. Objects are
stored and validated, but Pods never run, Jobs and Deployments never make Pods, a deleted
Namespace stays Terminating, and garbage collection of owned objects never happens.

Importable from tests and runnable as a CLI::

    python -m tests.kube.apiserver start WORKDIR   # prints the kubeconfig path, runs until ^C

If ``CRONSOURCE_TEST_APISERVER`` names a binary, it is used instead of building one. A server
that cannot be built or started fails the tests; it never skips them.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import queue
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.buildscript import built_paths

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-test-apiserver.sh"
CRD_DIR = REPO / "deploy" / "crds"
ENV_BINARY = "CRONSOURCE_TEST_APISERVER"
BUILD_TIMEOUT = 2700.0  # a cold build on 2 cores takes many minutes (see the script)
READY_TIMEOUT = 120.0
CRD_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class ApiServerError(RuntimeError):
    """The test API server could not be built, started or set up."""


@cache
def binary() -> Path:
    """The server binary: ``$CRONSOURCE_TEST_APISERVER``, or built (or reused) by the script."""
    explicit = os.environ.get(ENV_BINARY)
    if explicit:
        path = Path(explicit)
        if not os.access(path, os.X_OK):
            raise ApiServerError(f"{ENV_BINARY}={explicit} is not an executable file")
        return path
    (path,) = built_paths(BUILD_SCRIPT, 1, BUILD_TIMEOUT, ApiServerError)
    return path


def load_crds(crd_dir: Path = CRD_DIR) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in ``crd_dir/*.yaml``."""
    crds = []
    for path in sorted(crd_dir.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                crds.append(doc)
    if not crds:
        raise ApiServerError(f"no CustomResourceDefinition in {crd_dir}")
    return crds


@dataclass
class ApiServer:
    """A running test API server. ``kubeconfig`` works with kubectl and the kubernetes client."""

    workdir: Path
    kubeconfig: Path
    url: str
    admin_url: str
    token: str
    port: int
    process: subprocess.Popen[str]
    log_path: Path
    startup_seconds: float
    extra_args: tuple[str, ...] = ()
    crds: list[dict[str, Any]] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` for this server (close it when done)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def request(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """A plain HTTPS request with the admin token; returns the decoded JSON (or text)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            content_type = "application/json"
            if method == "PATCH":
                content_type = "application/merge-patch+json"
            req.add_header("Content-Type", content_type)
        with urllib.request.urlopen(req, timeout=timeout, context=self._ssl()) as resp:
            raw = resp.read().decode()
        try:
            return json.loads(raw)
        except ValueError:
            return raw

    def _ssl(self) -> ssl.SSLContext:
        cfg = yaml.safe_load(self.kubeconfig.read_text())
        ca = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"])
        return ssl.create_default_context(cadata=ca.decode())

    def revision(self) -> int:
        """etcd's current revision (the newest resourceVersion of any object)."""
        with urllib.request.urlopen(self.admin_url + "/revision", timeout=10) as resp:
            return int(resp.read())

    def compact(self) -> int:
        """Compact etcd so that every resourceVersion older than the newest object's is gone;
        returns the compacted revision.

        Requests served by etcd from an older resourceVersion then get 410 Gone: watches and
        exact-version lists on a server started with ``--watch-cache=false``. With the watch
        cache on (the default) watches and lists are served from the cache, which keeps its own
        history (at least 75 s): compaction alone does not expire them; ``expire_watch_cache``
        or ``restart`` does."""
        req = urllib.request.Request(self.admin_url + "/compact", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.read())

    def expire_watch_cache(self, crd_name: str) -> int:
        """Make the server forget the watch history of one custom resource, as a CRD upgrade
        does: a change of the CRD's spec rebuilds that resource's storage and watch cache, which
        starts again from etcd's current revision. Open watches on it end, and a watch from an
        older resourceVersion gets 410 Gone. (The change toggles a category in
        ``spec.names.categories``; nothing else.) Returns once a watch from the revision
        before the change gets 410; returns that revision."""
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd_name}"
        crd = self.request("GET", path)
        before = self.revision()
        categories = list(crd["spec"]["names"].get("categories") or [])
        marker = "cronsource-test-expired"
        if marker in categories:
            categories.remove(marker)
        else:
            categories.append(marker)
        self.request("PATCH", path, {"spec": {"names": {"categories": categories}}})
        wait_established(self, [crd_name], CRD_TIMEOUT)
        spec = crd["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("served"))
        watch = (
            f"/apis/{spec['group']}/{version}/{spec['names']['plural']}"
            f"?watch=1&resourceVersion={before}&timeoutSeconds=1"
        )
        _until(lambda: _watch_gone(self, watch), CRD_TIMEOUT, f"{crd_name} watch cache renewed")
        return before

    def create_namespace(self, name: str) -> None:
        """Create the Namespace ``name`` (one already there is left alone)."""
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        try:
            self.request("POST", "/api/v1/namespaces", body)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise ApiServerError(
                    f"creating Namespace {name}: {exc.code} {exc.read()[:2000]!r}"
                ) from exc

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, *, remove_data: bool = False) -> None:
        """SIGTERM, then SIGKILL if it does not stop in time. The work dir (kubeconfig, log)
        stays; the etcd data and certificates (about 60 MB) too unless ``remove_data``."""
        _terminate(self.process)
        _running.pop(id(self), None)
        if remove_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def restart(self, timeout: float = READY_TIMEOUT) -> None:
        """Stop and start again on the same port, data and token: the kubeconfig stays valid,
        the objects stay, open watches end and the watch caches start again."""
        self.stop()
        new = _launch(
            self.workdir,
            port=self.port,
            token=self.token,
            extra_args=self.extra_args,
            timeout=timeout,
        )
        self.process, self.url, self.admin_url = new.process, new.url, new.admin_url
        self.startup_seconds = new.startup_seconds
        _running[id(self)] = self
        wait_established(self, [c["metadata"]["name"] for c in self.crds], CRD_TIMEOUT)


def start(
    workdir: Path | str,
    *,
    extra_args: Sequence[str] = (),
    crds: list[dict[str, Any]] | None = None,
    timeout: float = READY_TIMEOUT,
) -> ApiServer:
    """Start a server whose files live in ``workdir`` (created), install the CRDs (default: all
    of ``deploy/crds/``) and wait until they are Established. ``extra_args`` go to the server,
    e.g. ``["--watch-cache=false"]`` or ``["-v=4"]``."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    server = _launch(
        workdir,
        port=0,
        token=secrets.token_hex(24),
        extra_args=tuple(extra_args),
        timeout=timeout,
    )
    try:
        server.crds = load_crds() if crds is None else crds
        install_crds(server, server.crds)
    except BaseException:
        server.stop()
        raise
    _running[id(server)] = server
    return server


def _launch(
    workdir: Path, *, port: int, token: str, extra_args: tuple[str, ...], timeout: float
) -> ApiServer:
    exe = binary()
    kubeconfig = workdir / "kubeconfig"
    log_path = workdir / "apiserver.log"
    args = [
        str(exe),
        f"--write-kubeconfig={kubeconfig}",
        f"--data-dir={workdir / 'data'}",
        f"--port={port}",
        f"--token={token}",
        "--exit-on-stdin-eof",
        *extra_args,
    ]
    began = time.monotonic()
    with open(log_path, "a") as log:  # the child has its own copy of the descriptor
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,  # kept open: the server exits when we die
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,  # a ^C in the terminal reaches pytest, not the server
        )
    _children.add(proc)

    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True, name="apiserver-stdout").start()
    deadline = began + timeout
    ready = None
    while ready is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _terminate(proc)
            raise ApiServerError(f"no READY in {timeout:.0f} s; log:\n{_tail(log_path)}")
        try:
            line = lines.get(timeout=min(remaining, 1.0))
        except queue.Empty:
            continue
        if line is None:
            proc.wait()
            raise ApiServerError(
                f"the API server exited ({proc.returncode}) before READY; log:\n{_tail(log_path)}"
            )
        if line.startswith("READY "):
            ready = line.split()
    url = ready[1]
    admin = next((p.split("=", 1)[1] for p in ready[2:] if p.startswith("admin=")), "")
    server = ApiServer(
        workdir=workdir,
        kubeconfig=kubeconfig,
        url=url,
        admin_url=admin,
        token=token,
        port=int(url.rsplit(":", 1)[1]),
        process=proc,
        log_path=log_path,
        startup_seconds=0.0,
        extra_args=extra_args,
    )
    try:
        _wait_readyz(server, deadline)
    except BaseException:
        _terminate(proc)
        raise
    server.startup_seconds = time.monotonic() - began
    return server


def _wait_readyz(server: ApiServer, deadline: float) -> None:
    last = ""
    while time.monotonic() < deadline:
        if not server.alive():
            raise ApiServerError(f"the API server exited; log:\n{server.log_tail()}")
        try:
            if server.request("GET", "/readyz", timeout=5) == "ok":
                return
        except (urllib.error.URLError, OSError) as exc:
            last = repr(exc)
        time.sleep(0.1)
    raise ApiServerError(f"/readyz not ok in time (last: {last}); log:\n{server.log_tail()}")


def install_crds(server: ApiServer, crds: list[dict[str, Any]]) -> None:
    """Create the CRDs (those already there are left alone) and wait until all are served."""
    for crd in crds:
        try:
            server.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise ApiServerError(
                    f"creating CRD {crd['metadata']['name']}: {exc.code} {exc.read()[:2000]!r}"
                ) from exc
    wait_established(server, [c["metadata"]["name"] for c in crds], CRD_TIMEOUT)
    # Established means served; make sure a list answers before the tests start.
    for crd in crds:
        spec = crd["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("served"))
        _until(
            lambda s=spec, v=version: _lists(server, s["group"], v, s["names"]["plural"]),
            CRD_TIMEOUT,
            f"listing {spec['names']['plural']}.{spec['group']}",
        )


def wait_established(server: ApiServer, names: Sequence[str], timeout: float) -> None:
    def established(name: str) -> bool:
        crd = server.request(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        )
        # Just after creation the server may answer `conditions: null`.
        conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
        return conds.get("Established") == "True" and conds.get("NamesAccepted") == "True"

    for name in names:
        _until(lambda n=name: established(n), timeout, f"CRD {name} Established")


def _lists(server: ApiServer, group: str, version: str, plural: str) -> bool:
    try:
        server.request("GET", f"/apis/{group}/{version}/{plural}?limit=1")
    except urllib.error.HTTPError:
        return False
    return True


def _watch_gone(server: ApiServer, path: str) -> bool:
    """True if the watch at ``path`` answers 410 Gone (as a status or as an ERROR event)."""
    try:
        raw = server.request("GET", path, timeout=10)
    except urllib.error.HTTPError as exc:
        return exc.code == 410
    events = raw if isinstance(raw, list) else [raw]
    if isinstance(raw, str):
        events = [json.loads(line) for line in raw.splitlines() if line.strip()]
    return any(
        isinstance(e, dict) and e.get("type") == "ERROR" and e["object"].get("code") == 410
        for e in events
    )


def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise ApiServerError(f"timed out waiting for {what}")
        time.sleep(0.05)


_children: set[subprocess.Popen[str]] = set()
# The servers that ``start`` started and that were not stopped: ``kube_namespace`` creates its
# Namespace in each of them.
_running: dict[int, ApiServer] = {}


@atexit.register
def _stop_children() -> None:
    for proc in list(_children):
        _terminate(proc)


def _terminate(proc: subprocess.Popen[str]) -> None:
    _children.discard(proc)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


# -- pytest fixture functions (wrapped with pytest.fixture in tests/conftest.py) --------------


def kube_apiserver(tmp_path_factory: Any) -> Iterator[ApiServer]:
    """Session: one server with the CRDs installed, stopped at the end."""
    server = start(tmp_path_factory.mktemp("kube-apiserver"))
    try:
        yield server
    finally:
        server.stop(remove_data=True)


def kube_api(kube_apiserver: ApiServer) -> Iterator[Any]:
    """Function: a ``kubernetes.client.ApiClient`` on the session server."""
    client = kube_apiserver.api_client()
    try:
        yield client
    finally:
        client.close()


def kube_namespace() -> str:
    """Function: a fresh Namespace, so tests do not see each other's objects. It is created in
    every server started and not stopped yet: the session one and those of higher-scoped
    fixtures (pytest sets those up before this one). It is never deleted: without a controller
    manager a deleted Namespace would stay Terminating, and the servers are thrown away."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    for server in list(_running.values()):
        if server.alive():
            server.create_namespace(name)
    return name


def _main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or argv[0] != "start":
        print("usage: python -m tests.kube.apiserver start WORKDIR", file=sys.stderr)
        return 2
    server = start(argv[1])
    print(f"kubeconfig: {server.kubeconfig}  ({server.url}, up in {server.startup_seconds:.1f} s)")
    print("export KUBECONFIG=" + str(server.kubeconfig), flush=True)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
