"""`backfill`: a range of past ticks run as the schedule would have run them (domain/backfill.py),
or planned with `--dry-run`, or cancelled.
"""

from __future__ import annotations

from typing import Any, cast

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cronsource.adapters.application.inputs import FieldError
from cronsource.adapters.application.objects import backfill_result
from cronsource.adapters.entrypoints.cli.context import (
    KIND,
    Ctx,
    _obj,
    err_console,
    fail,
    global_options,
    parse_time,
    time_help,
)
from cronsource.adapters.entrypoints.cli.output import View, emit
from cronsource.adapters.entrypoints.cli.registry import cli, name_argument
from cronsource.domain.backfill import (
    DEFAULT_MAX_BACKFILL_TICKS,
    MAX_BACKFILL_TICKS,
    OVERLAPS,
    BackfillPlan,
    Overlap,
)
from cronsource.domain.service import NotFound
from cronsource.projections.readmodel import rfc3339


def backfill_summary(ref: str, plan: BackfillPlan, dry_run: bool, pending_after: str) -> str:
    """The one line that says what the backfill does (or would do) with each tick."""
    how = {
        "Allow": "all at once"
        if plan.parallel is None
        else f"{plan.parallel} at a time, the rest queued",
        "Queue": f"one after another, {plan.parallel or 1} at a time",
        "Forbid": "no overlap: a tick whose turn comes while a run is active is skipped",
        "Replace": "each replaces the one before: only the latest runs",
    }[plan.overlap]
    verb = "would start" if dry_run else "started"
    parts = [f"{len(plan.fire)} now"] + ([f"{len(plan.queue)} queued"] if plan.queue else [])
    line = (
        f"{'dry run: ' if dry_run else ''}backfill {ref}: {plan.candidates} ticks in range,"
        f" {verb} {len(plan.runs)} ({', '.join(parts)}; overlap {plan.overlap}: {how}),"
        f" skipped {len(plan.skip)}"
        + (f" ({plan.skip_reason})" if plan.skip else "")
        + f", already fired {len(plan.fired_before)}"
        + (f", already queued {len(plan.queued_before)}" if plan.queued_before else "")
    )
    if plan.skip and plan.overlap in ("Forbid", "Replace"):
        line += "; --overlap Queue runs them one after another"
    return line + pending_after


def _cancel(obj: Ctx, name: str, dry_run: bool) -> None:
    """`--cancel`: drop the backfill queue; with `--dry-run`, only count it (it used to drop it)."""
    with obj.operations(notice=True) as ops:
        try:
            if dry_run:
                n = len(ops.find(obj.ns, name).backfill_queue)
            else:
                n = ops.cancel_backfill(obj.ns, name)
        except NotFound as ex:
            fail(str(ex))
    ref = f"{obj.ns}/{name}"
    line = (
        f"backfill {ref}: {n} queued ticks would be cancelled (dry run)"
        if dry_run
        else f"backfill {ref}: {n} queued ticks cancelled"
    )
    data = {"namespace": obj.ns, "name": name, "cancelled": n, "dryRun": dry_run}
    if obj.output in ("json", "yaml"):
        emit(View(data, [], []), obj.output)
    else:
        click.echo(f"{KIND}/{name}" if obj.output == "name" else line)


