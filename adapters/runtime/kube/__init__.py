"""The cluster side of the runtime: the watches of CronWorkflows and child Workflows that feed
the service, and KubeSync, which the scheduler loop polls and which writes statuses back.
The client, the target and the status writer they use are infrastructure
(cronsource.adapters.infrastructure.kube)."""

from cronsource.adapters.runtime.kube.sync import KubeSync
from cronsource.adapters.runtime.kube.watch import LABEL_INSTANCE, CronWorkflowWatcher, manifest_of
from cronsource.adapters.runtime.kube.workflows import (
    DispatchProgress,
    ViewProgress,
    WorkflowWatcher,
)

__all__ = [
    "LABEL_INSTANCE",
    "CronWorkflowWatcher",
    "DispatchProgress",
    "KubeSync",
    "ViewProgress",
    "WorkflowWatcher",
    "manifest_of",
]
