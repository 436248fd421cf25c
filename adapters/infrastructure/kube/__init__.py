"""The Kubernetes adapter: Workflows created in a cluster, status written back to
CronWorkflows, CronWorkflows and child Workflows watched into domain commands.

Behind our own port (`port.KubeApi`): only `client.py` knows how the cluster is reached
(lightkube's configuration and credentials, requests on aiohttp), so neither the domain nor the
projections nor the rest of this package imports a Kubernetes client library.

- `kubeconfig`: which cluster, credentials and proxy: $KUBECONFIG's files merged and a
  cluster's proxy-url, as kubectl reads them, before lightkube's `KubeConfig`.
- `client`: `connect()` -> AioKube, the port over aiohttp, with its event loop in a thread.
- `target`: KubeTarget, the WorkflowTarget of projections/dispatch.py, whose `create_many`
  creates a batch's Workflows concurrently.
- `status`: StatusWriter, merge patches with resourceVersion precondition and sequence.
- `seen`: SeenMetadata, the watch's copy of each CronWorkflow's metadata the writer patches from.

The watches and KubeSync, which feed the service and run in the scheduler loop, are the
runtime's: cronsource.adapters.runtime.kube.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cronsource.adapters.infrastructure.kube.client import AioKube, connect
    from cronsource.adapters.infrastructure.kube.port import (
        CWF,
        GROUP,
        VERSION,
        WF,
        ApiError,
        KubeApi,
    )
    from cronsource.adapters.infrastructure.kube.seen import SeenMetadata
    from cronsource.adapters.infrastructure.kube.status import ANNOTATION_SEQUENCE, StatusWriter
    from cronsource.adapters.infrastructure.kube.target import (
        IN_FLIGHT,
        Backoff,
        KubeTarget,
        is_transient,
    )
    from cronsource.projections.dispatch import Creation

#: Where each name of the package lives. Loaded on first use (PEP 562), not on import of the
#: package: `bootstrap` needs only the port's protocol, and the client's aiohttp and
#: lightkube took a quarter of a second of every CLI command, `--kube` or not. (`__all__` and
#: the imports above name the same names, as the type checkers need them written out.)
_HOMES = {
    "AioKube": f"{__name__}.client",
    "connect": f"{__name__}.client",
    "CWF": f"{__name__}.port",
    "GROUP": f"{__name__}.port",
    "VERSION": f"{__name__}.port",
    "WF": f"{__name__}.port",
    "ApiError": f"{__name__}.port",
    "KubeApi": f"{__name__}.port",
    "SeenMetadata": f"{__name__}.seen",
    "ANNOTATION_SEQUENCE": f"{__name__}.status",
    "StatusWriter": f"{__name__}.status",
    "IN_FLIGHT": f"{__name__}.target",
    "Backoff": f"{__name__}.target",
    "KubeTarget": f"{__name__}.target",
    "is_transient": f"{__name__}.target",
    "Creation": "cronsource.projections.dispatch",
}

__all__ = [
    "ANNOTATION_SEQUENCE",
    "CWF",
    "GROUP",
    "IN_FLIGHT",
    "VERSION",
    "WF",
    "AioKube",
    "ApiError",
    "Backoff",
    "Creation",
    "KubeApi",
    "KubeTarget",
    "SeenMetadata",
    "StatusWriter",
    "connect",
    "is_transient",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # asked once: later lookups find it without this function
    return value
