"""The small pieces Argo's workflow validation is made of: names, tags, arguments, outputs.

Shared by the spec check (workflowspec.py), the template walk (workflowtemplates.py) and the DAG
rules (workflowdag.py), so that each rule of validate.go is written once, with Argo's words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Final

Obj = Mapping[str, object]

FIELD_NAME: Final = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9]*$")
PARAM_NAME: Final = re.compile(r"^[-a-zA-Z0-9_]+$")
FIELD_NAME_MSG: Final = (
    "name must consist of alpha-numeric characters or '-', and must start with an "
    "alpha-numeric character (e.g. My-name1-2, 123-NAME)"
)
PARAM_NAME_MSG: Final = (
    "Parameter/Artifact name must consist of alpha-numeric characters, '_' or '-' "
    "e.g. my_param_1, MY-PARAM-1"
)
_TAG: Final = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_PARAM_TAG: Final = re.compile(r"\{\{[-a-zA-Z0-9]+(\.[-a-zA-Z0-9_]+)*\}\}")
#: A scope key that lets every `{{<prefix>...}}` through (a withParam item, an output of a
#: template in the cluster, a globalName that is itself a parameter).
ANY: Final = "*"


class TemplateProblem(Exception):
    """What Argo's ValidateWorkflow would say (without its "cannot validate Workflow: ")."""


def objects(value: object) -> list[Obj]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def obj(value: object) -> Obj:
    return value if isinstance(value, Mapping) else {}


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def is_parameter(value: str) -> bool:
    return bool(_PARAM_TAG.search(value))


def name_problems(name: str, *, params: bool) -> list[str]:
    """isValidParamOrArtifactName / isValidWorkflowFieldName: what is wrong with one name."""
    if params:
        return [] if PARAM_NAME.match(name) else [PARAM_NAME_MSG]
    errs = [] if len(name) <= 128 else ["must be no more than 128 characters"]
    if not FIELD_NAME.match(name):
        errs.append(FIELD_NAME_MSG)
    return errs


def names(items: Sequence[object], *, params: bool) -> str | None:
    """validateWorkflowFieldNames: the message suffix after the list's path, or None."""
    seen: set[str] = set()
    for i, item in enumerate(items):
        name = text(obj(item).get("name"))
        if not name:
            return f"[{i}].name is required"
        errs = name_problems(name, params=params)
        if errs:
            return f"[{i}].name: '{name}' is invalid: {';'.join(errs)}"
        if name in seen:
            return f"[{i}].name '{name}' is not unique"
        seen.add(name)
    return None


def tags(value: object) -> list[str]:
    """The `{{...}}` tags of a value as Argo sees them in its JSON (expressions left out)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return [t for t in _TAG.findall(text) if not t.strip().startswith("=")]


def items_scope(holder: Obj, scope: set[str]) -> None:
    """addItemsToScope: what `{{item...}}` may read in a step or task with a loop."""
    items, param, sequence = (
        holder.get("withItems"),
        holder.get("withParam"),
        holder.get("withSequence"),
    )
    if sum(bool(x) if x is not sequence else x is not None for x in (items, param, sequence)) > 1:
        raise TemplateProblem("only one of withItems, withParam, withSequence can be specified")
    if isinstance(items, list) and items:
        for item in items:
            if isinstance(item, list):
                scope |= {f"item.[{i}]" for i in range(len(item))}
            elif isinstance(item, Mapping):
                scope |= {f"item.{k}" for k in item}
            else:
                scope.add("item")
    elif text(param):
        scope |= {"item", "item." + ANY}
    elif sequence is not None:
        seq = obj(sequence)
        if seq.get("count") is not None and seq.get("end") is not None:
            raise TemplateProblem("only one of count or end can be defined in withSequence")
        scope.add("item")


def arguments(prefix: str, given: Obj) -> None:
    """validateArguments with empty values refused (a step's or task's arguments)."""
    for what in ("parameters", "artifacts"):
        bad = names(objects(given.get(what)), params=True)
        if bad:
            raise TemplateProblem(f"{prefix}{what}{bad}")
    for p in objects(given.get("parameters")):
        n = text(p.get("name"))
        source = p.get("valueFrom")
        if source is None and p.get("value") is None:
            raise TemplateProblem(f"{prefix}{n}.value or {prefix}{n}.valueFrom is required")
        if source is not None:
            src = obj(source)
            allowed = (
                src.get("configMapKeyRef") is not None
                or text(src.get("event"))
                or (src.get("supplied") is not None)
            )
            forbidden = any(
                text(src.get(k)) for k in ("path", "jsonPath", "parameter", "expression")
            )
            if not allowed or forbidden:
                raise TemplateProblem(
                    f"{prefix}{n}.valueFrom only allows: default, configMapKeyRef and supplied"
                )
    for a in objects(given.get("artifacts")):
        n = text(a.get("name"))
        if text(a.get("from")) and text(a.get("fromExpression")):
            raise TemplateProblem(
                f"{prefix}{n} shouldn't have both `from` and `fromExpression` in Artifact"
            )


def output_parameter(ref: str, param: Obj, kind: str) -> None:
    source = param.get("valueFrom")
    if source is not None and param.get("value") is not None:
        raise TemplateProblem(f"{ref} has both valueFrom and value specified. Choose one.")
    if param.get("value") is not None:
        return
    if source is None:
        raise TemplateProblem(f"{ref} does not have valueFrom or value specified")
    src = obj(source)
    count = sum(
        bool(text(src.get(k))) for k in ("path", "jqFilter", "jsonPath", "parameter", "expression")
    )
    count += src.get("supplied") is not None
    if count == 0:
        raise TemplateProblem(
            "valueFrom type unspecified. choose one of: path, jqFilter, jsonPath, parameter, raw,"
            " expression"
        )
    if count > 1:
        raise TemplateProblem(
            "multiple valueFrom types specified. choose one of: path, jqFilter, jsonPath,"
            " parameter, raw"
        )
    if kind in ("Container", "ContainerSet", "Script") and not text(src.get("path")):
        raise TemplateProblem(f"{ref}.path must be specified for {kind} templates")
    if kind == "Resource" and not (text(src.get("jqFilter")) or text(src.get("jsonPath"))):
        raise TemplateProblem(f"{ref} .jqFilter or jsonPath must be specified for {kind} templates")
    if kind in ("DAG", "Steps"):
        parameter, expression = text(src.get("parameter")), text(src.get("expression"))
        if not parameter and not expression:
            raise TemplateProblem(
                f"{ref}.parameter or expression must be specified for {kind} templates"
            )
        if parameter and expression:
            raise TemplateProblem(
                f"{ref} shouldn't have both `from` and `expression` specified in `ValueFrom` for"
                f" {kind} templates"
            )
