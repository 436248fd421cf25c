"""Argo's checks on `spec.workflowSpec` that need no cluster, with Argo's messages.

cronsource never runs a Workflow, but it creates one for every tick: a spec Argo would refuse
(`argo cron lint`, or the controller's SpecError) must be refused at admission too, or a broken
Workflow is created every minute. Two layers, in Argo's order:

1. Decoding, as `argo lint` decodes strictly (sigs.k8s.io/json): an unknown field or a value of
   the wrong JSON type is an error. The field names and types below are those of Argo
   v4.0.5's CRD (manifests/base/crds/full) for WorkflowSpec, Arguments, Parameter, Artifact,
   Template, WorkflowTemplateRef and the workflow metadata; deeper objects (containers,
   volumes, DAGs) are Kubernetes' and Argo's own business and are only checked for being
   objects or lists.
2. `ValidateWorkflow` (workflow/validate/validate.go), as far as it needs nothing but the spec:
   templates with `workflowTemplateRef`, template and argument names, argument values, the
   entrypoint, and then every template (domain/workflowtemplates.py). Its messages carry
   Argo's "cannot validate Workflow: " prefix.

Not checked here (needs the cluster): whether a referenced WorkflowTemplate exists, and the
templates a `templateRef` names (see docs/argo-compatibility.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Final

from cronsource.domain.workflowfields import TemplateProblem, names
from cronsource.domain.workflowtemplates import check_templates

__all__ = ["workflow_spec_problem"]

_S, _I, _B, _O, _A, _IS, _ANY = "string", "integer", "boolean", "object", "array", "int", "any"

_WORKFLOW_SPEC: Final = {
    "activeDeadlineSeconds": _I,
    "affinity": _O,
    "archiveLogs": _B,
    "arguments": _O,
    "artifactGC": _O,
    "artifactRepositoryRef": _O,
    "automountServiceAccountToken": _B,
    "dnsConfig": _O,
    "dnsPolicy": _S,
    "entrypoint": _S,
    "executor": _O,
    "hooks": _O,
    "hostAliases": _A,
    "hostNetwork": _B,
    "imagePullSecrets": _A,
    "metrics": _O,
    "nodeSelector": _O,
    "onExit": _S,
    "parallelism": _I,
    "podDisruptionBudget": _O,
    "podGC": _O,
    "podMetadata": _O,
    "podPriorityClassName": _S,
    "podSpecPatch": _S,
    "priority": _I,
    "retryStrategy": _O,
    "schedulerName": _S,
    "securityContext": _O,
    "serviceAccountName": _S,
    "shutdown": _S,
    "suspend": _B,
    "synchronization": _O,
    "templateDefaults": _O,
    "templates": _A,
    "tolerations": _A,
    "ttlStrategy": _O,
    "volumeClaimGC": _O,
    "volumeClaimTemplates": _A,
    "volumes": _A,
    "workflowMetadata": _O,
    "workflowTemplateRef": _O,
}

_TEMPLATE: Final = {
    "activeDeadlineSeconds": _IS,
    "affinity": _O,
    "annotations": _O,
    "archiveLocation": _O,
    "automountServiceAccountToken": _B,
    "container": _O,
    "containerSet": _O,
    "daemon": _B,
    "dag": _O,
    "data": _O,
    "executor": _O,
    "failFast": _B,
    "hostAliases": _A,
    "http": _O,
    "initContainers": _A,
    "inputs": _O,
    "memoize": _O,
    "metadata": _O,
    "metrics": _O,
    "name": _S,
    "nodeSelector": _O,
    "outputs": _O,
    "parallelism": _I,
    "plugin": _ANY,
    "podSpecPatch": _S,
    "priorityClassName": _S,
    "resource": _O,
    "retryStrategy": _O,
    "schedulerName": _S,
    "script": _O,
    "securityContext": _O,
    "serviceAccountName": _S,
    "sidecars": _A,
    "steps": _A,
    "suspend": _O,
    "synchronization": _O,
    "timeout": _S,
    "tolerations": _A,
    "volumes": _A,
}

_ARGUMENTS: Final = {"artifacts": _A, "parameters": _A}
# Parameter values are Argo's AnyString: a JSON string, number or bool all decode.
_PARAMETER: Final = {
    "default": _ANY,
    "description": _S,
    "enum": _A,
    "globalName": _S,
    "name": _S,
    "value": _ANY,
    "valueFrom": _O,
}
_ARTIFACT: Final = {
    "archive": _O,
    "archiveLogs": _B,
    "artifactGC": _O,
    "artifactory": _O,
    "azure": _O,
    "deleted": _B,
    "from": _S,
    "fromExpression": _S,
    "gcs": _O,
    "git": _O,
    "globalName": _S,
    "hdfs": _O,
    "http": _O,
    "mode": _I,
    "name": _S,
    "optional": _B,
    "oss": _O,
    "path": _S,
    "plugin": _O,
    "raw": _O,
    "recurseMode": _B,
    "s3": _O,
    "subPath": _S,
}
_TEMPLATE_REF: Final = {"clusterScope": _B, "name": _S}
_METADATA: Final = {"annotations": _O, "labels": _O, "labelsFrom": _O}

#: Where a nested object's own fields are known: (parent path suffix, field) -> fields.
_OBJECTS: Final[Mapping[str, Mapping[str, str]]] = {
    "arguments": _ARGUMENTS,
    "workflowTemplateRef": _TEMPLATE_REF,
    "workflowMetadata": _METADATA,
}
_LISTS: Final[Mapping[str, Mapping[str, str]]] = {
    "templates": _TEMPLATE,
    "arguments.parameters": _PARAMETER,
    "arguments.artifacts": _ARTIFACT,
}

_VALIDATE: Final = "cannot validate Workflow: "
_ROOT: Final = "spec.workflowSpec"


class _Problem(Exception):
    pass


def workflow_spec_problem(
    spec: object,
    *,
    labels: Set[str] = frozenset(),
    annotations: Set[str] = frozenset(),
    decode_only: bool = False,
) -> str | None:
    """The first problem Argo would report for this `workflowSpec`, or None if it passes.

    `labels` and `annotations` are the keys of the CronWorkflow's `spec.workflowMetadata`: the
    child carries them, so `{{workflow.labels.KEY}}` may read them. `decode_only` stops after
    decoding (Argo validates the workflowSpec last)."""
    try:
        _decode(spec)
        assert isinstance(spec, Mapping)
        if not decode_only:
            _validate(spec, labels, annotations)
    except _Problem as p:
        return str(p)
    return None


# --------------------------------------------------------------------------- decoding


def json_type(value: object) -> str:
    """A value's type in JSON's words, as Go's decoder names it in its errors (`null`,
    `array`, `object`): what a user wrote, never a Python class name."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__


