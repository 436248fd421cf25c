"""The commands that change a CronWorkflow: `suspend`, `resume`, `delete` and `trigger`, on names
or a label selector.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Sequence

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
from cronsource.adapters.entrypoints.cli.reads import selected
from cronsource.adapters.entrypoints.cli.registry import cli, name_argument
from cronsource.domain.service import NotFound


def _targets(ops: Operations, obj: Ctx, names: Sequence[str]) -> list[tuple[str, str]]:
    """(namespace, name) of each CronWorkflow named, or selected by `-l` (with -A: in any
    namespace); unknown names are reported and make the exit 1 after the others ran."""
    if not names and not obj.selector:
        fail("give one or more names, or -l SELECTOR")
    if obj.selector:
        rows = selected(ops, obj, None if obj.all_namespaces else obj.ns)
        if not rows:
            fail(f"no CronWorkflow matches -l {obj.selector!r}")
        return [(c.namespace, c.name) for c in rows]
    return [(obj.ns, n) for n in names]


def _each(
    names: Sequence[str], do: Callable[[Operations, str, str], str], *, notice: bool = False
) -> None:
    """`do(ops, namespace, name)` for each target; an unknown one is an `error:` line and
    makes the exit 1 after the others ran."""
    obj = _obj()
    missing = done = 0
    with obj.operations() as ops:
        for ns, name in _targets(ops, obj, names):
            try:
                message = do(ops, ns, name)
            except NotFound as e:
                click.echo(f"error: {e}", err=True)
                missing += 1
                continue
            done += 1
            click.echo(f"{KIND}/{name}" if obj.output == "name" else message)
        if notice and done and obj.unscheduled(ops):
            click.echo(NOTHING_RUNS, err=True)  # an unknown name alone stays one error line
    if missing:
        sys.exit(1)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def suspend(names: tuple[str, ...]) -> None:
    """Suspend: no tick runs until resumed (several names, or -l)."""

    def do(ops: Operations, ns: str, name: str) -> str:
        was_running, _ = ops.suspend(ns, name, by="cli")
        return f"{KIND}/{name} {'suspended' if was_running else 'unchanged (already suspended)'}"

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def resume(names: tuple[str, ...]) -> None:
    """Resume: the ticks of the suspension (or of a pause after failures) are decided, at
    most one runs; a pause after failures counts again from zero."""

    def do(ops: Operations, ns: str, name: str) -> str:
        was_held, _ = ops.resume(ns, name, by="cli")
        return f"{KIND}/{name} {'resumed' if was_held else 'unchanged (not suspended or paused)'}"

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def delete(names: tuple[str, ...]) -> None:
    """Delete; the history stays queryable (alias rm)."""

    def do(ops: Operations, ns: str, name: str) -> str:
        ops.delete(ns, name)
        return f"{KIND}/{name} deleted"

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@click.option(
    "--request-id", default=None, help="idempotency key; a retried request starts no second run"
)
@global_options()
def trigger(names: tuple[str, ...], request_id: str | None) -> None:
    """Run now (a manual fire)."""
    rid = request_id or uuid.uuid4().hex

    def do(ops: Operations, ns: str, name: str) -> str:
        wf, _ = ops.trigger(ns, name, rid)
        if wf is None:
            return f"request {rid} already triggered"
        if _obj().unscheduled(ops):
            # Recorded, and created only when a `run` dispatches it (a manual run has no
            # deadline: docs/scheduling.md), so it is not "triggered" yet.
            return f"workflow {wf} queued: nothing creates it until `cronsource run` runs"
        return f"workflow {wf} triggered"

    _each(names, do, notice=True)
