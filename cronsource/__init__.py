"""cronsource: an event-sourced scheduling engine for Argo CronWorkflows.

The public Python API is what `__all__` names (docs/python-api.md): `open` (in process, over a
store), `Client` (over HTTP, against `cronsource serve`), the result models they share, and
the errors they raise. Everything else under `cronsource.` is internal and may change in any
release. The API follows semantic versioning from 1.0; before it, a minor release may change
it, and says so in its notes.

`import cronsource` stays light: the library and the client load on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from cronsource.adapters.application.models import (
        BackfillResult,
        CalendarObject,
        CronWorkflowList,
        CronWorkflowObject,
        Decision,
        Deleted,
        Event,
        EventList,
        NextTimes,
        Triggered,
    )
    from cronsource.client import Client
    from cronsource.errors import (
        AlreadyExists,
        Conflict,
        CronsourceError,
        IncompatibleServer,
        Invalid,
        NotFound,
        Unauthorized,
        Unavailable,
    )
    from cronsource.library import Cronsource, open

#: Where each public name lives, loaded when first asked for.
_LAZY = {
    "open": "cronsource.library",
    "Cronsource": "cronsource.library",
    "Client": "cronsource.client",
    **dict.fromkeys(
        [
            "AlreadyExists",
            "Conflict",
            "CronsourceError",
            "IncompatibleServer",
            "Invalid",
            "NotFound",
            "Unauthorized",
            "Unavailable",
        ],
        "cronsource.errors",
    ),
    **dict.fromkeys(
        [
            "BackfillResult",
            "CalendarObject",
            "CronWorkflowList",
            "CronWorkflowObject",
            "Decision",
            "Deleted",
            "Event",
            "EventList",
            "NextTimes",
            "Triggered",
        ],
        "cronsource.adapters.application.models",
    ),
}

__all__ = [
    "__version__",
    "AlreadyExists",
    "BackfillResult",
    "CalendarObject",
    "Client",
    "Conflict",
    "CronWorkflowList",
    "CronWorkflowObject",
    "Cronsource",
    "CronsourceError",
    "Decision",
    "Deleted",
    "Event",
    "EventList",
    "IncompatibleServer",
    "Invalid",
    "NextTimes",
    "NotFound",
    "Triggered",
    "Unauthorized",
    "Unavailable",
    "open",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cronsource' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
