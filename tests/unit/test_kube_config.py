"""Loading the cluster configuration (adapters/infrastructure/kube/client.py `load_config`):
which kubeconfig is read, and a malformed one is one error naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightkube.core.exceptions import ConfigError

from cronsource.adapters.infrastructure.kube.client import load_config

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


def _write(path: Path, host: str) -> Path:
    path.write_text(KUBECONFIG % host)
    return path


def test_the_given_file_and_its_current_context(tmp_path: Path) -> None:
    got = load_config(str(_write(tmp_path / "k", "given")))
    assert got.cluster.server == "https://given:6443"
    assert got.namespace == "ns"


def test_outside_a_cluster_the_first_existing_file_of_KUBECONFIG(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    second = _write(tmp_path / "second", "second")
    _write(tmp_path / "third", "third")
    listed = [str(tmp_path / "missing"), str(second), str(tmp_path / "third")]
    monkeypatch.setenv("KUBECONFIG", ":".join(listed))
    assert load_config().cluster.server == "https://second:6443"


@pytest.mark.parametrize(
    "text",
    ["apiVersion: v1\nkind: Config\n", "clusters: 3\n", "{{{"],
    ids=["no clusters", "clusters not a list", "not YAML"],
)
def test_a_malformed_kubeconfig_is_one_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert str(path) in str(err.value)
