"""Argo's rules for a DAG's dependencies (workflow/common/ancestry.go, util/sorting), offline.

`depends` is an expression over task results; Argo reads the task names out of it with a
regular expression rather than parsing it, and so does this module, so that the same names are
found (and the same are missed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from cronsource.domain.workflowfields import Obj, objects, text

_TASK_NAME: Final = re.compile(
    r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)|([a-zA-Z0-9][-a-zA-Z0-9]*)"
)
TASK_RESULT: Final = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)")


def dependencies(task: Obj, by_name: Mapping[str, Obj]) -> dict[str, bool]:
    """GetTaskDependencies: the tasks this one depends on -> whether on their items."""
    depends = text(task.get("depends"))
    if not depends:
        listed = task.get("dependencies")
        return {str(d): False for d in listed} if isinstance(listed, list) else {}
    found: dict[str, bool] = {}
    for with_result, bare in _TASK_NAME.findall(depends):
        if with_result:
            dep, result = with_result.split(".", 1)
            if result in ("AnySucceeded", "AllFailed"):
                found[dep] = True
            else:
                found.setdefault(dep, False)
        else:
            found[bare] = False
    return found


def sorting_problem(tasks: Sequence[Obj], deps: Mapping[str, Mapping[str, bool]]) -> str | None:
    """util/sorting.TopologicalSorting's error for the DAG, if any."""
    names: set[str] = set()
    for t in tasks:
        n = text(t.get("name"))
        if n in names:
            return f"duplicated nodeName {n}"
        names.add(n)
    for t in tasks:
        for d in deps[text(t.get("name"))]:
            if d not in names:
                return f"invalid dependency {d}"
    remaining = {n: set(deps[n]) for n in names}
    while remaining:
        ready = [n for n, d in remaining.items() if not d]
        if not ready:
            return "graph with cycle"
        for n in ready:
            del remaining[n]
        for pending in remaining.values():
            pending.difference_update(ready)
    return None


def ancestry(name: str, deps: Mapping[str, Mapping[str, bool]]) -> list[str]:
    seen: list[str] = []
    stack = list(deps.get(name, {}))
    while stack:
        d = stack.pop()
        if d not in seen:
            seen.append(d)
            stack.extend(deps.get(d, {}))
    return seen


def argument_dependency(given: Obj, lineage: Sequence[str]) -> str | None:
    for p in objects(given.get("parameters")):
        value = p.get("value")
        if isinstance(value, str) and value.startswith("{{tasks."):
            ref = value.split(".")[1]
            if ref not in lineage:
                return f"missing dependency '{ref}' for parameter '{text(p.get('name'))}'"
    for a in objects(given.get("artifacts")):
        source = text(a.get("from"))
        if source.startswith("{{tasks."):
            ref = source.split(".")[1]
            if ref not in lineage:
                return f"missing dependency '{ref}' for artifact '{text(a.get('name'))}'"
    return None
