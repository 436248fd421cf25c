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

from cronsource.adapters.infrastructure.kube.client import AioKube, connect
from cronsource.adapters.infrastructure.kube.port import CWF, GROUP, VERSION, WF, ApiError, KubeApi
from cronsource.adapters.infrastructure.kube.seen import SeenMetadata
from cronsource.adapters.infrastructure.kube.status import ANNOTATION_SEQUENCE, StatusWriter
from cronsource.adapters.infrastructure.kube.target import (
    IN_FLIGHT,
    Backoff,
    KubeTarget,
    is_transient,
)
from cronsource.projections.dispatch import Creation

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
