"""The read commands: `list`, `get`, `history`, `why` and `next`. An unknown name, namespace or
event type is an error, never an empty table.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

import click

from cronsource.adapters.application.explain import removed_before
from cronsource.adapters.application.inputs import (
    EVENT_TYPES,
    SKIP_REASONS,
    FieldError,
    through_second,
    written_wall,
)
from cronsource.adapters.application.operations import Operations
from cronsource.adapters.entrypoints.cli.context import (
    KIND,
    Ctx,
    _obj,
    fail,
    global_options,
    now,
    parse_time,
    time_help,
)
from cronsource.adapters.entrypoints.cli.output import (
    View,
    age,
    ago,
    detail_cell,
    emit,
    no_resources,
    print_table,
    ticks_cell,
)
from cronsource.adapters.entrypoints.cli.registry import (
    _complete_names,
    cli,
    name_argument,
    object_names,
)
from cronsource.domain.schedule import spec_zones
from cronsource.domain.service import NotFound
from cronsource.domain.timestamps import parse_timestamp
from cronsource.projections.readmodel import StatusRow, paused_runs, rfc3339


def check_namespace(ops: Operations, obj: Ctx) -> None:
    """An explicit `-n` that never held a CronWorkflow is a typo until shown otherwise."""
    if obj.namespace is None or obj.all_namespaces:
        return
    # The common case (it exists) is an index search; listing every namespace scans the whole
    # audit (44 ms at a million events, bench/history.py), so only the error message does.
    if not ops.has_namespace(obj.namespace):
        known = ops.namespaces()
        fail(
            f"namespace {obj.namespace!r} has no CronWorkflows"
            f" (namespaces in this store: {', '.join(known) or 'none'})"
        )


def selected(
    ops: Operations, obj: Ctx, namespace: str | None, *, include_deleted: bool = False
) -> list[StatusRow]:
    """The CronWorkflows of `namespace` (None: every one) that `-l` selects."""
    try:
        return ops.statuses(namespace, selector=obj.selector, include_deleted=include_deleted)
    except FieldError as e:
        fail(f"-l {obj.selector!r}: {e.message}")


def _schedules(spec: dict[str, Any]) -> str:
    return ", ".join(spec.get("schedules") or [spec.get("schedule", "")])


def _suspended_cell(spec: dict[str, Any], status: dict[str, Any]) -> str:
    """`true`/`false` as `argo cron list` shows them, and a pause after failures beside
    them (`cronsource.io/pause-after-failures`: not a suspension, but nothing runs either)."""
    cell = str(spec.get("suspend", False)).lower()
    runs = paused_runs(status)
    if runs is None:
        return cell
    paused = f"paused after {len(runs)} failures"
    return paused if cell == "false" else f"{cell}, {paused}"


def _list_view(rows: list[StatusRow], obj: Ctx) -> View:
    t0 = now()
    show_ns = obj.all_namespaces
    table, wide = [], []
    for c in rows:
        spec, st = c.spec, c.status
        nxt = c.next_tick
        last = st.get("lastScheduledTime")
        last_t = parse_timestamp(last, "lastScheduledTime", bounded=False) if last else None
        table.append(
            ([c.namespace] if show_ns else [])
            + [
                c.name,
                age(_created(c), t0),
                _schedules(spec),
                ",".join(spec_zones(spec)),
                _suspended_cell(spec, st),
                str(len(st.get("active") or [])),
                f"{last} ({ago(last_t, t0)})" if last else "-",
                f"{rfc3339(nxt)} ({ago(nxt, t0)})" if nxt else "-",
                _conditions_cell(st),
            ]
        )
        wide.append(
            [
                spec.get("concurrencyPolicy", "Allow"),
                str(st.get("succeeded", 0)),
                str(st.get("failed", 0)),
                ",".join(f"{k}={v}" for k, v in (c.metadata.get("labels") or {}).items()) or "-",
            ]
        )
    headers = (["NAMESPACE"] if show_ns else []) + [
        "NAME",
        "AGE",
        "SCHEDULES",
        "TIMEZONE",
        "SUSPENDED",
        "ACTIVE",
        "LAST RUN",
        "NEXT RUN",
        "CONDITIONS",
    ]
    return View(
        data={
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflowList",
            "metadata": {},
            "items": [c.as_object() for c in rows],
        },
        headers=headers,
        rows=table,
        wide_headers=["CONCURRENCY", "SUCCEEDED", "FAILED", "LABELS"],
        wide_rows=wide,
        names=[f"{KIND}/{c.name}" for c in rows],
        empty=no_resources(None if show_ns else obj.ns),
    )


def _created(c: StatusRow) -> datetime | None:
    """When it was created (None in a status row projected before the field was kept)."""
    created = c.metadata.get("creationTimestamp")
    return parse_timestamp(created, "creationTimestamp", bounded=False) if created else None


def _conditions_cell(status: dict[str, Any]) -> str:
    """The conditions that hold (SpecError, SubmissionError, ...), so a CronWorkflow that
    cannot run shows in `list`, not only in `get`: the types, `-` when none."""
    held = [c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"]
    return ",".join(held) or "-"


def _list(obj: Ctx) -> None:
    with obj.operations(notice=True, must_exist=True) as ops:
        check_namespace(ops, obj)
        rows = selected(ops, obj, None if obj.all_namespaces else obj.ns)
    emit(_list_view(rows, obj), obj.output)


@cli.command(name="list")
@global_options()
def list_cmd() -> None:
    """CronWorkflows with schedules, time zone, suspended, last and next run (alias ls)."""
    _list(_obj())


def _resolved_row(spec: dict[str, Any], st: dict[str, Any]) -> list[list[str]]:
    """`argo cron get`'s ResolvedSchedules line (Argo PR #16604): every schedule with its `H`
    items resolved, shown only when one has any."""
    resolved = st.get("resolvedSchedules") or {}
    if not resolved:
        return []
    listed = spec.get("schedules") or [spec.get("schedule", "")]
    return [["ResolvedSchedules", ", ".join(resolved.get(s, s) for s in listed)]]


def _get_view(c: StatusRow) -> View:
    spec, st = c.spec, c.status
    t0 = now()
    nxt, due, created = c.next_tick, c.next_due, _created(c)
    rows = [
        ["Name", c.name],
        ["Namespace", c.namespace],
        ["Created", f"{rfc3339(created)} ({ago(created, t0)})" if created else "-"],
        ["Schedules", _schedules(spec)],
        *_resolved_row(spec, st),
        ["Timezone", ", ".join(spec_zones(spec))],
        ["Concurrency", spec.get("concurrencyPolicy", "Allow")],
        ["StartingDeadlineSeconds", str(spec.get("startingDeadlineSeconds") or "-")],
        ["Suspended", _suspended_cell(spec, st)],
        ["Phase", st.get("phase", "")],
        ["LastScheduledTime", st.get("lastScheduledTime") or "-"],
        ["NextScheduledTime", f"{rfc3339(nxt)} ({ago(nxt, t0)})" if nxt else "-"],
        # When it will be decided: later than the tick only for Forbid with a deadline behind
        # an active run, which waits for the run up to the deadline.
        ["NextDecisionTime", f"{rfc3339(due)} ({ago(due, t0)})" if due else "-"],
        ["Active", ", ".join(a["name"] for a in st.get("active") or []) or "-"],
        ["Succeeded/Failed", f"{st.get('succeeded', 0)}/{st.get('failed', 0)}"],
    ]
    for cond in st.get("conditions") or []:
        rows.append([f"Condition {cond['type']}", cond.get("message", "")])
    return View(c.as_object(), ["FIELD", "VALUE"], rows, names=[f"{KIND}/{c.name}"])


@cli.command()
@click.argument("names", nargs=-1, shell_complete=_complete_names)
@global_options()
def get(names: tuple[str, ...]) -> None:
    """One CronWorkflow as `argo cron get`; several, or none (all), as a list."""
    obj = _obj()
    names = object_names(names, words=True)
    obj.by_name(names)
    if not names:
        _list(obj)
        return
    rows, missing = [], []
    with obj.operations(notice=True, must_exist=True) as ops:
        for n in names:
            try:
                rows.append(ops.status(obj.ns, n))
            except NotFound as e:
                missing.append(f"error: {e}")
        if not rows:  # only errors: those lines alone (no notice about the store)
            click.echo("\n".join(missing), err=True)
            sys.exit(1)
    # As kubectl: what was found is shown, then an error line for each name that was not,
    # and the exit is 1.
    _show_found(rows, obj, many=len(names) > 1)
    for message in missing:
        click.echo(message, err=True)
    if missing:
        sys.exit(1)


def _show_found(rows: list[StatusRow], obj: Ctx, *, many: bool) -> None:
    """One name asked: `argo cron get`'s view; several: a list (kubectl's `List`)."""
    if not many and obj.output in ("table", "json", "yaml"):
        view = _get_view(rows[0])
        if obj.output == "table":  # `argo cron get`: one field a line
            width = max(len(r[0]) for r in view.rows) + 2
            for k, v in view.rows:
                click.echo(f"{k + ':':<{width}}{v}")
            return
        emit(view, obj.output)
        return
    emit(_list_view(rows, obj), obj.output)


def _event_type(value: str) -> str:
    for t in EVENT_TYPES:
        if t.lower() == value.lower():
            return t
    fail(f"--type: unknown event type {value!r} (one of: {', '.join(EVENT_TYPES)})")


def _reason(value: str) -> str:
    for r in SKIP_REASONS:
        if r.lower() == value.lower():
            return r
    fail(f"--reason: unknown skip reason {value!r} (one of: {', '.join(SKIP_REASONS)})")


def _events_view(events: list[dict[str, Any]], with_cron: bool, empty: str) -> View:
    headers = (["CRONWORKFLOW"] if with_cron else []) + [
        "VERSION",
        "TYPE",
        "AT",
        "SCHEDULED",
        "TICKS",
        "WORKFLOW",
        "DETAIL",
    ]
    rows = [
        ([e["cronWorkflow"]] if with_cron else [])
        + [
            str(e["version"]),
            e["type"],
            e["at"],
            e["scheduledTime"] or "-",
            ticks_cell(e),
            e["workflow"] or "-",
            detail_cell(e),
        ]
        for e in events
    ]
    return View(
        events,
        headers,
        rows,
        names=[f"{e['cronWorkflow']}@{e['version']}" for e in events],
        empty=empty,
    )


@cli.command()
@name_argument(required=False)
@click.option(
    "--since",
    default=None,
    help=time_help("events at or after it") + " (UTC without NAME)",
)
@click.option(
    "--until",
    default=None,
    help=time_help("events at or before it") + " (UTC without NAME)",
)
@click.option("--type", "types", multiple=True, help="event type, e.g. ScheduleFired (repeatable)")
@click.option("--reason", "reasons", multiple=True, help="skip reason, e.g. Suspended (repeatable)")
@global_options()
def history(
    name: str | None,
    since: str | None,
    until: str | None,
    types: tuple[str, ...],
    reasons: tuple[str, ...],
) -> None:
    """The audit log of one CronWorkflow (or, without NAME, of the namespace): every fire
    and skip, and why."""
    obj = _obj()
    obj.by_name([name] if name else [])
    for value, flag in ((since, "--since"), (until, "--until")):
        if value:
            parse_time(value, flag)  # bad text: refused before the store is opened
    want_types = tuple(_event_type(t) for t in types)
    want_reasons = {_reason(r) for r in reasons}
    with obj.operations(must_exist=True) as ops:
        check_namespace(ops, obj)
        ns = None if obj.all_namespaces and not name else obj.ns
        if name and not ops.ever_existed(obj.ns, name):
            fail(f"cronworkflow {obj.ns}/{name} not found (never applied in namespace {obj.ns})")
        zone = ops.time_zone(obj.ns, name) if name else None
        s = parse_time(since, "--since", zone) if since else None
        u = parse_time(until, "--until", zone) if until else None
        if s and u and u < s:
            fail(f"--until {until} is before --since {since}")
        rows = ops.history(ns, name, since=s, until=through_second(u), types=want_types)
        kept_from = ops.kept_from()
        if kept_from is not None and (s is None or s < kept_from):
            click.echo(f"note: {removed_before(kept_from)}", err=True)
        if obj.selector:
            keep = {(c.namespace, c.name) for c in selected(ops, obj, ns, include_deleted=True)}
            rows = [r for r in rows if (r.namespace, r.name) in keep]
    if want_reasons:
        rows = [r for r in rows if r.reason in want_reasons]
    events = [r.as_event() for r in rows]
    emit(_events_view(events, not name, "No events match."), obj.output)


@cli.command()
@name_argument()
@click.option("--at", "at_", required=True, help=time_help("the tick in question"))
@global_options(all_namespaces=False, selector=False)
def why(name: str, at_: str) -> None:
    """Why did (or didn't) it run at T: the decision covering T (fired, skipped and why,
    pending, not a tick) and the event behind it (the query of GET .../decision)."""
    obj = _obj()
    parse_time(at_, "--at")  # bad text: refused before the store is opened
    with obj.operations(must_exist=True) as ops:
        t = parse_time(at_, "--at", ops.time_zone(obj.ns, name))
        try:
            d = ops.why(obj.ns, name, t, wall=written_wall(at_))
        except NotFound:
            fail(f"cronworkflow {obj.ns}/{name} not found")
    if obj.output in ("json", "yaml"):
        emit(View(d, [], []), obj.output)
        return
    if obj.output == "name":
        click.echo(d["outcome"])
        return
    reason = f" ({d['reason']})" if d.get("reason") else ""
    click.echo(f"{obj.ns}/{name} at {d['at']}: {d['outcome']}{reason}")
    click.echo(d["explanation"])
    if d["decisions"]:
        v = _events_view(d["decisions"], False, "")
        print_table(v.headers, v.rows)


@cli.command(name="next")
@name_argument()
@click.option("-c", "--count", default=5, show_default=True, type=click.IntRange(1, 1000))
@global_options(all_namespaces=False, selector=False)
def next_cmd(name: str, count: int) -> None:
    """The next N fire times, in the CronWorkflow's zone and in UTC."""
    obj = _obj()
    t0 = now()
    with obj.operations(must_exist=True) as ops:
        try:
            tz, data, held = ops.next_times(obj.ns, name, count, t0)
        except NotFound as e:
            fail(str(e))
    if held is not None:
        # As `list` shows no next run for it: these are its schedule's times, not runs.
        click.echo(
            f"note: {obj.ns}/{name} is held ({held}): none of these runs until it is resumed",
            err=True,
        )
    rows = [
        [
            d["local"] + (f" ({d['dst']['note']})" if d.get("dst") else ""),
            d["utc"] or "",
            ago(parse_timestamp(d["utc"] or "", "utc", bounded=False), t0),
            _excluded_words(d.get("excluded")),
        ]
        for d in data
    ]
    headers = [f"LOCAL ({tz})", "UTC", "WHEN"]
    if not any(d.get("excluded") for d in data):
        rows = [r[:3] for r in rows]
    else:
        headers.append("EXCLUDED")
    emit(View(data, headers, rows, names=[d["utc"] or "" for d in data]), obj.output)


