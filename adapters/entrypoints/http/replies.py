"""How handlers answer about one CronWorkflow: read back from the read model once it has
caught up (so a write's answer shows the write), with its version as the `ETag`, and the
command's structured log line."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Response

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.infrastructure.logs import scheduling_fields
from cronsource.adapters.infrastructure.readside.queries import Queries as ReadQueries
from cronsource.projections.readmodel import StatusRow

log = logging.getLogger("cronsource.http")


def current(ops: Operations, queries: ReadQueries, namespace: str, name: str) -> StatusRow:
    """The status row of the live CronWorkflow, or NotFound."""
    return ops.status(namespace, name)


def answer(response: Response, row: StatusRow, status_code: int = 200) -> dict[str, Any]:
    """`row` as Argo's CronWorkflow object, its version in the `ETag`."""
    response.status_code = status_code
    response.headers["ETag"] = f'"{row.version}"'
    return row.as_object()


def log_command(what: str, namespace: str, name: str, version: int, **more: Any) -> None:
    log.info(
        "%s/%s %s",
        namespace,
        name,
        what,
        extra=scheduling_fields(namespace, name, None, version, **more),
    )


def warn(response: Response, lines: list[str]) -> None:
    """Each line as a `Warning: 299 - "..."` header, as the Kubernetes API server sends
    admission warnings (kubectl prints them as `Warning: ...`). Quotes and backslashes are
    escaped as RFC 9110's quoted-string requires, and anything but printable ASCII is
    escaped too: a control character from a manifest must not end the header early."""
    for line in lines:
        text = line.replace("\\", "\\\\").replace('"', '\\"')
        text = "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in text)
        response.headers.append("Warning", f'299 - "{text}"')
