"""Argo's rules for a DAG's dependencies (workflow/common/ancestry.go, util/sorting), offline.

`depends` is an expression over task results; Argo reads the task names out of it with a
regular expression rather than parsing it, and so does this module, so that the same names are
found (and the same are missed).
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping, Sequence
from typing import Final

from cronsource.domain.workflowfields import Obj, objects, tags, text

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
    # Kahn's algorithm: each edge is looked at once (taking away each round's ready tasks
    # from every pending set made a chain of n tasks cost n²).
    children: dict[str, list[str]] = {n: [] for n in names}
    waiting = dict.fromkeys(names, 0)
    for n in names:
        for d in deps[n]:
            children[d].append(n)
            waiting[n] += 1
    ready = [n for n, k in waiting.items() if k == 0]
    done = 0
    while ready:
        done += 1
        for c in children[ready.pop()]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    return None if done == len(names) else "graph with cycle"


class Lineage(Container[str]):
    """The tasks one task depends on, directly or not (GetTaskAncestry), walked only as far
    as a question needs: a task asks only about the tasks its tags name, so a chain of n
    tasks costs n steps instead of the n² of listing every task's ancestors."""

    def __init__(self, name: str, deps: Mapping[str, Mapping[str, bool]]) -> None:
        self._deps = deps
        self._stack = list(deps.get(name, {}))
        self._seen: set[str] = set()

    def __contains__(self, other: object) -> bool:
        seen, stack = self._seen, self._stack
        while other not in seen and stack:
            d = stack.pop()
            if d not in seen:
                seen.add(d)
                stack.extend(self._deps.get(d, {}))
        return other in seen


def argument_dependency(given: Obj, lineage: Container[str]) -> str | None:
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


def named_tasks(task: Obj) -> set[str]:
    """The tasks a task's tags name (`{{tasks.NAME...}}`): the only ancestors whose outputs
    its scope needs."""
    out: set[str] = set()
    for tag in tags(task):
        parts = tag.strip().split(".", 2)
        if len(parts) > 1 and parts[0] == "tasks":
            out.add(parts[1])
    return out
