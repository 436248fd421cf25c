"""Manifests in: `lint` and `apply` (every document of every file admitted before the first is
applied, so bad input stores nothing).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from cronsource.adapters.application.manifestfiles import Admission, admit_files
from cronsource.adapters.application.operations import Operations
from cronsource.adapters.entrypoints.cli.context import KIND, _obj, fail, global_options
from cronsource.adapters.entrypoints.cli.output import View, emit, one_or_list
from cronsource.adapters.entrypoints.cli.registry import cli
from cronsource.domain.calendars import CalendarSpec, calendar_names
from cronsource.domain.manifest import CronWorkflowManifest, ManifestError
from cronsource.domain.service import Applied


def read_files(
    paths: Sequence[str],
    namespace: str | None = None,
    *,
    only_cronworkflows: bool = False,
    exclude: str | None = None,
    strict: bool = False,
) -> Admission:
    """Every document of every path, admitted (adapters/application/manifestfiles.py), its
    problems and warnings printed, one `error:`/`warning:` line each; the caller decides the
    exit."""
    got = admit_files(
        paths,
        sys.stdin.buffer,
        namespace,
        only_cronworkflows=only_cronworkflows,
        exclude=exclude,
        strict=strict,
    )
    for line in got.problems:
        click.echo(f"error: {line}", err=True)
    for line in got.warnings:
        click.echo(f"warning: {line}", err=True)
    return got


def admit(
    paths: Sequence[str],
    namespace: str | None = None,
    *,
    only_cronworkflows: bool = False,
    exclude: str | None = None,
    with_calendars: list[CalendarSpec] | None = None,
) -> list[CronWorkflowManifest]:
    """The manifests to apply (and, into `with_calendars` when given, the calendars), or
    exit 1 after naming every problem of every file: nothing
    is applied when any file is bad, and when others were fine that is said, so a silent
    directory apply cannot be taken for a done one. `run PATHS` (`only_cronworkflows`)
    names each document it skips; `apply` counts them."""
    got = read_files(paths, namespace, only_cronworkflows=only_cronworkflows, exclude=exclude)
    if only_cronworkflows:
        for source, what in got.skipped:
            click.echo(f"skipped {source}: {what} is not a CronWorkflow", err=True)
    elif got.skipped:
        n = len(got.skipped)
        click.echo(
            f"{n} other document{'s' if n != 1 else ''} skipped (not CronWorkflows)", err=True
        )
    if got.problems:
        if got.manifests:
            n, bad = len(got.manifests), len(got.bad_files)
            fail(
                f"nothing applied: {bad} of {got.files} file(s) have errors"
                f" ({n} valid CronWorkflow(s) not applied either)"
            )
        sys.exit(1)
    if not got.manifests and not (got.calendars and with_calendars is not None):
        fail("found no CronWorkflow in the specified files")  # Argo: "found nothing to lint"
    if with_calendars is not None:
        with_calendars.extend(c for _, c in got.calendars)
    return [m for _, m in got.manifests]


def objects_of(files: Sequence[str]) -> tuple[list[CronWorkflowManifest], list[CalendarSpec]]:
    """The CronWorkflows and calendars of `apply -f` and `delete -f` files, admitted in the
    `-n` namespace (one naming another is refused, as kubectl refuses it)."""
    obj = _obj()
    calendars: list[CalendarSpec] = []
    manifests = admit(files, obj.namespace, with_calendars=calendars)
    if obj.namespace is not None:
        same_namespace(obj.namespace, [m.metadata for m in manifests] + calendars)
    return manifests, calendars


def same_namespace(namespace: str, objects: Sequence[Any]) -> None:
    """`-n` names the namespace of a file's objects that name none; one that names another
    is refused before anything is applied, as `kubectl apply -n` refuses it (its message):
    applying it in its own namespace, as before, put it where the user did not look."""
    for o in objects:
        if o.namespace != namespace:
            fail(
                f"the namespace from the provided object {o.namespace!r} ({o.name}) does not"
                f" match the namespace {namespace!r}: pass --namespace={o.namespace} to apply it"
            )


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option(
    "--strict",
    is_flag=True,
    help="a name Argo does not define in `when` or `stopStrategy` is an error, not a warning",
)
@global_options(output=False, all_namespaces=False, selector=False, store=False, namespace=False)
def lint(files: tuple[str, ...], strict: bool) -> None:
    """Validate manifests (files, directories, - for stdin): every bad file is named, one
    line per problem, and the exit is 1 when any is bad."""
    got = read_files(files, strict=strict)
    if not got.manifests and not got.problems:
        fail("found no CronWorkflow in the specified files")  # Argo: "found nothing to lint"
    click.echo(got.summary())
    if got.problems:
        sys.exit(1)


@cli.command()
@click.option(
    "-f", "--filename", "files", multiple=True, required=True, help="file, directory or -"
)
@click.option(
    "--force-conflicts",
    "--overwrite",
    "force",
    is_flag=True,
    help="take the file's values also where another writer changed a field since the last apply",
)
@global_options(all_namespaces=False, selector=False)
def apply(files: tuple[str, ...], force: bool) -> None:
    """Create or update CronWorkflows, as `kubectl apply`: a three-way merge of the last
    applied file, this file and the live object. A field the file does not set keeps its
    live value, and so does one another writer (`cronsource suspend`, an HTTP PUT) changed
    since the last apply while the file's value for it is unchanged; --force-conflicts
    takes the file's values. An unchanged file changes nothing and says `unchanged`."""
    obj = _obj()
    manifests, calendars = objects_of(files)
    machine = obj.output in ("json", "yaml")
    items: list[dict[str, Any]] = []

    if any(calendar_names(m.metadata.annotations) for m in manifests):
        # Before anything is applied (and before the notice about `run`): a CronWorkflow
        # naming a calendar neither the store nor these files hold is refused, naming it.
        with obj.operations() as ops:
            refuse_unknown_calendars(ops, manifests, calendars)

    with obj.operations(notice=True, settle_each=machine) as ops:

        def calendar_applied(c: CalendarSpec, version: int, what: str) -> None:
            if machine:
                items.extend(ops.calendars(c.namespace, [c.name]))
            elif obj.output == "name":  # as `calendars -o name` and kubectl name a ConfigMap
                click.echo(f"configmap/{c.name}")
            else:
                click.echo(f"calendar/{c.name} {what} (version {version})")

        def applied(m: CronWorkflowManifest, result: Applied) -> None:
            name = f"{KIND}/{m.metadata.name}"
            if machine:  # the object as it now is, as `kubectl apply -o json`
                items.append(ops.status(m.metadata.namespace, m.metadata.name).as_object())
            else:
                click.echo(name if obj.output == "name" else f"{name} {result.what}")

        apply_all(
            ops,
            manifests,
            applied,
            force=force,
            calendars=calendars,
            calendar_applied=calendar_applied,
        )
    if machine:
        emit(View(one_or_list(items, listed=len(items) != 1), [], []), obj.output)


