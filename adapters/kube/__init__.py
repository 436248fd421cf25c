"""The Kubernetes adapter: Workflows created in a cluster, status written back to
CronWorkflows, CronWorkflows and child Workflows watched into domain commands.

On the official client's asyncio flavour (`kubernetes.aio`), behind our own port
(`port.KubeApi`), so neither the domain nor the projections nor the rest of this package
imports the client; only `client.py` does.

- `client`: `connect()` -> AioKube, the port on kubernetes.aio, with its event loop in a thread.
- `target`: KubeTarget, the WorkflowTarget of projections/dispatch.py, whose `create_many`
  creates a batch's Workflows concurrently.
- `status`: StatusWriter, merge patches with resourceVersion precondition and sequence.
- `seen`: SeenMetadata, the watch's copy of each CronWorkflow's metadata the writer patches from.
- `watch`: CronWorkflowWatcher and WorkflowWatcher, list + watch into domain commands.
- `sync`: KubeSync (what the scheduler loop polls) and build_kube_engine.
"""

from adapters.kube.client import AioKube, connect
from adapters.kube.port import CWF, GROUP, VERSION, WF, ApiError, KubeApi
from adapters.kube.seen import SeenMetadata
from adapters.kube.status import ANNOTATION_SEQUENCE, StatusWriter
from adapters.kube.sync import KubeSync, build_kube_engine
from adapters.kube.target import IN_FLIGHT, Backoff, KubeTarget, is_transient
from adapters.kube.watch import (
    LABEL_INSTANCE,
    CronWorkflowWatcher,
    DispatchProgress,
    ViewProgress,
    WorkflowWatcher,
    manifest_of,
)
from projections.dispatch import Creation

__all__ = [
    "ANNOTATION_SEQUENCE",
    "CWF",
    "GROUP",
    "IN_FLIGHT",
    "LABEL_INSTANCE",
    "VERSION",
    "WF",
    "AioKube",
    "ApiError",
    "Backoff",
    "Creation",
    "CronWorkflowWatcher",
    "DispatchProgress",
    "KubeApi",
    "KubeSync",
    "KubeTarget",
    "SeenMetadata",
    "StatusWriter",
    "ViewProgress",
    "WorkflowWatcher",
    "build_kube_engine",
    "connect",
    "is_transient",
    "manifest_of",
]
