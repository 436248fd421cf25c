"""What a write request carries, admitted: the body parsed (JSON or YAML), the manifest
validated against the path, and the expected version from `If-Match` or
`metadata.resourceVersion`. Bad input raises a domain error the problem table answers
(adapters/entrypoints/http/problems.py), naming the field.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import Request

from cronsource.adapters.application.documents import (
    DocumentError,
    from_client,
    load_json,
    load_yaml,
)
from cronsource.adapters.application.inputs import FieldError
from cronsource.adapters.entrypoints.http.problems import ApiError, invalid
from cronsource.domain.manifest import CronWorkflowManifest, parse_manifest

#: Largest startingDeadlineSeconds the API admits (int32, as Kubernetes validates it): larger
#: values overflow the date arithmetic of every tick (see the report on domain/manifest.py).
MAX_DEADLINE_SECONDS = 2**31 - 1

MANIFEST_BODY = {
    "requestBody": {
        "required": True,
        "description": "An Argo CronWorkflow manifest (argoproj.io/v1alpha1)",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/CronWorkflowManifest"}},
            "application/yaml": {"schema": {"$ref": "#/components/schemas/CronWorkflowManifest"}},
        },
    }
}


def if_match_version(value: str | None) -> int | None:
    """`If-Match: 7`, `"7"`, `W/"7"` or `*` (any version); None without the header."""
    if value is None or value.strip() == "*":
        return None
    versions = []
    for part in value.split(","):
        tag = part.strip().removeprefix("W/").strip('"')
        if not tag.isdigit() or len(tag) > 18:
            raise FieldError(
                "If-Match", f"{part.strip()!r} is not a version (use the ETag value)", "header"
            )
        versions.append(int(tag))
    if len(versions) != 1:
        raise FieldError("If-Match", "give exactly one version", "header")
    return versions[0]


def _check_limits(m: CronWorkflowManifest) -> None:
    d = m.spec.starting_deadline_seconds
    if d is not None and d > MAX_DEADLINE_SECONDS:
        raise invalid(
            [
                {
                    "field": "spec.startingDeadlineSeconds",
                    "in": "body",
                    "message": f"must be at most {MAX_DEADLINE_SECONDS}",
                }
            ],
            "Invalid CronWorkflow",
        )


def _non_finite(doc: Any, path: str = "") -> str | None:
    """The path of the first NaN or infinite number in `doc` (YAML has .nan and .inf): the
    stored spec must render as JSON, which has neither."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return path or "<manifest>"
    if isinstance(doc, dict):
        items: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in doc.items())
    elif isinstance(doc, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(doc))
    else:
        return None
    for p, v in items:
        if (found := _non_finite(v, p)) is not None:
            return found
    return None


def admit(doc: Any, namespace: str, name: str | None = None) -> CronWorkflowManifest:
    """A request body as a manifest for `namespace` (and `name`, on PUT), or 422 naming
    each bad field. A manifest without a namespace takes the path's, as kubectl does."""
    try:
        bad = _non_finite(doc)
    except RecursionError:
        bad = "<manifest>"
    if bad is not None:
        raise invalid(
            [{"field": bad, "in": "body", "message": "must be a finite number"}],
            "Invalid CronWorkflow",
        )
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
        doc["metadata"].setdefault("namespace", namespace)
    try:
        m = parse_manifest(doc)  # a ManifestError is answered by the problem table
    except OverflowError:
        # A number too large for date arithmetic escaped the manifest's validators.
        raise invalid(
            [{"field": "<manifest>", "in": "body", "message": "a number is out of range"}],
            "Invalid CronWorkflow",
        ) from None
    _check_limits(m)
    problems = []
    if m.metadata.namespace != namespace:
        problems.append(
            {
                "field": "metadata.namespace",
                "in": "body",
                "message": f"{m.metadata.namespace!r} does not match the path's {namespace!r}",
            }
        )
    if name is not None and m.metadata.name != name:
        problems.append(
            {
                "field": "metadata.name",
                "in": "body",
                "message": f"{m.metadata.name!r} does not match the path's {name!r}",
            }
        )
    if problems:
        raise invalid(problems, "Invalid CronWorkflow")
    return m


def resource_version(doc: Any, if_match: int | None) -> int | None:
    """The expected version: `If-Match`, or `metadata.resourceVersion` in the body (as
    Kubernetes takes it: a precondition, 409 when stale). Taken out of the body, since it
    is ours to set. Both given and different is a 422 naming the body field."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(meta, dict) or meta.get("resourceVersion") in (None, ""):
        return if_match
    given = meta.pop("resourceVersion")
    text = str(given)
    if isinstance(given, bool) or not text.isdigit() or len(text) > 18:
        raise FieldError(
            "metadata.resourceVersion", f"{given!r} is not a version (use the ETag value)", "body"
        )
    version = int(text)
    if if_match is not None and if_match != version:
        raise FieldError(
            "metadata.resourceVersion",
            f"{version} disagrees with If-Match {if_match}; give one of them",
            "body",
        )
    return version


def content_type(request: Request) -> str:
    return request.headers.get("content-type", "application/json").split(";")[0].strip().lower()


def parse_body(raw: bytes, ctype: str) -> Any:
    """The request body as data: JSON (default) or YAML by Content-Type, through the loader
    every entrypoint shares (adapters/application/documents.py: strict scalars, no duplicate keys,
    bounded aliases and depth). CPU-bound: called in the threadpool, never on the loop."""
    if not raw.strip():
        raise invalid([{"field": "<body>", "in": "body", "message": "a manifest is required"}])
    # A DocumentError (unparseable, duplicate keys, too deep) is a 400, by the problem table.
    if ctype in ("application/json", "") or ctype.endswith("+json"):
        return from_client(load_json(raw, "body"))
    if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
        docs = load_yaml(raw, "body")
        if len(docs) > 1:
            raise DocumentError(f"body: {len(docs)} YAML documents, send one")
        return from_client(docs[0] if docs else None)
    raise ApiError(
        415, "Unsupported media type", f"{ctype}: send application/json or application/yaml"
    )
