"""The commands that change a CronWorkflow: `suspend`, `resume`, `delete` and `trigger`, on names
or a label selector.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Sequence

import click

from cronsource.adapters.entrypoints.cli.context import (
    KIND,
    NOTHING_RUNS,
    Ctx,
    _obj,
    fail,
    global_options,
    now,
)
from cronsource.adapters.entrypoints.cli.reads import selected
from cronsource.adapters.entrypoints.cli.registry import cli, name_argument
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.service import NotFound


def _targets(engine: Engine, obj: Ctx, names: Sequence[str]) -> list[tuple[str, str]]:
    """(namespace, name) of each CronWorkflow named, or selected by `-l` (with -A: in any
    namespace); unknown names are reported and make the exit 1 after the others ran."""
    if not names and not obj.selector:
        fail("give one or more names, or -l SELECTOR")
    if obj.selector:
        rows = selected(engine.view.statuses(None if obj.all_namespaces else obj.ns), obj)
        if not rows:
            fail(f"no CronWorkflow matches -l {obj.selector!r}")
        return [(c.namespace, c.name) for c in rows]
    return [(obj.ns, n) for n in names]


def _each(
    names: Sequence[str], do: Callable[[Engine, CronWorkflow], str], *, notice: bool = False
) -> None:
    obj = _obj()
    missing = done = 0
    with obj.engine() as engine:
        for ns, name in _targets(engine, obj, names):
            try:
                agg = engine.service.find(ns, name)
            except NotFound as e:
                click.echo(f"error: {e}", err=True)
                missing += 1
                continue
            message = do(engine, agg)
            done += 1
            click.echo(f"{KIND}/{name}" if obj.output == "name" else message)
        if notice and done and obj.unscheduled(engine):
            click.echo(NOTHING_RUNS, err=True)  # an unknown name alone stays one error line
    if missing:
        sys.exit(1)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def suspend(names: tuple[str, ...]) -> None:
    """Suspend: no tick runs until resumed (several names, or -l)."""

    def do(e: Engine, a: CronWorkflow) -> str:
        was = a.suspended
        e.service.suspend(a.id, now(), by="cli")
        return f"{KIND}/{a.name} {'unchanged (already suspended)' if was else 'suspended'}"

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def resume(names: tuple[str, ...]) -> None:
    """Resume: the ticks of the suspension are decided, at most one runs."""

    def do(e: Engine, a: CronWorkflow) -> str:
        was = a.suspended or a.stopped
        e.service.resume(a.id, now(), by="cli")
        return f"{KIND}/{a.name} {'resumed' if was else 'unchanged (not suspended)'}"

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def delete(names: tuple[str, ...]) -> None:
    """Delete; the history stays queryable (alias rm)."""

    def do(e: Engine, a: CronWorkflow) -> str:
        e.service.delete(a.id, now())
        return f"{KIND}/{a.name} deleted"

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

    def do(e: Engine, a: CronWorkflow) -> str:
        wf = e.service.trigger(a.id, now(), rid)
        if wf is None:
            return f"request {rid} already triggered"
        if _obj().unscheduled(e):
            # Recorded, and created only when a `run` dispatches it (a manual run has no
            # deadline: docs/scheduling.md), so it is not "triggered" yet.
            return f"workflow {wf} queued: nothing creates it until `cronsource run` runs"
        return f"workflow {wf} triggered"

    _each(names, do, notice=True)
