"""Loading the cluster configuration (adapters/infrastructure/kube/kubeconfig.py): which
kubeconfig is read, $KUBECONFIG's files merged as kubectl merges them (client-go's clientcmd
loading rules), a cluster's proxy-url, and a malformed one is one error naming the file."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp_socks import ProxyConnector
from lightkube.core.exceptions import ConfigError

from cronsource.adapters.infrastructure.kube.client import _connector, choose_proxy
from cronsource.adapters.infrastructure.kube.kubeconfig import load_config, merge_kubeconfigs

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://%s:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u, namespace: ns}
current-context: x
"""


@pytest.fixture(autouse=True)
def outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """No service account, no proxy variables: each test sets what it reads."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for name in ("KUBECONFIG", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def _write(path: Path, host: str) -> Path:
    path.write_text(KUBECONFIG % host)
    return path


def _yaml(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def _kubeconfig_env(monkeypatch: pytest.MonkeyPatch, *paths: Path | str) -> None:
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(str(p) for p in paths))


def test_the_given_file_and_its_current_context(tmp_path: Path) -> None:
    got = load_config(str(_write(tmp_path / "k", "given"))).config
    assert got.cluster.server == "https://given:6443"
    assert got.namespace == "ns"


# -- $KUBECONFIG: a list of files, merged --------------------------------------------------


def test_the_first_file_that_defines_a_name_wins_the_whole_entry() -> None:
    """Given two files that both define cluster `c` (and user `u`), when merged, then the
    first file's entries are taken whole (not field by field) and names only the second
    defines are added."""
    first = {
        "clusters": [{"name": "c", "cluster": {"server": "https://first"}}],
        "users": [{"name": "u", "user": {"token": "first"}}],
    }
    second = {
        "clusters": [
            {"name": "c", "cluster": {"server": "https://second", "proxy-url": "http://p:1"}},
            {"name": "d", "cluster": {"server": "https://d"}},
        ],
        "users": [{"name": "u", "user": {"token": "second", "username": "admin"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }
    merged = merge_kubeconfigs([(Path("/a/k1"), first), (Path("/b/k2"), second)])
    assert merged["clusters"] == [
        {"name": "c", "cluster": {"server": "https://first"}},
        {"name": "d", "cluster": {"server": "https://d"}},
    ]
    assert merged["users"] == [{"name": "u", "user": {"token": "first"}}]
    assert merged["contexts"] == [{"name": "x", "context": {"cluster": "c", "user": "u"}}]


@pytest.mark.parametrize(
    ("currents", "expected"),
    [
        pytest.param([None, "b", "c"], "b", id="first that sets it, not the first file"),
        pytest.param(["a", "b", None], "a", id="first file"),
        pytest.param(["", "b", None], "b", id="an empty one does not count"),
        pytest.param([None, None, None], None, id="none sets it"),
    ],
)
def test_current_context_comes_from_the_first_file_that_sets_it(
    currents: list[str | None], expected: str | None
) -> None:
    documents = [
        (Path(f"/k{i}"), {} if current is None else {"current-context": current})
        for i, current in enumerate(currents)
    ]
    assert merge_kubeconfigs(documents).get("current-context") == expected


def test_relative_paths_are_relative_to_the_file_that_defines_the_entry() -> None:
    """Given the cluster in /team/clusters and the user in /home/me/creds, both with relative
    paths, when merged, then each path is joined to its own file's directory; absolute
    paths, and an exec command without a path separator (looked up on PATH), are kept."""
    clusters = {
        "clusters": [
            {"name": "c", "cluster": {"server": "https://c", "certificate-authority": "ca.crt"}},
            {"name": "abs", "cluster": {"server": "https://a", "certificate-authority": "/ca"}},
        ]
    }
    creds: dict[str, Any] = {
        "users": [
            {
                "name": "cert",
                "user": {
                    "client-certificate": "pki/me.crt",
                    "client-key": "../keys/me.key",
                    "tokenFile": "token",
                },
            },
            {"name": "plugin", "user": {"exec": {"apiVersion": "v1", "command": "bin/get-token"}}},
            {"name": "on-path", "user": {"exec": {"apiVersion": "v1", "command": "gcloud-auth"}}},
        ]
    }
    merged = merge_kubeconfigs(
        [(Path("/team/clusters/config"), clusters), (Path("/home/me/creds/config"), creds)]
    )
    cas = [c["cluster"]["certificate-authority"] for c in merged["clusters"]]
    assert cas == ["/team/clusters/ca.crt", "/ca"]
    cert, plugin, on_path = (u["user"] for u in merged["users"])
    assert cert == {
        "client-certificate": "/home/me/creds/pki/me.crt",
        "client-key": "/home/me/keys/me.key",
        "tokenFile": "/home/me/creds/token",
    }
    assert plugin["exec"]["command"] == "/home/me/creds/bin/get-token"
    assert on_path["exec"]["command"] == "gcloud-auth"
    assert creds["users"][0]["user"]["tokenFile"] == "token"  # the input is not changed


def test_a_split_kubeconfig_loads_cluster_from_one_file_and_credentials_from_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given $KUBECONFIG naming a missing file, the cluster+context file and the users file,
    when loaded, then the context's user comes from the second file, its relative tokenFile
    is resolved against that file's directory (not the working directory), and the missing
    file is skipped."""
    cluster = _yaml(
        tmp_path / "team" / "config",
        {
            "clusters": [{"name": "c", "cluster": {"server": "https://team:6443"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "me"}}],
            "current-context": "x",
        },
    )
    creds = _yaml(
        tmp_path / "mine" / "creds",
        {"users": [{"name": "me", "user": {"tokenFile": "token"}}]},
    )
    _kubeconfig_env(monkeypatch, tmp_path / "missing", cluster, creds)
    monkeypatch.chdir(tmp_path)
    got = load_config()
    assert got.config.cluster.server == "https://team:6443"
    assert got.config.user is not None
    assert got.config.user.token_file == str(tmp_path / "mine" / "token")
    assert got.source == f"{cluster}, {creds}"