def _excluded_words(x: dict[str, Any] | None) -> str:
    """`calendar holidays-us v3` or `cronsource.io/exclude-dates v2`: why `next` lists a
    tick that will not run; a missing calendar says so."""
    if not x:
        return ""
    if x.get("reason") != "Excluded":
        return f"skipped: {x.get('message', '')}"
    source = x.get("calendar", "")
    kind = "" if source.startswith("cronsource.io/") else "calendar "
    return f"{kind}{source} v{x.get('version')}"


@cli.command()
@click.argument("names", nargs=-1)
@global_options(selector=False)
def calendars(names: tuple[str, ...]) -> None:
    """Calendars (ConfigMaps labelled cronsource.io/calendar) and their versions: what an
    Excluded skip names. Deleted ones are listed as such (their streams stay)."""
    obj = _obj()
    with obj.operations(must_exist=True) as ops:
        namespace = None if obj.all_namespaces else obj.ns
        found = ops.calendars(namespace, list(names) if names else None)
    if names and not [c for c in found if not c["deleted"]]:
        fail(f"calendar {obj.ns}/{names[0]} not found")
    rows = [
        [
            c["namespace"],
            c["name"],
            str(c["version"]),
            "deleted" if c["deleted"] else "",
            _entries(c["dates"]),
            c["rrule"].replace("\n", " "),
        ]
        for c in found
    ]
    emit(
        View(
            found,
            ["NAMESPACE", "NAME", "VERSION", "DELETED", "DATES", "RRULE"],
            rows,
            # A calendar is a ConfigMap: `-o name` as kubectl names it (it printed nothing).
            names=[f"configmap/{c['name']}" for c in found],
            empty=no_resources(namespace),
        ),
        obj.output,
    )


