"""`cronsource adopt` and `cronsource release`: hand CronWorkflows between Argo's cron
controller and cronsource, each between two of its ticks (application/handover.py holds the
windows; this module the flags and the table)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from cronsource.adapters.application.handover import Lookup, Move, MoveError, move
from cronsource.adapters.entrypoints.cli.context import KIND, _obj, fail, global_options
from cronsource.adapters.entrypoints.cli.output import View, emit
from cronsource.adapters.entrypoints.cli.registry import cli
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.durations import parse_duration
from cronsource.domain.service import NotFound
from cronsource.projections.readmodel import rfc3339


def _move_options(f: Any) -> Any:
    """The options `adopt` and `release` share."""
    opts = [
        click.argument("names", nargs=-1),
        click.option("--kubeconfig", default=None, help="default $KUBECONFIG, ~/.kube/config"),
        click.option(
            "--instance-id",
            default="cronsource",
            show_default=True,
            envvar="CRONSOURCE_INSTANCE_ID",
            help="the instance id `cronsource run --kube` selects",
        ),
        click.option(
            "--argo-instance-id",
            default="",
            help="Argo's controller instance id (default: none, Argo takes unlabelled objects)",
        ),
        click.option(
            "--margin", default="3s", show_default=True, help="no move this close before a tick"
        ),
        click.option(
            "--settle", default="2s", show_default=True, help="no move this soon after a tick"
        ),
        click.option("--timeout", default="2m", show_default=True, help="give up after this"),
        global_options(output=True, all_namespaces=True, selector=True),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _move(to_cronsource: bool, names: tuple[str, ...], **flags: Any) -> None:
    obj = _obj()
    durations = {}
    for flag in ("margin", "settle", "timeout"):
        try:
            durations[flag] = parse_duration(flags[flag])
        except ValueError as e:
            fail(f"--{flag}: {e}")

    def go(lookup: Lookup | None) -> list[Move]:
        try:
            return move(
                to_cronsource=to_cronsource,
                kubeconfig=flags["kubeconfig"],
                namespace=None if obj.all_namespaces else obj.ns,
                selector=obj.selector,
                names=names,
                instance_id=flags["instance_id"],
                argo_instance_id=flags["argo_instance_id"],
                lookup=lookup,
                **durations,
            )
        except MoveError as e:
            fail(str(e))

    if to_cronsource or not (obj.store or os.environ.get("CRONSOURCE_STORE")):
        if not to_cronsource:
            click.echo(
                "note: without --store, cronsource's own state is not checked: each object"
                " moves on its schedule alone",
                err=True,
            )
        moves = go(None)
    else:
        with obj.operations() as ops:

            def lookup(ns: str, name: str, uid: str) -> CronWorkflow | None:
                try:
                    return ops.find(ns, name, uid)
                except NotFound:
                    return None

            moves = go(lookup)
    rows = [
        [m.namespace, m.name, "yes" if m.moved else "no", rfc3339(m.at) or "-", m.note]
        for m in moves
    ]
    emit(
        View(
            [m.as_dict() for m in moves],
            ["NAMESPACE", "NAME", "MOVED", "AT", "NOTE"],
            rows,
            names=[f"{KIND}/{m.name}" for m in moves if m.moved],
            empty="no CronWorkflow selected",
        ),
        obj.output,
    )
    if any(m.note.startswith("not moved") for m in moves):
        sys.exit(1)


@cli.command()
@_move_options
def adopt(names: tuple[str, ...], **flags: Any) -> None:
    """Hand CronWorkflows from Argo's cron controller to cronsource (label them with
    cronsource's instance id), each between two of its ticks (docs/migration.md)."""
    _move(True, names, **flags)


@cli.command()
@_move_options
def release(names: tuple[str, ...], **flags: Any) -> None:
    """Hand CronWorkflows back to Argo's cron controller, each between two of its ticks,
    once the status on the object shows cronsource's last decision (docs/migration.md)."""
    _move(False, names, **flags)