def test_an_empty_file_in_the_list_is_an_empty_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    _kubeconfig_env(monkeypatch, empty, _write(tmp_path / "k", "second"))
    assert load_config().config.cluster.server == "https://second:6443"


def test_when_no_file_of_the_list_exists_the_error_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kubeconfig_env(monkeypatch, tmp_path / "a", tmp_path / "b")
    with pytest.raises(ConfigError) as err:
        load_config()
    assert str(err.value) == f"Configuration file {tmp_path / 'a'}, {tmp_path / 'b'} not found"


def test_a_given_kubeconfig_is_one_file_not_a_list(tmp_path: Path) -> None:
    """--kubeconfig FILE is not split at ':' (a missing file is an error, not skipped)."""
    real = _write(tmp_path / "k", "given")
    with pytest.raises(ConfigError, match="not found"):
        load_config(f"{tmp_path / 'missing'}{os.pathsep}{real}")


def test_a_context_naming_a_user_no_file_defines_is_one_error_naming_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _write(tmp_path / "k", "c")
    document = yaml.safe_load(first.read_text())
    document["contexts"][0]["context"]["user"] = "nobody"
    first.write_text(yaml.safe_dump(document))
    other = _yaml(tmp_path / "other", {"users": [{"name": "me", "user": {"token": "t"}}]})
    _kubeconfig_env(monkeypatch, first, other)
    with pytest.raises(ConfigError) as err:
        load_config()
    assert str(err.value) == f"{first}, {other}: context 'x' names 'nobody', which no file defines"


