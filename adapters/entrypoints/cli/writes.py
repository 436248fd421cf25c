"""The commands that change a CronWorkflow: `suspend`, `resume`, `delete` and `trigger`, on names
or a label selector.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.entrypoints.cli.context import (
    KIND,
    NOTHING_RUNS,
    Ctx,
    _obj,
    fail,
    global_options,
)
from cronsource.adapters.entrypoints.cli.output import View, emit, no_resources, one_or_list
from cronsource.adapters.entrypoints.cli.reads import selected
from cronsource.adapters.entrypoints.cli.registry import cli, name_argument
from cronsource.domain.cronworkflow import manual_workflow_name
from cronsource.domain.service import NotFound
from cronsource.projections.readmodel import StatusRow


def _targets(ops: Operations, obj: Ctx, names: Sequence[str]) -> list[tuple[str, str]]:
    """(namespace, name) of each CronWorkflow named, or selected by `-l` (with -A: in any
    namespace). A selection that matches nothing is no error, as in kubectl: the caller says
    `No resources found` and exits 0. A name that does not exist is, in `_each`."""
    if not names and not obj.selector:
        fail("give one or more names, or -l SELECTOR")
    obj.by_name(names)
    if obj.selector:
        rows = selected(ops, obj, None if obj.all_namespaces else obj.ns)
        return [(c.namespace, c.name) for c in rows]
    return [(obj.ns, n) for n in names]


@dataclass
class Done:
    """What a command did to one CronWorkflow: the line people read, and the object `-o
    json|yaml` prints (None when `_each` should print the CronWorkflow as it is now)."""

    message: str
    data: dict[str, Any] | None = None
    name: str = ""


def _each(
    names: Sequence[str],
    do: Callable[[Operations, str, str], Done],
    *,
    notice: bool = False,
) -> None:
    """`do(ops, namespace, name)` for each target; an unknown one is an `error:` line and
    makes the exit 1 after the others ran. The output is kubectl's: one line per object for
    people; `-o name` its name; `-o json|yaml` every object once all are done (one object
    for one name, a `List` for several or for a selection)."""
    obj = _obj()
    machine = obj.output in ("json", "yaml")
    missing = 0
    items: list[dict[str, Any]] = []
    with obj.operations(settle_each=machine) as ops:
        targets = _targets(ops, obj, names)
        for ns, name in targets:
            try:
                done = do(ops, ns, name)
                if machine:
                    items.append(done.data or ops.status(ns, name).as_object())
            except NotFound as e:
                click.echo(f"error: {e}", err=True)
                missing += 1
                continue
            if obj.output == "name":
                click.echo(done.name or f"{KIND}/{name}")
            elif not machine:
                click.echo(done.message)
        if not targets:
            click.echo(no_resources(None if obj.all_namespaces else obj.ns), err=True)
        if notice and len(targets) > missing and obj.unscheduled(ops):
            click.echo(NOTHING_RUNS, err=True)  # an unknown name alone stays one error line
    if machine and (items or not missing):
        emit(
            View(one_or_list(items, listed=bool(obj.selector) or len(names) != 1), [], []),
            obj.output,
        )
    if missing:
        sys.exit(1)


def _from_cluster(row: StatusRow, what: str) -> StatusRow:
    """Warn when the CronWorkflow came from a Kubernetes cluster (`run --kube`, which gives
    it the object's uid): the change is the store's alone, and the object in the cluster (what
    kubectl and argo show, and what the next edit or re-list reads) does not have it. Returns
    the row, for a caller that prints it."""
    if row.metadata.get("uid"):
        ns, name = row.namespace, row.name
        click.echo(
            f"warning: {ns}/{name} comes from a Kubernetes cluster (run --kube): {what} changes"
            " this store only, not the object in the cluster; change it there (kubectl, argo"
            " cron) to keep the two in step",
            err=True,
        )
    return row


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def suspend(names: tuple[str, ...]) -> None:
    """Suspend: no tick runs until resumed (several names, or -l)."""

    def do(ops: Operations, ns: str, name: str) -> Done:
        _from_cluster(ops.status(ns, name), "suspend")
        was_running, _ = ops.suspend(ns, name, by="cli")
        return Done(
            f"{KIND}/{name} {'suspended' if was_running else 'unchanged (already suspended)'}"
        )

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def resume(names: tuple[str, ...]) -> None:
    """Resume: the ticks of the suspension (or of a pause after failures) are decided, at
    most one runs; a pause after failures counts again from zero."""

    def do(ops: Operations, ns: str, name: str) -> Done:
        _from_cluster(ops.status(ns, name), "resume")
        was_held, _ = ops.resume(ns, name, by="cli")
        return Done(
            f"{KIND}/{name} {'resumed' if was_held else 'unchanged (not suspended or paused)'}"
        )

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    help="delete what these files apply (CronWorkflows and calendars), as `kubectl delete -f`:"
    " file, directory or -",
)
@global_options()
def delete(names: tuple[str, ...], files: tuple[str, ...]) -> None:
    """Delete; the history stays queryable (alias rm). `-o json|yaml` prints each
    CronWorkflow as it was just before it was deleted. `-f FILE` deletes the objects a file
    applies, calendars too (the only way to delete one from the CLI)."""
    if files:
        if names or _obj().selector:
            fail("delete: give names, -l SELECTOR or -f FILE, not several of them")
        _delete_files(files)
        return
    machine = _obj().output in ("json", "yaml")

    def do(ops: Operations, ns: str, name: str) -> Done:
        row = _from_cluster(ops.status(ns, name), "delete")
        ops.delete(ns, name)
        last = row.as_object() if machine else None
        return Done(f"{KIND}/{name} deleted", last)

    _each(names, do)


def _delete_files(files: tuple[str, ...]) -> None:
    """`delete -f`: each CronWorkflow and calendar the files hold, by namespace and name, in
    file order; one that is not there is an `error:` line and exit 1 after the others, as
    `kubectl delete -f` says NotFound and goes on."""
    from cronsource.adapters.entrypoints.cli.admission import objects_of

    obj = _obj()
    manifests, calendars = objects_of(files)
    machine = obj.output in ("json", "yaml")
    items: list[dict[str, Any]] = []
    missing = 0
    with obj.operations(settle_each=machine) as ops:
        for m in manifests:
            ns, name = m.metadata.namespace, m.metadata.name
            try:
                row = _from_cluster(ops.status(ns, name), "delete")
                ops.delete(ns, name)
            except NotFound as e:
                click.echo(f"error: {e}", err=True)
                missing += 1
                continue
            items += [row.as_object()] if machine else []
            _said(obj, f"{KIND}/{name}", f"{KIND}/{name} deleted")
        for c in calendars:
            before = ops.calendars(c.namespace, [c.name]) if machine else []
            try:
                version = ops.delete_calendar(c.namespace, c.name)
            except NotFound as e:
                click.echo(f"error: {e}", err=True)
                missing += 1
                continue
            items += before
            _said(obj, f"configmap/{c.name}", f"calendar/{c.name} deleted (version {version})")
            for line in ops.calendar_deleted_warnings(c.namespace, c.name):
                click.echo(f"warning: {line}", err=True)
    if machine and (items or not missing):
        emit(View(one_or_list(items, listed=len(items) != 1), [], []), obj.output)
    if missing:
        sys.exit(1)


def _said(obj: Ctx, name: str, message: str) -> None:
    if obj.output == "name":
        click.echo(name)
    elif obj.output not in ("json", "yaml"):
        click.echo(message)


def _check_request_id(request_id: str) -> None:
    """The HTTP API's rule for a request id (TriggerRequest): an empty one made each retry a
    new run (a random id), which is what the flag is there to prevent."""
    from pydantic import ValidationError

    from cronsource.adapters.application.models import TriggerRequest

    try:
        TriggerRequest(requestId=request_id)
    except ValidationError as e:
        fail(f"--request-id: {request_id!r}: {e.errors()[0]['msg'].lower()}", 2)


@cli.command()
@name_argument(required=False, many=True)
@click.option(
    "--request-id", default=None, help="idempotency key; a retried request starts no second run"
)
@global_options()
def trigger(names: tuple[str, ...], request_id: str | None) -> None:
    """Run now (a manual fire). `-o name` prints the Workflow's name (`workflow.argoproj.io/
    NAME`, as `kubectl create job --from` does), `-o json|yaml` what the HTTP API answers:
    workflow, requestId, triggered."""
    if request_id is not None:
        _check_request_id(request_id)
    rid = request_id or uuid.uuid4().hex

    def do(ops: Operations, ns: str, name: str) -> Done:
        wf, _ = ops.trigger(ns, name, rid)
        workflow = wf or manual_workflow_name(name, rid)
        data = {"workflow": workflow, "requestId": rid, "triggered": wf is not None}
        shown = f"workflow.argoproj.io/{workflow}"
        if wf is None:
            return Done(f"request {rid} already triggered", data, shown)
        if _obj().unscheduled(ops):
            # Recorded, and created only when a `run` dispatches it (a manual run has no
            # deadline: docs/scheduling.md), so it is not "triggered" yet.
            return Done(
                f"workflow {wf} queued: nothing creates it until `cronsource run` runs",
                data,
                shown,
            )
        return Done(f"workflow {wf} triggered", data, shown)

    _each(names, do, notice=True)
