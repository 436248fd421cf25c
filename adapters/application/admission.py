"""A manifest a client sent, admitted for a namespace: no NaN or infinity anywhere (the stored
spec must render as JSON), the CronWorkflow model's validation (domain/manifest.py), the
bounds of Kubernetes' own validation, and the namespace and name it was sent for; and the
expected version it carries in `metadata.resourceVersion`. Calendars (ConfigMaps) likewise.
The HTTP API and the Python library admit through here, so both refuse the same manifests with
the same fields.
"""

from __future__ import annotations

import math
from typing import Any

from cronsource.adapters.application.documents import default_namespace
from cronsource.adapters.application.inputs import FieldError, FieldErrors
from cronsource.domain.calendars import CalendarError, CalendarSpec, calendar_spec
from cronsource.domain.manifest import CronWorkflowManifest, parse_manifest

#: Largest startingDeadlineSeconds the API admits (int32, as Kubernetes validates it): larger
#: values overflow the date arithmetic of every tick (see the report on domain/manifest.py).
MAX_DEADLINE_SECONDS = 2**31 - 1


def _check_limits(m: CronWorkflowManifest) -> None:
    d = m.spec.starting_deadline_seconds
    if d is not None and d > MAX_DEADLINE_SECONDS:
        raise FieldErrors(
            [
                {
                    "field": "spec.startingDeadlineSeconds",
                    "in": "body",
                    "message": f"must be at most {MAX_DEADLINE_SECONDS}",
                }
            ]
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
    """A client's document as a manifest for `namespace` (and `name`, on PUT), or
    FieldErrors naming each bad field (a ManifestError for the model's own checks). A
    manifest without a namespace takes the path's, as kubectl does."""
    try:
        bad = _non_finite(doc)
    except RecursionError:
        bad = "<manifest>"
    if bad is not None:
        raise FieldErrors([{"field": bad, "in": "body", "message": "must be a finite number"}])
    default_namespace(doc, namespace)
    try:
        m = parse_manifest(doc)  # a ManifestError is answered by the problem table
    except OverflowError:
        # A number too large for date arithmetic escaped the manifest's validators.
        raise FieldErrors(
            [{"field": "<manifest>", "in": "body", "message": "a number is out of range"}]
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
        raise FieldErrors(problems)
    return m


def resource_version(doc: Any, if_match: int | None) -> int | None:
    """The expected version: `If-Match`, or `metadata.resourceVersion` in the body (as
    Kubernetes takes it: a precondition, 409 when stale). Taken out of the body, since it
    is ours to set. Both given and different is a 422 naming the body field."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(meta, dict) or meta.get("resourceVersion") in (None, ""):
        return if_match
    return _body_version(meta.pop("resourceVersion"), "metadata.resourceVersion", if_match)


def _body_version(given: Any, field: str, if_match: int | None) -> int:
    """A version a body gives in `field` (a resourceVersion, as the ETag says it), which
    must agree with If-Match when both are given: a FieldError naming the field otherwise."""
    text = str(given)
    if isinstance(given, bool) or not text.isdigit() or len(text) > 18:
        raise FieldError(field, f"{given!r} is not a version (use the ETag value)", "body")
    version = int(text)
    if if_match is not None and if_match != version:
        raise FieldError(
            field, f"{version} disagrees with If-Match {if_match}; give one of them", "body"
        )
    return version


#: The DeleteOptions fields a DELETE takes (kubectl sends propagationPolicy; a CronWorkflow's
#: Workflows are not deleted with it here, whatever the policy, and a grace period has nothing
#: to wait for); any other is refused, not ignored.
_DELETE_OPTIONS = frozenset(
    {"kind", "apiVersion", "preconditions", "propagationPolicy", "gracePeriodSeconds"}
)


def delete_precondition(doc: Any, if_match: int | None) -> int | None:
    """The expected version of a DELETE: If-Match, or a Kubernetes DeleteOptions body's
    `preconditions.resourceVersion` (409 when stale, as the API server answers). It was
    ignored, and a delete with a stale precondition deleted a newer object."""
    if doc is None:
        return if_match
    if not isinstance(doc, dict):
        raise FieldError("<body>", "a DeleteOptions object is required", "body")
    for key in sorted(str(k) for k in doc):
        if key not in _DELETE_OPTIONS:
            raise FieldError(key, "not a field of DeleteOptions that cronsource takes", "body")
    pre = doc.get("preconditions")
    if pre is None:
        return if_match
    if not isinstance(pre, dict):
        raise FieldError("preconditions", f"{pre!r} is not a mapping", "body")
    for key in sorted(str(k) for k in pre):
        if key != "resourceVersion":
            # A uid names an incarnation: objects written through this API carry none.
            raise FieldError(
                f"preconditions.{key}", "not supported: use preconditions.resourceVersion", "body"
            )
    return _body_version(pre.get("resourceVersion"), "preconditions.resourceVersion", if_match)


def admit_calendar(doc: Any, namespace: str) -> CalendarSpec:
    """A calendar a client sent (a ConfigMap labelled `cronsource.io/calendar: "true"`),
    admitted for `namespace` when it names none: a FieldError naming the field otherwise
    (`kind`, `metadata.labels`, `data.dates`, ...)."""
    if doc.get("kind", "ConfigMap") != "ConfigMap":
        raise FieldError("kind", f"{doc.get('kind')!r}: a calendar is a ConfigMap", "body")
    try:
        return calendar_spec(doc, namespace)
    except CalendarError as e:
        field, _, message = str(e).partition(": ")
        raise FieldError(field, message, "body") from None
