"""Argo's per-template checks of `ValidateWorkflow`, offline, with Argo's messages.

A CronWorkflow whose entrypoint names no template, or whose template has no type, a container
without an image, a step calling a template that does not exist or a DAG with a cycle, passes a
schema check and then fails at every tick on the cluster: Argo's lint refuses it, so cronsource's
admission refuses it too, with the words of Argo v4.0.5's workflow/validate/validate.go (the lint
differential, tests/integration/test_argo_lint_differential.py, holds both sides to them).

The walk follows Argo's order: the entrypoint, then `onExit`, the hooks and podGC, then every
template of the list, each validated once. Where Argo needs what lint cannot see offline, the
check accepts rather than guesses:

- a `templateRef` (and a `workflowTemplateRef`) names a template in the cluster: its fields are
  checked as Argo checks them, the template it names is not, and what it outputs is taken as
  whatever a reference reads;
- `{{=expression}}` tags are not checked (Argo does not check them either);
- arguments are not substituted into templates (`ProcessArgs`): a tag an argument would fill is
  judged by whether the template declares the input, as Argo's scope does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Final

from cronsource.domain.adoption import ANNOTATION_SCHEDULED
from cronsource.domain.workflowdag import (
    TASK_RESULT,
    Lineage,
    argument_dependency,
    dependencies,
    named_tasks,
    sorting_problem,
)
from cronsource.domain.workflowfields import (
    ANY,
    PARAM_NAME,
    PARAM_NAME_MSG,
    Obj,
    TemplateProblem,
    arguments,
    is_parameter,
    items_scope,
    name_problems,
    names,
    obj,
    objects,
    output_parameter,
    tags,
    text,
)
from cronsource.domain.workflowleaf import LEAVES, leaf_fields, template_inputs

__all__ = ["TemplateProblem", "check_templates"]

_TYPES: Final = (
    ("container", "Container"),
    ("containerSet", "ContainerSet"),
    ("steps", "Steps"),
    ("dag", "DAG"),
    ("script", "Script"),
    ("resource", "Resource"),
    ("data", "Data"),
    ("suspend", "Suspend"),
    ("http", "HTTP"),
    ("plugin", "Plugin"),
)
_PODS: Final = frozenset({"Container", "ContainerSet", "Script", "Resource", "Data"})
_CHOOSE: Final = (
    "choose one of: container, containerSet, steps, script, resource, dag, suspend, template,"
    " template ref"
)
_RETRY_POLICIES: Final = frozenset({"Always", "OnError", "OnFailure", "OnTransientError", ""})
_POD_GC: Final = frozenset(
    {"", "OnPodCompletion", "OnPodSuccess", "OnWorkflowCompletion", "OnWorkflowSuccess"}
)
TASK_RESULTS: Final = frozenset(
    {
        "Succeeded",
        "Failed",
        "Errored",
        "Skipped",
        "Omitted",
        "Daemoned",
        "AnySucceeded",
        "AllFailed",
    }
)
#: common.GlobalVarValidWorkflowVariablePrefix: tags under other roots are not Argo's to check.
_CHECKED_ROOTS: Final = ("item.", "steps.", "inputs.", "outputs.", "pod.", "workflow.", "tasks.")
#: Tags resolved at run time whatever the scope (resolveAllVariables' allowances).
_RUNTIME_PREFIXES: Final = (
    "outputs.",
    "workflow.creationTimestamp",
    "workflow.scheduledTime",
    "workflow.duration",
    "tasks.name",
    "steps.name",
    "node.name",
)


#: What the child Workflow carries whatever the spec says (common.toWorkflow): `{{workflow.
#: labels.*}}`/`{{workflow.annotations.*}}` may read these keys.
_OWN_LABELS: Final = frozenset(
    {"workflows.argoproj.io/cron-workflow", "workflows.argoproj.io/controller-instanceid"}
)
_OWN_ANNOTATIONS: Final = frozenset({ANNOTATION_SCHEDULED})


def check_templates(
    spec: Obj,
    arguments: Obj,
    *,
    has_ref: bool,
    labels: Set[str] = frozenset(),
    annotations: Set[str] = frozenset(),
) -> None:
    """Raise TemplateProblem with Argo's message for the first template problem of `spec`.
    `labels` and `annotations` are the keys the CronWorkflow's own workflowMetadata gives."""
    walk = _Walk(spec, arguments, has_ref=has_ref)
    own = obj(spec.get("workflowMetadata"))
    label_keys = set(labels) | _OWN_LABELS | set(obj(own.get("labels")))
    label_keys |= set(obj(own.get("labelsFrom")))
    annotation_keys = set(annotations) | _OWN_ANNOTATIONS | set(obj(own.get("annotations")))
    walk.globals |= {f"workflow.labels.{k}" for k in label_keys}
    walk.globals |= {f"workflow.annotations.{k}" for k in annotation_keys}
    walk.run()