def refuse_unknown_calendars(
    ops: Operations, manifests: Sequence[CronWorkflowManifest], calendars: Sequence[CalendarSpec]
) -> None:
    """Exit 1 naming every CronWorkflow that names a calendar neither the store nor
    `calendars` (applied with it) holds: one line when it is the only manifest."""
    pending = {(c.namespace, c.name) for c in calendars}
    refused = []
    for m in manifests:
        try:
            ops.check_calendars(m, pending)
        except ManifestError as e:
            refused.append(str(e))
    if len(refused) == 1 and len(manifests) == 1:
        fail(refused[0])
    if refused:
        for line in refused:
            click.echo(f"error: {line}", err=True)
        fail(f"nothing applied: {len(refused)} CronWorkflow(s) name unknown calendars")


def apply_all(
    ops: Operations,
    manifests: Sequence[CronWorkflowManifest],
    applied: Callable[[CronWorkflowManifest, Applied], None],
    *,
    force: bool = False,
    calendars: Sequence[CalendarSpec] = (),
    calendar_applied: Callable[[CalendarSpec, int, str], None] | None = None,
) -> None:
    """Apply every manifest three-way (`apply` and `run PATHS`): its notes as `warning:`
    lines, then `applied` says what it did. First every merge is decided without saving: one
    whose result is not a valid CronWorkflow (a value another writer set, merged with the
    file's), or one naming an unknown calendar, refuses them all, naming it, so files valid
    on their own are never half applied. Then the `calendars` (ConfigMaps among the files)
    are applied, `calendar_applied` saying each one's version, and then the CronWorkflows."""
    refuse_unknown_calendars(ops, manifests, calendars)
    pending_calendars = {(c.namespace, c.name) for c in calendars}
    refused = []
    for m in manifests:
        try:
            ops.apply(
                m,
                three_way=True,
                force=force,
                dry_run=True,
                pending_calendars=pending_calendars,
            )
        except ManifestError as e:
            refused.append(str(e))
    if refused:
        for line in refused:
            click.echo(f"error: {line}", err=True)
        n = len(manifests)
        fail(f"nothing applied: {len(refused)} of {n} CronWorkflow(s) would not be valid")
    for c in calendars:
        version, what = ops.apply_calendar(c)
        if calendar_applied is not None:
            calendar_applied(c, version, what)
    for m in manifests:
        try:
            result = ops.apply(m, three_way=True, force=force)
        except ManifestError as e:  # another writer changed it since the check just above
            fail(str(e))
        for note in result.notes:
            click.echo(f"warning: {note}", err=True)
        applied(m, result)