def test_a_kubeconfig_without_a_current_context_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "bare"
    path.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert str(err.value) == f"{path}: the kubeconfig has no current context"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("clusters: 3\n", "clusters: not a list"),
        ("users: [3]\n", "users[0]: an entry needs a name"),
        ("contexts: [{name: x, context: 3}]\n", "contexts[0] (x): context: not a mapping"),
        ("- a list\n", "not a kubeconfig"),
        ("{{{", "not a usable kubeconfig"),
    ],
    ids=["clusters not a list", "unnamed", "body not a mapping", "list", "not YAML"],
)
def test_a_malformed_kubeconfig_is_one_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, says: str
) -> None:
    path = tmp_path / "bad"
    path.write_text(text)
    _kubeconfig_env(monkeypatch, path, _write(tmp_path / "good", "good"))
    for given in (str(path), None):  # given, and in the list
        with pytest.raises(ConfigError) as err:
            load_config(given)
        assert str(path) in str(err.value) and says in str(err.value)
        assert "\n" not in str(err.value)


# -- proxy-url ---------------------------------------------------------------------------------


def _with_proxy(path: Path, proxy_url: str, cluster: str = "c") -> Path:
    document = yaml.safe_load(KUBECONFIG % "api.example")
    document["clusters"].append({"name": "other", "cluster": {"server": "https://other"}})
    for entry in document["clusters"]:
        if entry["name"] == cluster:
            entry["cluster"]["proxy-url"] = proxy_url
    return _yaml(path, document)


def test_the_selected_clusters_proxy_url_beats_the_environment_and_no_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given HTTPS_PROXY, and NO_PROXY naming the server, when the selected cluster has a
    proxy-url, then every request goes through the proxy-url: client-go answers it for
    every request (http.ProxyURL), without looking at NO_PROXY."""
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    monkeypatch.setenv("NO_PROXY", "api.example")
    got = load_config(str(_with_proxy(tmp_path / "k", "http://bastion:8888")))
    assert got.proxy_url == "http://bastion:8888"
    assert choose_proxy(got.config.cluster.server, got.proxy_url) == "http://bastion:8888"


def test_without_a_proxy_url_the_environment_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another cluster's proxy-url is not this one's: HTTPS_PROXY applies, unless NO_PROXY
    names the server."""
    got = load_config(str(_with_proxy(tmp_path / "k", "http://bastion:8888", cluster="other")))
    assert got.proxy_url is None
    server = got.config.cluster.server
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    assert choose_proxy(server, got.proxy_url) == "http://env-proxy:3128"
    monkeypatch.setenv("NO_PROXY", "api.example")
    assert choose_proxy(server, got.proxy_url) is None


@pytest.mark.parametrize(
    ("proxy_url", "says"),
    [
        ("socks4://p:1080", "unsupported scheme 'socks4', must be http, https or socks5"),
        ("bastion:8888", "unsupported scheme 'bastion'"),
        ("http://", "no host"),
        ("http://p:port", "not a URL"),
    ],
)
def test_a_proxy_url_kubectl_refuses_is_one_error_naming_the_field_and_value(
    tmp_path: Path, proxy_url: str, says: str
) -> None:
    path = _with_proxy(tmp_path / "k", proxy_url)
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert str(err.value).startswith(f"{path}: cluster 'c': proxy-url {proxy_url!r}: {says}")


def test_an_http_proxy_is_named_per_request_and_socks5_is_the_connectors() -> None:
    """aiohttp speaks http(s) proxies itself (`proxy=` on each request, so watches too);
    socks5 goes through aiohttp-socks' connector, on Go's default port 1080 when none is
    named, with its credentials, and the requests name no proxy."""

    async def build(proxy: str | None) -> tuple[aiohttp.TCPConnector, str | None]:
        connector, per_request = _connector(proxy, True)
        await connector.close()
        return connector, per_request

    connector, per_request = asyncio.run(build("http://bastion:8888"))
    assert type(connector) is aiohttp.TCPConnector and per_request == "http://bastion:8888"
    connector, per_request = asyncio.run(build(None))
    assert type(connector) is aiohttp.TCPConnector and per_request is None
    connector, per_request = asyncio.run(build("socks5://me:p%40ss@bastion"))
    assert isinstance(connector, ProxyConnector) and per_request is None
    assert (connector._proxy_host, connector._proxy_port) == ("bastion", 1080)
    assert (connector._proxy_username, connector._proxy_password) == ("me", "p@ss")
    assert connector._rdns is True