def template_type(tmpl: Obj) -> str:
    """Template.GetType: the first type field set, in Argo's order."""
    for key, name in _TYPES:
        if tmpl.get(key) is not None:
            return name
    return "Unknown"


@dataclass
class _Walk:
    spec: Obj
    arguments: Obj
    has_ref: bool
    templates: dict[str, Obj] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for tmpl in objects(self.spec.get("templates")):
            self.templates.setdefault(text(tmpl.get("name")), tmpl)
        self.globals |= {
            "workflow.name",
            "workflow.namespace",
            "workflow.mainEntrypoint",
            "workflow.serviceAccountName",
            "workflow.uid",
            "workflow.annotations",
            "workflow.annotations.json",
            "workflow.labels",
            "workflow.labels.json",
            "workflow.status",
        }
        params = objects(self.arguments.get("parameters"))
        if params:
            self.globals |= {"workflow.parameters", "workflow.parameters.json"}
        for p in params:
            if text(p.get("name")):
                self.globals.add(f"workflow.parameters.{p['name']}")
        if self.spec.get("priority") is not None:
            self.globals.add("workflow.priority")

    # ------------------------------------------------------------------ the workflow

    def run(self) -> None:
        entrypoint = text(self.spec.get("entrypoint"))
        if self.has_ref:
            return  # the templates are in the cluster; Argo's offline lint looks in its files
        if entrypoint:
            self.holder({"template": entrypoint})
        on_exit = text(self.spec.get("onExit"))
        if on_exit:
            self.globals.add("workflow.failures")
            if any(
                is_parameter(text(a.get("globalName")))
                for t in self.templates.values()
                for a in objects(obj(t.get("outputs")).get("artifacts"))
            ):
                self.globals.add("workflow.outputs.artifacts." + ANY)
            self.holder({"template": on_exit})
        self.hooks(obj(self.spec.get("hooks")), "hooks")
        strategy = text(obj(self.spec.get("podGC")).get("strategy"))
        if strategy not in _POD_GC:
            raise TemplateProblem(f"podGC.strategy unknown strategy '{strategy}'")
        for tmpl in objects(self.spec.get("templates")):
            name = text(tmpl.get("name"))
            try:
                self.holder({"template": name})
            except TemplateProblem as p:
                raise TemplateProblem(f"templates.{name} {p}") from None

    @staticmethod
    def hooks(hooks: Obj, base: str) -> None:
        for name, hook in hooks.items():
            if name != "exit" and not text(obj(hook).get("expression")):
                raise TemplateProblem(f"{base}.{name} Expression required")

    # ------------------------------------------------------------------ templates

    def holder(self, holder: Obj) -> Obj | None:
        """validateTemplateHolder: the template a step, task or entrypoint names, checked.
        None when it lives in the cluster (a templateRef)."""
        ref = holder.get("templateRef")
        name = text(holder.get("template"))
        if ref is not None:
            ref = obj(ref)
            if name:
                raise TemplateProblem("template name cannot be specified with templateRef.")
            if not text(ref.get("name")):
                raise TemplateProblem("resource name is required")
            if not text(ref.get("template")):
                raise TemplateProblem("template name is required")
            return None
        inline = holder.get("inline")
        if name:
            if name not in self.templates:
                raise TemplateProblem(f"template name '{name}' undefined")
            tmpl = self.templates[name]
        elif isinstance(inline, Mapping):
            tmpl = inline
        else:
            return None  # Argo resolves nothing here and has nothing to check
        if template_type(tmpl) == "Unknown":
            raise TemplateProblem(f"template '{text(tmpl.get('name'))}' type is unknown")
        policy = text(obj(tmpl.get("retryStrategy")).get("retryPolicy"))
        if tmpl.get("retryStrategy") is not None and policy not in _RETRY_POLICIES:
            raise TemplateProblem(f"{policy} is not a valid RetryPolicy")
        self.template(tmpl, inline=not name)
        return tmpl

    def template(self, tmpl: Obj, *, inline: bool) -> None:
        name = text(tmpl.get("name"))
        kind = template_type(tmpl)
        if sum(tmpl.get(key) is not None for key, _ in _TYPES) > 1:
            raise TemplateProblem(f"templates.{name} multiple template types specified. {_CHOOSE}")
        scope = template_inputs(tmpl, kind)
        for c in objects(tmpl.get("initContainers")):
            if not text(c.get("name")):
                raise TemplateProblem("initContainers must all have container name")
        if kind in _PODS:
            scope.add("pod.name")
        outputs = obj(tmpl.get("outputs"))
        if kind in LEAVES:
            for a in objects(outputs.get("artifacts")):
                if text(a.get("path")):
                    scope.add(f"outputs.artifacts.{a.get('name')}.path")
            for p in objects(outputs.get("parameters")):
                if text(obj(p.get("valueFrom")).get("path")):
                    scope.add(f"outputs.parameters.{p.get('name')}.path")
        timeout = tmpl.get("timeout")
        if isinstance(timeout, str) and timeout:
            if kind not in LEAVES:
                raise TemplateProblem(f"{kind} template doesn't support timeout field")
            if re.fullmatch(r"[+-]?\d+", timeout):
                raise TemplateProblem(f"{name} has invalid duration format in timeout")
        if not inline:
            if name in self.done:
                return
            self.done.add(name)
        scope |= self.globals
        if kind == "Steps":
            self.steps(tmpl, scope)
        elif kind == "DAG":
            self.dag(tmpl, scope)
        else:
            self.leaf(tmpl, kind, scope)
        self.outputs(tmpl, kind, scope)

    def resolve(self, scope: set[str], value: object) -> None:
        """resolveAllVariables: every tag under a checked root is in scope or run-time."""
        for tag in tags(value):
            trimmed = tag.strip()
            if not trimmed.startswith(_CHECKED_ROOTS) or trimmed in scope:
                continue
            if trimmed.startswith(_RUNTIME_PREFIXES):
                continue
            if any(s.endswith(ANY) and trimmed.startswith(s[: -len(ANY)]) for s in scope):
                continue
            if trimmed == "item" and "item." + ANY in scope:
                continue
            raise TemplateProblem(f"failed to resolve {{{{{tag}}}}}")

    def leaf(self, tmpl: Obj, kind: str, scope: set[str]) -> None:
        try:
            self.resolve(scope, tmpl)
        except TemplateProblem as p:
            raise TemplateProblem(f"templates.{text(tmpl.get('name'))}: {p}") from None
        leaf_fields(tmpl, self.spec)

    @staticmethod
    def non_leaf(tmpl: Obj) -> None:
        if tmpl.get("activeDeadlineSeconds") is not None:
            raise TemplateProblem(
                f"templates.{text(tmpl.get('name'))}.activeDeadlineSeconds is only valid for "
                "leaf templates"
            )

    # ------------------------------------------------------------------ steps and DAGs

    def steps(self, tmpl: Obj, scope: set[str]) -> None:
        self.non_leaf(tmpl)
        name = text(tmpl.get("name"))
        seen: set[str] = set()
        groups = tmpl.get("steps")
        for i, group in enumerate(groups if isinstance(groups, list) else []):
            for step in objects(group):
                sname = text(step.get("name"))
                where = f"templates.{name}.steps[{i}]"
                if not sname:
                    raise TemplateProblem(f"{where}.name is required")
                if sname in seen:
                    raise TemplateProblem(f"{where}.name '{sname}' is not unique")
                errs = name_problems(sname, params=False)
                if errs:
                    raise TemplateProblem(f"{where}.name '{sname}' is invalid: {';'.join(errs)}")
                seen.add(sname)
                scope.add(f"steps.{sname}.status")
                try:
                    items_scope(step, scope)
                except TemplateProblem as p:
                    raise TemplateProblem(f"{where}.{sname} {p}") from None
                arguments(f"{where}.{sname}.arguments.", obj(step.get("arguments")))
                try:
                    resolved = self.holder(step)
                except TemplateProblem as p:
                    raise TemplateProblem(f"{where}.{sname} {p}") from None
                self.hooks(obj(step.get("hooks")), f"{where}.{sname}")
                step_scope = set(scope)
                for param in objects(obj(obj(step.get("inline")).get("inputs")).get("parameters")):
                    step_scope.add(f"inputs.parameters.{param.get('name')}")
                try:
                    self.resolve(step_scope, step)
                except TemplateProblem as p:
                    raise TemplateProblem(f"templates.{name}.steps {p}") from None
                aggregate = bool(step.get("withItems")) or bool(text(step.get("withParam")))
                self.outputs_scope(resolved, f"steps.{sname}", scope, aggregate=aggregate)

    def dag(self, tmpl: Obj, scope: set[str]) -> None:
        self.non_leaf(tmpl)
        name = text(tmpl.get("name"))
        dag = obj(tmpl.get("dag"))
        tasks = objects(dag.get("tasks"))
        if not tasks:
            raise TemplateProblem(f"templates.{name} must have at least one task")
        by_name = {text(t.get("name")): t for t in tasks}
        deps = {text(t.get("name")): dependencies(t, by_name) for t in tasks}
        sorting = sorting_problem(tasks, deps)
        if sorting:
            raise TemplateProblem(f"templates.{name} sorting failed: {sorting}")
        bad = names(tasks, params=False)
        if bad:
            raise TemplateProblem(f"templates.{name}.tasks{bad}")
        using_depends = any(text(t.get("depends")) for t in tasks)
        resolved: dict[str, Obj | None] = {}
        for task in tasks:
            tname = text(task.get("name"))
            where = f"templates.{name}.tasks.{tname}"
            if (using_depends or task.get("dependencies")) and tname[:1].isdigit():
                raise TemplateProblem(
                    f"{where} name cannot begin with a digit when using either 'depends' or "
                    "'dependencies'"
                )
            if using_depends and task.get("dependencies"):
                raise TemplateProblem(
                    f"templates.{name} cannot use both 'depends' and 'dependencies' in the same"
                    " DAG template"
                )
            if using_depends and task.get("continueOn") is not None:
                raise TemplateProblem(
                    f"templates.{name} cannot use 'continueOn' when using 'depends'. Instead use"
                    " 'dep-task.Failed'/'dep-task.Errored'"
                )
            try:
                resolved[tname] = self.holder(task)
            except TemplateProblem as p:
                raise TemplateProblem(f"{where} {p}") from None
            aggregate = bool(task.get("withItems")) or bool(text(task.get("withParam")))
            self.outputs_scope(resolved[tname], f"tasks.{tname}", scope, aggregate=aggregate)
            for match in TASK_RESULT.findall(text(task.get("depends"))):
                dep, result = match.split(".", 1)
                if result not in TASK_RESULTS:
                    raise TemplateProblem(
                        f"{where} task result '{result}' for task '{dep}' is invalid"
                    )
            for dep, items in deps[tname].items():
                # Argo's message names the dependency's task here, not this one (its loop
                # variable is shadowed), and no task when the dependency is not defined.
                other = by_name.get(dep)
                if other is None:
                    raise TemplateProblem(f"templates.{name}.tasks. dependency '{dep}' not defined")
                if items and not any(
                    other.get(k) for k in ("withItems", "withParam", "withSequence")
                ):
                    raise TemplateProblem(
                        f"templates.{name}.tasks.{dep} dependency '{dep}' uses an items-based"
                        " condition such as .AnySucceeded or .AllFailed but does not contain"
                        " any items"
                    )
        target = text(dag.get("target"))
        try:
            self.resolve(scope, target)
        except TemplateProblem as p:
            raise TemplateProblem(f"templates.{name}.targets {p}") from None
        for t in target.split(" ") if target else []:
            if not is_parameter(t) and t not in by_name:
                raise TemplateProblem(f"templates.{name}.targets: target '{t}' is not defined")
        readable: dict[str, set[str]] = {}
        for task in tasks:
            tname = text(task.get("name"))
            where = f"templates.{name}.tasks.{tname}"
            if task.get("hooks") is not None:
                scope.add(f"tasks.{tname}.status")
            task_scope = set(scope)
            lineage = Lineage(tname, deps)
            for anc in named_tasks(task):
                if anc in by_name and anc in lineage:
                    task_scope |= self.ancestor_scope(anc, by_name[anc], resolved, readable)
            for param in objects(obj(obj(task.get("inline")).get("inputs")).get("parameters")):
                task_scope.add(f"inputs.parameters.{param.get('name')}")
            try:
                items_scope(task, task_scope)
                self.resolve(task_scope, task)
            except TemplateProblem as p:
                raise TemplateProblem(f"{where} {p}") from None
            arguments(f"{where}.arguments.", obj(task.get("arguments")))
            missing = argument_dependency(obj(task.get("arguments")), lineage)
            if missing:
                raise TemplateProblem(f"{where} {missing}")

    def ancestor_scope(
        self, name: str, task: Obj, resolved: Mapping[str, Obj | None], memo: dict[str, set[str]]
    ) -> set[str]:
        """What a task's descendants may read of it (its outputs and status), worked out once
        per task: a chain of n tasks has n² ancestor pairs, and rebuilding this for each pair
        made a 3,000-task DAG take a minute to lint."""
        got = memo.get(name)
        if got is None:
            got = {f"tasks.{name}.status"}
            aggregate = bool(task.get("withItems")) or bool(text(task.get("withParam")))
            self.outputs_scope(resolved.get(name), f"tasks.{name}", got, aggregate=aggregate)
            memo[name] = got
        return got

    def outputs_scope(
        self, tmpl: Obj | None, prefix: str, scope: set[str], *, aggregate: bool
    ) -> None:
        """addOutputsToScope: what `{{steps.X...}}`/`{{tasks.X...}}` may read of a node."""
        scope |= {f"{prefix}.{k}" for k in ("id", "startedAt", "finishedAt", "hostNodeName")}
        if tmpl is None:
            scope.add(f"{prefix}.{ANY}")  # a template in the cluster: whatever it outputs
            return
        kind = template_type(tmpl)
        if tmpl.get("daemon") is True:
            scope.add(f"{prefix}.ip")
        names = {
            text(c.get("name")) for c in objects(obj(tmpl.get("containerSet")).get("containers"))
        }
        if kind in ("Container", "Script", "Data", "HTTP", "Plugin") or "main" in names:
            scope |= {f"{prefix}.outputs.result", f"{prefix}.exitCode"}
        outputs = obj(tmpl.get("outputs"))
        for what in ("parameters", "artifacts"):
            for item in objects(outputs.get(what)):
                scope.add(f"{prefix}.outputs.{what}.{item.get('name')}")
                global_name = text(item.get("globalName"))
                if global_name:
                    key = f"workflow.outputs.{what}."
                    key += ANY if is_parameter(global_name) else global_name
                    scope.add(key)
                    self.globals.add(key)
        if aggregate:
            scope.add(f"{prefix}.outputs.parameters")
            if kind in ("Script", "ContainerSet"):
                scope |= {f"{prefix}.outputs.result", f"{prefix}.exitCode"}

    def outputs(self, tmpl: Obj, kind: str, scope: set[str]) -> None:
        name = text(tmpl.get("name"))
        outputs = obj(tmpl.get("outputs"))
        for what in ("parameters", "artifacts"):
            bad = names(objects(outputs.get(what)), params=True)
            if bad:
                raise TemplateProblem(f"templates.{name}.outputs.{what} {bad}")
        try:
            self.resolve(scope, outputs)
        except TemplateProblem as p:
            raise TemplateProblem(f"templates.{name}.outputs {p}") from None
        for art in objects(outputs.get("artifacts")):
            ref = f"outputs.artifacts.{art.get('name')}"
            if kind not in LEAVES and text(art.get("path")):
                raise TemplateProblem(
                    f"templates.{name}.{ref}.path only valid in container/script templates"
                )
            global_name = text(art.get("globalName"))
            if global_name and not is_parameter(global_name) and not PARAM_NAME.match(global_name):
                raise TemplateProblem(f"templates.{name}.{ref}.globalName: {PARAM_NAME_MSG}")
        for param in objects(outputs.get("parameters")):
            ref = f"templates.{name}.outputs.parameters.{param.get('name')}"
            output_parameter(ref, param, kind)
