"""What a write request carries, admitted: the body parsed (JSON or YAML), the manifest
validated against the path, and the expected version from `If-Match` or
`metadata.resourceVersion`. Bad input raises a domain error the problem table answers
(adapters/entrypoints/http/problems.py), naming the field.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from cronsource.adapters.application import admission
from cronsource.adapters.application.documents import (
    DocumentError,
    from_client,
    load_json,
    load_yaml,
)
from cronsource.adapters.application.inputs import FieldError, FieldErrors
from cronsource.adapters.entrypoints.http.problems import ApiError, invalid
from cronsource.domain.manifest import CronWorkflowManifest

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
        tag = part.strip().removeprefix("W/")
        if len(tag) >= 2 and tag[0] == tag[-1] == '"':
            tag = tag[1:-1]  # an entity tag is quoted whole, or (leniently) not at all
        if not (tag.isascii() and tag.isdigit()) or len(tag) > 18:
            raise FieldError(
                "If-Match", f"{part.strip()!r} is not a version (use the ETag value)", "header"
            )
        versions.append(int(tag))
    if len(versions) != 1:
        raise FieldError("If-Match", "give exactly one version", "header")
    return versions[0]


def admit(doc: Any, namespace: str, name: str | None = None) -> CronWorkflowManifest:
    """The request body admitted (adapters/application/admission.py), or 422 naming each bad
    field."""
    try:
        return admission.admit(doc, namespace, name)
    except FieldErrors as e:
        raise invalid(e.errors, "Invalid CronWorkflow") from None


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
        return parse_yaml(raw)
    raise ApiError(
        415, "Unsupported media type", f"{ctype}: send application/json or application/yaml"
    )


async def command_body(request: Request) -> None:
    """A command's body (suspend, resume, trigger, backfill) read by the rules of every other
    body before FastAPI reads it into its model: JSON (415 otherwise), and the shared loader's
    bounds (400: not UTF-8, too deep, a key twice). FastAPI alone took the last of two keys,
    so `{"dryRun": true, "dryRun": false}` ran a backfill a proxy that keeps the first key saw
    as a dry run."""
    raw = await request.body()
    if not raw.strip():
        return  # no body: each command's defaults
    ctype = content_type(request)
    if not (ctype in ("application/json", "") or ctype.endswith("+json")):
        raise ApiError(415, "Unsupported media type", f"{ctype}: send application/json")
    await run_in_threadpool(load_json, raw, "body")


def parse_yaml(raw: bytes) -> Any:
    """One YAML document (JSON is YAML too, as Kubernetes reads an apply-patch body)."""
    docs = load_yaml(raw, "body")
    if len(docs) > 1:
        raise DocumentError(f"body: {len(docs)} YAML documents, send one")
    return from_client(docs[0] if docs else None)


MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE_PATCH, JSON_PATCH, APPLY_PATCH)


def parse_patch(raw: bytes, ctype: str) -> Any:
    """A PATCH body by its Content-Type: one of PATCH_TYPES (415 for anything else, plain
    JSON included: Kubernetes takes no patch without its kind)."""
    if ctype not in PATCH_TYPES:
        raise ApiError(
            415,
            "Unsupported media type",
            f"{ctype or '(none)'}: a PATCH is one of " + ", ".join(PATCH_TYPES),
        )
    if not raw.strip():
        raise invalid([{"field": "<body>", "in": "body", "message": "a patch is required"}])
    if ctype == APPLY_PATCH:
        return parse_yaml(raw)
    return from_client(load_json(raw, "body"))


PATCH_BODY = {
    "requestBody": {
        "required": True,
        "description": "A merge patch (RFC 7386), a JSON patch (RFC 6902) or, for server-side"
        " apply, a CronWorkflow manifest (`?fieldManager=` required)",
        "content": {
            MERGE_PATCH: {"schema": {"type": "object"}},
            JSON_PATCH: {
                "schema": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["op", "path"],
                        "properties": {
                            "op": {
                                "type": "string",
                                "enum": ["add", "remove", "replace", "move", "copy", "test"],
                            },
                            "path": {"type": "string"},
                            "from": {"type": "string"},
                            "value": {},
                        },
                    },
                }
            },
            APPLY_PATCH: {"schema": {"$ref": "#/components/schemas/CronWorkflowManifest"}},
        },
    }
}