def _entries(dates: str) -> str:
    """`2026-12-25, 2027-01-01 (+3 more)`: the first entries of a calendar's dates."""
    entries = [e for e in dates.replace(",", " ").split() if e]
    shown = ", ".join(entries[:3])
    return shown + (f" (+{len(entries) - 3} more)" if len(entries) > 3 else "")


@cli.command()
@global_options(all_namespaces=False, selector=False, namespace=False)
def replicas() -> None:
    """The `cronsource run` replicas on this store: identity (pod name), shards owned, the
    projector, and when each last finished a turn and renewed its lease (PostgreSQL: from the
    leases and the advisory locks; SQLite: the one `run` on the file, if any)."""
    obj = _obj()
    t0 = now()
    with obj.operations(must_exist=True) as ops:
        found = ops.replicas()
    data = [
        dict(
            r,
            lastRenewal=rfc3339(r["lastRenewal"]) if r["lastRenewal"] else None,
            lastTurn=rfc3339(r["lastTurn"]) if r["lastTurn"] else None,
        )
        for r in found
    ]
    rows = [
        [
            r["replica"],
            str(r["shards"]),
            "yes" if r["projector"] else "no",
            "live" if r["live"] else "lapsed",
            ago(r["lastTurn"], t0) if r["lastTurn"] else "-",
            ago(r["lastRenewal"], t0) if r["lastRenewal"] else "-",
        ]
        for r in found
    ]
    emit(
        View(
            data,
            ["REPLICA", "SHARDS", "PROJECTOR", "LEASE", "LAST TURN", "LAST RENEWAL"],
            rows,
            names=[r["replica"] for r in found],
            empty="no replica running",
        ),
        obj.output,
    )
