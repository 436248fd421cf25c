"""Argo's checks of a leaf template's own fields and of any template's inputs (validate.go
validateInputs and validateLeaf), apart from the walk that reaches them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from cronsource.domain.workflowfields import (
    Obj,
    TemplateProblem,
    is_parameter,
    names,
    obj,
    objects,
    text,
)

LEAVES: Final = frozenset(
    {"Container", "ContainerSet", "Script", "Resource", "Data", "HTTP", "Plugin"}
)
_RESOURCE_ACTIONS: Final = frozenset({"get", "create", "apply", "delete", "replace", "patch"})


def template_inputs(tmpl: Obj, kind: str) -> set[str]:
    """validateInputs: the inputs' names and artifacts checked, and what they put in scope."""
    name = text(tmpl.get("name"))
    inputs = obj(tmpl.get("inputs"))
    for what in ("parameters", "artifacts"):
        bad = names(objects(inputs.get(what)), params=True)
        if bad:
            raise TemplateProblem(f"templates.{name}.inputs.{what}{bad}")
    scope = {f"inputs.parameters.{p.get('name')}" for p in objects(inputs.get("parameters"))}
    if scope:
        scope.add("inputs.parameters")
    for art in objects(inputs.get("artifacts")):
        ref = f"inputs.artifacts.{art.get('name')}"
        scope.add(ref)
        if kind in LEAVES:
            scope.add(f"{ref}.path")
        elif text(art.get("path")):
            raise TemplateProblem(
                f"templates.{name}.{ref}.path only valid in container/script templates"
            )
        if text(art.get("from")):
            raise TemplateProblem(f"templates.{name}.{ref}.from not valid in inputs")
        git = art.get("git")
        if git is not None and not text(obj(git).get("repo")):
            raise TemplateProblem(f"templates.{name}.{ref}.git.repo is required")
    return scope


def leaf_fields(tmpl: Obj, spec: Obj) -> None:
    """validateLeaf after the variables: mounts, images, the resource, deadline, parallelism."""
    name = text(tmpl.get("name"))
    defaults = obj(spec.get("templateDefaults"))
    inputs = obj(tmpl.get("inputs"))
    container = tmpl.get("container")
    if isinstance(container, Mapping):
        mounts: dict[str, str] = {}
        for i, vm in enumerate(objects(container.get("volumeMounts"))):
            path = text(vm.get("mountPath"))
            if path in mounts:
                raise TemplateProblem(
                    f"templates.{name}.container.volumeMounts[{i}].mountPath '{path}' "
                    f"already mounted in {mounts[path]}"
                )
            mounts[path] = f"container.volumeMounts.{text(vm.get('name'))}"
        for i, art in enumerate(objects(inputs.get("artifacts"))):
            path = text(art.get("path"))
            if path in mounts:
                raise TemplateProblem(
                    f"templates.{name}.inputs.artifacts[{i}].path '{path}' already "
                    f"mounted in {mounts[path]}"
                )
            mounts[path] = f"inputs.artifacts.{text(art.get('name'))}"
    for key in ("container", "script"):
        body = tmpl.get(key)
        if isinstance(body, Mapping) and not text(body.get("image")):
            if not text(obj(defaults.get(key)).get("image")):
                raise TemplateProblem(f"templates.{name}.{key}.image may not be empty")
    resource = tmpl.get("resource")
    if isinstance(resource, Mapping):
        resource_fields(name, resource, inputs)
    deadline = tmpl.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline < 0:
        raise TemplateProblem(
            f"templates.{name}.activeDeadlineSeconds must be a positive integer > 0 or an "
            "argo variable"
        )
    if tmpl.get("parallelism") is not None:
        raise TemplateProblem(
            f"templates.{name}.parallelism is only valid for steps and dag templates"
        )


def resource_fields(name: str, resource: Obj, inputs: Obj) -> None:
    action = text(resource.get("action"))
    if action not in _RESOURCE_ACTIONS and not is_parameter(action):
        raise TemplateProblem(
            f"templates.{name}.resource.action must be one of: get, create, apply, delete,"
            " replace, patch"
        )
    if action in ("delete", "get"):
        return
    manifest = text(resource.get("manifest"))
    source = resource.get("manifestFrom")
    if not manifest and source is None:
        raise TemplateProblem(
            f"either templates.{name}.resource.manifest or templates.{name}.resource."
            "manifestFrom must be specified"
        )
    if manifest and source is not None:
        raise TemplateProblem(
            "shouldn't have both `manifest` and `manifestFrom` specified in `Manifest` for"
            " resource template"
        )
    art = obj(source).get("artifact")
    if isinstance(art, Mapping):
        wanted = text(art.get("name"))
        if wanted not in {text(a.get("name")) for a in objects(inputs.get("artifacts"))}:
            raise TemplateProblem(
                f"artifact {wanted} in `manifestFrom` refer to a non-exist artifact"
            )
