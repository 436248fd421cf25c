"""Which cluster, with which credentials, through which proxy: the kubeconfig as kubectl reads it.

lightkube (`KubeConfig`) reads one kubeconfig file and keeps only the fields it uses. kubectl
(client-go's `clientcmd` loading rules, tools/clientcmd/loader.go) does two more things people
rely on, which this module adds in front of lightkube:

- `$KUBECONFIG=a:b:c` is a list of files, merged: for clusters, contexts and users, the first
  file that defines a name wins (the whole entry, not field by field); `current-context` comes
  from the first file that sets it; a relative path in an entry (`certificate-authority`,
  `client-certificate`, `client-key`, `tokenFile`, an exec `command` with a path separator) is
  relative to the file that defines the entry; files that do not exist are skipped (an empty
  file is an empty config). A kubeconfig kept in pieces (the cluster from one team, the
  credentials from another) works as it does with kubectl.
- a cluster's `proxy-url` (http, https or socks5) is used for every request to that cluster,
  in place of HTTPS_PROXY, and NO_PROXY does not apply to it: client-go sets
  `http.ProxyURL(proxy-url)`, which answers the same proxy for every request. lightkube's model
  drops the field, so it is read from the merged document.

`merge_kubeconfigs` is the pure part (documents in, one document out); `load_config` reads the
files and hands the result to lightkube.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from lightkube.config.kubeconfig import DEFAULT_KUBECONFIG, KubeConfig, SingleConfig
from lightkube.core.exceptions import ConfigError

#: The named lists of a kubeconfig and the key of each item's body.
ENTRIES = (("clusters", "cluster"), ("contexts", "context"), ("users", "user"))
#: Fields holding a file path, per list (client-go's GetClusterFileReferences and
#: GetAuthInfoFileReferences; an exec command only when it has a path separator, else it is
#: looked up on PATH).
PATH_FIELDS = {
    "clusters": ("certificate-authority",),
    "contexts": (),
    "users": ("client-certificate", "client-key", "tokenFile"),
}
#: The schemes client-go accepts in a cluster's proxy-url (tools/clientcmd/helpers.go).
PROXY_SCHEMES = ("http", "https", "socks5")
#: What names the in-cluster configuration in messages.
IN_CLUSTER = "in-cluster"


@dataclass(frozen=True)
class ClusterConfig:
    """The selected context, as lightkube models it, and what lightkube leaves out."""

    config: SingleConfig
    #: The selected cluster's proxy-url, checked (None: none is set, the environment decides).
    proxy_url: str | None
    #: What it was read from, for messages: the files, or "in-cluster".
    source: str


def merge_kubeconfigs(documents: Sequence[tuple[Path, Any]]) -> dict[str, Any]:
    """One kubeconfig document from several, by clientcmd's rules (module docstring).

    `documents` are the parsed YAML of each file with the file's absolute path, in $KUBECONFIG
    order. The result has `clusters`, `contexts` and `users` lists (each name once, relative
    paths made absolute against the directory of the file that defined the entry) and
    `current-context` if any file sets it. A document that is not a kubeconfig's shape raises
    ConfigError naming its file and the field.
    """
    merged: dict[str, Any] = {key: [] for key, _ in ENTRIES}
    seen: dict[str, set[str]] = {key: set() for key, _ in ENTRIES}
    for path, document in documents:
        if document is None:  # an empty file: an empty config, as in client-go
            continue
        if not isinstance(document, Mapping):
            raise ConfigError(f"{path}: not a kubeconfig (expected a YAML mapping)")
        current = document.get("current-context")
        if current and "current-context" not in merged:
            merged["current-context"] = current
        for key, body_key in ENTRIES:
            for name, body in _entries(path, document, key, body_key):
                if name in seen[key]:
                    continue
                seen[key].add(name)
                merged[key].append({"name": name, body_key: _resolve_paths(key, body, path.parent)})
    return merged


def _entries(
    path: Path, document: Mapping[str, Any], key: str, body_key: str
) -> list[tuple[str, Mapping[str, Any]]]:
    """The (name, body) pairs of one list of a document; ConfigError naming what is wrong."""
    items = document.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise ConfigError(f"{path}: {key}: not a list")
    found = []
    for i, item in enumerate(items):
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}: {key}[{i}]: an entry needs a name")
        body = item.get(body_key)
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            raise ConfigError(f"{path}: {key}[{i}] ({name}): {body_key}: not a mapping")
        found.append((name, body))
    return found


def _resolve_paths(key: str, body: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """A copy of an entry with its relative file paths joined to `base` (client-go's
    ResolvePaths: empty and absolute paths are left alone)."""
    out = dict(body)
    for field in PATH_FIELDS[key]:
        if field in out:
            out[field] = _joined(out[field], base)
    if key == "users" and isinstance(out.get("exec"), Mapping):
        exec_ = dict(out["exec"])
        command = exec_.get("command")
        if isinstance(command, str) and os.sep in command:
            exec_["command"] = _joined(command, base)
        out["exec"] = exec_
    return out


def _joined(value: Any, base: Path) -> Any:
    if isinstance(value, str) and value and not os.path.isabs(value):
        return os.path.normpath(os.path.join(base, value))
    return value


def check_proxy_url(value: Any) -> str:
    """The proxy-url if client-go would take it; ValueError saying why not otherwise."""
    if not isinstance(value, str):
        raise ValueError("not a string")
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 -- raises ValueError on a port that is not a number
    except ValueError as e:
        raise ValueError(f"not a URL ({e})") from e
    if parts.scheme not in PROXY_SCHEMES:
        raise ValueError(f"unsupported scheme {parts.scheme!r}, must be http, https or socks5")
    if not parts.hostname:
        raise ValueError("no host")
    return value


def kubeconfig_files(kubeconfig: str | None) -> list[str]:
    """The files to read: the one given (`--kubeconfig`: not a list), else $KUBECONFIG's
    list (each file once, in order), else ~/.kube/config."""
    if kubeconfig:
        return [kubeconfig]
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return list(dict.fromkeys(listed)) or [DEFAULT_KUBECONFIG]


def load_config(kubeconfig: str | None = None) -> ClusterConfig:
    """The cluster and credentials to use: the kubeconfig given, else in-cluster (the pod's
    service account), else the files of $KUBECONFIG merged (module docstring), else
    ~/.kube/config; its current context, and its cluster's proxy-url. Raises ConfigError,
    naming the file(s), if none can be loaded."""
    if not kubeconfig:
        try:
            return ClusterConfig(
                _single(KubeConfig.from_service_account(), IN_CLUSTER), None, IN_CLUSTER
            )
        except (ConfigError, KeyError):  # KeyError: no KUBERNETES_SERVICE_HOST/_PORT
            pass
    listed = kubeconfig_files(kubeconfig)
    # A file given with --kubeconfig must exist; one of $KUBECONFIG may not (client-go).
    found = [p for p in listed if os.path.exists(os.path.expanduser(p))]
    if not found:
        raise ConfigError(f"Configuration file {', '.join(listed)} not found")
    documents = [(Path(os.path.abspath(os.path.expanduser(p))), _read(p)) for p in found]
    merged = merge_kubeconfigs(documents)
    source = ", ".join(found)
    try:
        single = _single(KubeConfig.from_dict(merged, fname=documents[0][0]), source)
    except ConfigError:
        raise
    except Exception as e:  # a malformed entry: KeyError, msgspec's errors
        raise ConfigError(f"{source}: not a usable kubeconfig ({type(e).__name__}: {e})") from e
    return ClusterConfig(single, _proxy_url(merged, single, source), source)


def _read(path: str) -> Any:
    """A file's YAML document; ConfigError naming the file if it cannot be read or parsed."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            return yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        said = " ".join(str(e).split())  # one line: PyYAML's messages span several
        raise ConfigError(f"{path}: not a usable kubeconfig ({type(e).__name__}: {said})") from e


def _single(found: KubeConfig, where: str) -> SingleConfig:
    if found.current_context is None:
        raise ConfigError(f"{where}: the kubeconfig has no current context")
    try:
        single = found.get()
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from e
    except KeyError as e:  # the context names a cluster or user no file defines
        raise ConfigError(
            f"{where}: context {found.current_context!r} names {e}, which no file defines"
        ) from e
    if single is None:
        raise ConfigError(f"{where}: the kubeconfig has no current context")
    return single


def _proxy_url(merged: Mapping[str, Any], single: SingleConfig, source: str) -> str | None:
    """The selected cluster's proxy-url (checked), or None."""
    name = single.context.cluster
    body = next(c["cluster"] for c in merged["clusters"] if c["name"] == name)
    value = body.get("proxy-url")
    if value is None or value == "":
        return None
    try:
        return check_proxy_url(value)
    except ValueError as e:
        raise ConfigError(f"{source}: cluster {name!r}: proxy-url {value!r}: {e}") from e