def _fits(value: object, kind: str) -> bool:
    if kind == _ANY or value is None:  # null is the zero value in Go's decoder
        return True
    if kind == _S:
        return isinstance(value, str)
    if kind == _B:
        return isinstance(value, bool)
    if kind == _I:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _IS:
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    if kind == _A:
        return isinstance(value, list)
    return isinstance(value, Mapping)


def _decode(spec: object) -> None:
    if not isinstance(spec, Mapping):
        raise _Problem(f"{_ROOT}: must be an object, got {json_type(spec)}")
    _decode_object(spec, _WORKFLOW_SPEC, _ROOT, "")


def _decode_object(
    obj: Mapping[object, object], fields: Mapping[str, str], path: str, rel: str
) -> None:
    for key, value in obj.items():
        name = str(key)
        where = f"{path}.{name}"
        kind = fields.get(name)
        if kind is None:
            raise _Problem(f'unknown field "{where}"')
        if not _fits(value, kind):
            raise _Problem(
                f"{where}: json: cannot unmarshal {json_type(value)} into Go struct field "
                f"{where} of type {'int or string' if kind == _IS else kind}"
            )
        sub = f"{rel}.{name}" if rel else name
        if sub in _OBJECTS and isinstance(value, Mapping):
            _decode_object(value, _OBJECTS[sub], where, sub)
        elif sub in _LISTS and isinstance(value, list):
            for i, item in enumerate(value):
                if item is None:
                    continue
                if not isinstance(item, Mapping):
                    raise _Problem(
                        f"{where}[{i}]: json: cannot unmarshal {json_type(item)} into Go "
                        f"struct field {where} of type object"
                    )
                _decode_object(item, _LISTS[sub], f"{where}[{i}]", sub)


# --------------------------------------------------------------------------- ValidateWorkflow


def _validate(spec: Mapping[object, object], labels: Set[str], annotations: Set[str]) -> None:
    templates = spec.get("templates") or []
    assert isinstance(templates, list)
    ref = spec.get("workflowTemplateRef")
    if ref is not None and templates:
        raise _Problem(
            _VALIDATE
            + "Templates is invalid field in spec if workflow referred WorkflowTemplate reference"
        )
    bad = names(templates, params=False)
    if bad:
        raise _Problem(f"{_VALIDATE}spec.templates{bad}")
    args = spec.get("arguments") or {}
    assert isinstance(args, Mapping)
    for field in ("parameters", "artifacts"):
        bad = names(list(args.get(field) or []), params=True)
        if bad:
            raise _Problem(f"{_VALIDATE}spec.arguments.{field}{bad}")
    # A WorkflowTemplate's own parameters merge in at run time; offline only ours are seen.
    if ref is None:
        for p in args.get("parameters") or []:
            if isinstance(p, Mapping) and p.get("value") is None and p.get("valueFrom") is None:
                n = p.get("name")
                raise _Problem(
                    f"{_VALIDATE}spec.arguments.{n}.value or spec.arguments.{n}.valueFrom "
                    "is required"
                )
    if ref is None and not spec.get("entrypoint"):
        raise _Problem(_VALIDATE + "spec.entrypoint is required")
    try:
        check_templates(
            spec,  # type: ignore[arg-type]  # decoded: every key is a string
            args,
            has_ref=ref is not None,
            labels=labels,
            annotations=annotations,
        )
    except TemplateProblem as p:
        raise _Problem(_VALIDATE + str(p)) from None
