"""kubectl's kubeconfig habits against the real test API server (tests/kube/apiserver.py),
through cronsource's own client (adapters/infrastructure/kube/client.py `connect`):

- $KUBECONFIG naming two files, one with the cluster and context, the other with the user's
  credentials, each with a path relative to its own directory: merged, cronsource connects.
- a cluster's proxy-url, http (a real CONNECT proxy) and socks5 (a real SOCKS5 proxy), used
  for requests and watches alike, ahead of HTTPS_PROXY and NO_PROXY. The kubeconfig names the
  server at a port nothing listens on, which only the proxy maps to the real one: a request
  that bypassed the proxy would be refused, so a passing call went through it.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from cronsource.adapters.infrastructure.kube import AioKube, connect
from tests.kube import apiserver as kube
from tests.kube.proxies import ConnectProxy, Socks5Proxy, closed_port, running

pytestmark = pytest.mark.k8s

CWF = "cronworkflows"


@pytest.fixture(autouse=True)
def outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for name in ("KUBECONFIG", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def _server_kubeconfig(server: kube.ApiServer) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(server.kubeconfig.read_text())
    return document


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def _calls(k: AioKube, namespace: str) -> None:
    """A watch first (the first connection of the pool is the watch's), then the ordinary
    requests: create, get, list, delete."""

    async def watch() -> list[str]:
        return [
            e["type"]
            async for e in k.watch(
                namespace, CWF, label_selector="", resource_version="0", timeout_seconds=1
            )
        ]

    k.run(watch())  # ended by the server after 1 s; without the proxy: ApiError(0)
    body = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "via-proxy"},
        "spec": {"schedules": ["*/5 * * * *"], "workflowSpec": {"entrypoint": "main"}},
    }
    k.run(k.create(namespace, CWF, body))
    assert k.run(k.get(namespace, CWF, "via-proxy"))["metadata"]["name"] == "via-proxy"
    listed = k.run(k.list(namespace, CWF, ""))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["via-proxy"]
    k.run(k.delete(namespace, CWF, "via-proxy"))


def test_kubeconfig_list_merges_cluster_file_and_credentials_file(
    kube_apiserver: kube.ApiServer,
    kube_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """$KUBECONFIG = a missing file, the cluster's file (its CA a file beside it, named
    relatively), the user's file (its token a file beside it, named relatively); run from
    a third directory. cronsource connects with the cluster from the first and the token
    from the second, as kubectl would."""
    served = _server_kubeconfig(kube_apiserver)
    cluster = served["clusters"][0]["cluster"]
    team = tmp_path / "team"
    team.mkdir()
    (team / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    cluster_file = _write(
        team / "config",
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": cluster["server"], "certificate-authority": "ca.crt"},
                }
            ],
            "contexts": [
                {
                    "name": "test",
                    "context": {"cluster": "test", "user": "me", "namespace": kube_namespace},
                }
            ],
            "current-context": "test",
        },
    )
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "token").write_text(kube_apiserver.token)
    creds_file = _write(
        mine / "credentials",
        {
            "apiVersion": "v1",
            "kind": "Config",
            "users": [{"name": "me", "user": {"tokenFile": "token"}}],
        },
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv(
        "KUBECONFIG",
        os.pathsep.join([str(tmp_path / "missing"), str(cluster_file), str(creds_file)]),
    )
    k = connect()
    try:
        assert k.run(k.list(kube_namespace, CWF, ""))["items"] == []
    finally:
        k.close()


def _behind_a_proxy(
    server: kube.ApiServer, tmp_path: Path, proxy_url: Callable[[], str]
) -> tuple[Path, tuple[str, int], tuple[str, int]]:
    """A kubeconfig naming the server at a port nothing listens on, with a proxy-url; the
    address it names and the real one, for the proxy's route. (The same host: the server's
    certificate is for 127.0.0.1 only.)"""
    served = _server_kubeconfig(server)
    real = urlsplit(served["clusters"][0]["cluster"]["server"])
    named = (real.hostname or "", closed_port())
    cluster = served["clusters"][0]["cluster"]
    cluster["server"] = f"https://{named[0]}:{named[1]}"
    cluster["proxy-url"] = proxy_url()
    return _write(tmp_path / "kubeconfig", served), named, (real.hostname or "", real.port or 0)


def test_http_proxy_url_carries_requests_and_watches_ahead_of_the_environment(
    kube_apiserver: kube.ApiServer,
    kube_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HTTPS_PROXY names a proxy nothing listens on and NO_PROXY names the server: neither
    applies, the cluster's proxy-url does (client-go's http.ProxyURL)."""
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with running(ConnectProxy()) as proxy:
        path, named, real = _behind_a_proxy(
            kube_apiserver, tmp_path, lambda: f"http://127.0.0.1:{proxy.port}"
        )
        proxy.route[named] = real
        k = connect(str(path))
        try:
            _calls(k, kube_namespace)
        finally:
            k.close()
        assert proxy.tunnels and set(proxy.tunnels) == {named}


def test_socks5_proxy_url_with_credentials_carries_requests_and_watches(
    kube_apiserver: kube.ApiServer,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    """socks5://user:password@host:port, as `ssh -D` or a bastion offers; TLS to the server
    runs inside the tunnel."""
    with running(Socks5Proxy(credentials=("me", "p@ss"))) as proxy:
        path, named, real = _behind_a_proxy(
            kube_apiserver, tmp_path, lambda: f"socks5://me:p%40ss@127.0.0.1:{proxy.port}"
        )
        assert isinstance(proxy, Socks5Proxy)
        proxy.route[named] = real
        k = connect(str(path))
        try:
            _calls(k, kube_namespace)
        finally:
            k.close()
        assert proxy.tunnels and set(proxy.tunnels) == {named}


def test_run_kube_with_credentials_the_api_server_refuses_exits_in_one_line(
    kube_apiserver: Any, tmp_path: Path
) -> None:
    """It said "ready" and then failed every watch with 401 for ever, a traceback each time."""
    from tests.faults.harness import cronsource_bin

    bad = tmp_path / "kubeconfig"
    bad.write_text(kube_apiserver.kubeconfig.read_text().replace(kube_apiserver.token, "wrong"))
    done = subprocess.run(
        [
            cronsource_bin(),
            "--store",
            f"sqlite:///{tmp_path / 'cs.db'}",
            "run",
            "--kube",
            "--kubeconfig",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: --kube: the API server refused the credentials: 401 Unauthorized"
    ]