@cli.command()
@name_argument()
@click.option("--start", default=None, help=time_help("ticks at or after it"))
@click.option("--end", default=None, help=time_help("ticks at or before it"))
@click.option(
    "--overlap",
    type=click.Choice(OVERLAPS),
    default=None,
    help="how backfill runs overlap (default: the CronWorkflow's concurrencyPolicy);"
    " Queue runs them one after another",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 10_000),
    default=None,
    help="Allow/Queue: at most N backfill runs at once, the rest wait their turn",
)
@click.option(
    "--max-ticks",
    type=click.IntRange(1, MAX_BACKFILL_TICKS),
    default=DEFAULT_MAX_BACKFILL_TICKS,
    show_default=True,
    help="refuse a range with more ticks than this",
)
@click.option("--dry-run", is_flag=True, help="print what would run, change nothing")
@click.option(
    "--cancel",
    is_flag=True,
    help="drop every tick queued by earlier backfills (no range; with --dry-run: count them)",
)
@global_options(all_namespaces=False, selector=False)
def backfill(
    name: str,
    start: str | None,
    end: str | None,
    overlap: str | None,
    parallel: int | None,
    max_ticks: int,
    dry_run: bool,
    cancel: bool,
) -> None:
    """Run the ticks in [start, end] that never fired (skipped ones, and ticks before the
    CronWorkflow existed); ticks not decided yet are left to the scheduler."""
    obj = _obj()
    if cancel:
        # The queue is dropped whole: a range, an overlap or a parallel given with it were
        # ignored without a word (a range in 2030 cancelled ticks of 2026).
        given = [
            f
            for f, v in (
                ("--start", start),
                ("--end", end),
                ("--overlap", overlap),
                ("--parallel", parallel),
            )
            if v is not None
        ]
        if given:
            fail(f"{'/'.join(given)}: not with --cancel, which drops every queued tick", 2)
        _cancel(obj, name, dry_run)
        return
    for flag, value in (("--start", start), ("--end", end)):
        if value is None:
            raise click.UsageError(f"Missing option '{flag}' (or --cancel).")
    assert start is not None and end is not None
    parse_time(start, "--start"), parse_time(end, "--end")  # bad text: refused before the store
    if parallel is not None and overlap in ("Forbid", "Replace"):
        fail(f"--parallel applies to --overlap Allow or Queue, not {overlap}")
    ref = f"{obj.ns}/{name}"
    with obj.operations(notice=True) as ops:
        try:
            agg = ops.find(obj.ns, name)
        except NotFound as ex:
            fail(str(ex))
        zone = agg.spec_model.timezone or None  # a date alone: midnight in its zone
        s, e = parse_time(start, "--start", zone), parse_time(end, "--end", zone)
        if e < s:
            fail(f"--end {end} is before --start {start}")
        pending_after = (
            f"; ticks after {rfc3339(agg.decided_until)} are not decided yet (the scheduler"
            " decides them)"
            if e > agg.decided_until
            else ""
        )
        chosen = cast(Overlap | None, overlap)
        try:
            plan = ops.plan_backfill(
                obj.ns, name, s, e, max_ticks, overlap=chosen, parallel=parallel
            )
        except FieldError as ex:
            if ex.field == "end":  # more ticks than --max-ticks
                fail(f"--start/--end: {ex.message} (--max-ticks {max_ticks})")
            fail(f"--{ex.field}: {ex.message}")
        if dry_run or not plan.runs:  # nothing to start: the plan is the whole answer
            data = backfill_result(name, plan, dry_run)
            _backfill_out(obj, data, backfill_summary(ref, plan, dry_run, pending_after), name)
            return
        with Progress(
            TextColumn("backfill {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=not err_console.is_terminal,
        ) as progress:
            task = progress.add_task(ref, total=len(plan.fire))
            done = ops.backfill(
                obj.ns,
                name,
                s,
                e,
                False,
                max_ticks,
                overlap=chosen,
                parallel=parallel,
                progress=lambda n, total: progress.update(task, completed=n, total=total),
            )
    data = backfill_result(name, done, False)
    _backfill_out(obj, data, backfill_summary(ref, done, False, pending_after), name)


def _backfill_out(obj: Ctx, data: dict[str, Any], summary: str, name: str) -> None:
    machine = obj.output in ("json", "yaml", "name")
    click.echo(summary, err=machine)  # the count first: before a long table
    rows = [[i["scheduledTime"], i["workflow"], i["action"]] for i in data["items"]]
    if not rows and obj.output in ("table", "wide"):
        return  # the summary said it all: no table of headers only
    emit(
        View(
            data,
            ["SCHEDULED", "WORKFLOW", "ACTION"],
            rows,
            names=[i["workflow"] for i in data["items"] if i["action"] != "skip"],
        ),
        obj.output,
    )
