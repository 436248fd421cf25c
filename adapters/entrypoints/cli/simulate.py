"""`simulate`: a scenario file, or plain manifests (`-f FILE|DIR|-` with `--start`/`--end`),
run on a virtual clock in a scratch store (the orchestrator is adapters/entrypoints/simulate/),
printed as tables: the decisions per CronWorkflow or in time order (`-o timeline`), repeated
skips folded, then the counts per CronWorkflow. What is folded and filtered is presentation
(adapters/entrypoints/simulate/report.py); `-o json` keeps every decision.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import click

from cronsource.adapters.entrypoints.cli.context import _obj, fail, global_options, read_input
from cronsource.adapters.entrypoints.cli.output import (
    View,
    calendar_cell,
    dst_cell,
    emit,
    print_plain,
    print_table,
    values_cell,
)
from cronsource.adapters.entrypoints.cli.registry import cli
from cronsource.adapters.entrypoints.simulate.report import (
    Row,
    Selection,
    decision_cell,
    fold,
    keep,
    parse_only,
    select,
    summary,
    summary_table,
    timeline,
)
from cronsource.adapters.infrastructure.store.check import StoreUnavailable, check_store
from cronsource.adapters.infrastructure.store.config import StoreURLError
from cronsource.domain.schedule import local_zone
from cronsource.domain.timestamps import TIME_RULE, parse_timestamp

#: Above this many CronWorkflows the table output is the summary alone (one row each), with
#: a line on stderr saying how to see every decision: a fleet reads at a glance.
FLEET = 20

#: From this many ticks on, `simulate` says before it starts how much work is ahead (a fleet
#: of 10,000 hourly CronWorkflows over a day runs for minutes) and the bound it stays within.
SAY_WORK = 50_000

SIM_OUTPUTS = ("table", "wide", "timeline", "summary", "json", "yaml", "name")


def _zones(sc: Any) -> dict[str, str]:
    """Each simulated CronWorkflow's time zone (the last applied spec wins)."""
    out: dict[str, str] = {}
    docs = list(sc.cron_workflows) + [a.apply for a in sc.actions if a.apply is not None]
    for d in docs:
        try:
            meta, spec = d.get("metadata") or {}, d.get("spec") or {}
            key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
            out[key] = local_zone(spec)
        except (AttributeError, KeyError, TypeError):
            continue
    return out


def _local(t: str | None, zone: str) -> str:
    if not t:
        return "-"
    try:
        dt = parse_timestamp(t, "time", bounded=False).astimezone(ZoneInfo(zone))
    except (ValueError, KeyError):
        return "-"
    return dt.strftime("%Y-%m-%d %H:%M:%S %Z")


def _cells(r: Row, by_name: dict[str, Any]) -> tuple[str, str, str]:
    """(decision, workflow, phase) of a row: a single skip keeps the expression and values
    it read; a folded run keeps the expression only (the values differ from tick to tick)."""
    e = r.event
    if r.fired:
        w = by_name.get(e["workflow"] or "", {})
        return decision_cell(r) + dst_cell(e), e["workflow"] or "-", w.get("phase", "-")
    extra = values_cell(e) if r.folded == 1 else values_cell({"expression": e.get("expression")})
    extra = (calendar_cell(e) if r.folded == 1 else "") + extra
    return decision_cell(r) + extra + (dst_cell(e) if r.count == 1 else ""), "-", "-"


def decisions_table(
    result: dict[str, Any], zones: dict[str, str], sel: Selection, *, in_time: bool
) -> None:
    """The decisions, repeated skips folded: per CronWorkflow (a table), or in time order
    across them (`in_time`, `-o timeline`: one plain line each, whatever the terminal)."""
    by_name: dict[str, Any] = {w["name"]: w for w in result["workflows"]}
    # A fire whose Workflow does not exist: why, by its last word, in its PHASE cell (the
    # target refused it, or still refuses it at the end; or it was not started in time).
    unmade: dict[str, Any] = {}
    for e in result["events"]:
        if e["type"] in ("SubmissionFailed", "RunNotStarted") and e["workflow"] not in by_name:
            why = "RunNotStarted" if e["type"] == "RunNotStarted" else e.get("reason")
            state = "retrying" if why == "TransientSubmissionError" else "not created"
            unmade[e["workflow"]] = {"phase": f"{state} ({why})"}
    by_name.update(unmade)
    rows = keep(fold(result["events"]), sel)
    if in_time:
        rows = timeline(rows)
    else:
        rows.sort(key=lambda r: (r.cron, r.order))
    lines = []
    for r in rows:
        decision, workflow, phase = _cells(r, by_name)
        local = _local(r.first, zones.get(r.cron, "UTC"))
        at = r.event["at"]
        if in_time:
            lines.append([r.first, local, r.cron, decision, workflow, phase, at])
        else:
            lines.append([r.cron, local, r.first, decision, str(r.count), workflow, phase, at])
    if in_time:
        headers = ["SCHEDULED (UTC)", "SCHEDULED (LOCAL)", "CRONWORKFLOW", "DECISION"]
        print_plain([*headers, "WORKFLOW", "PHASE", "DECIDED AT"], lines)
        return
    headers = ["CRONWORKFLOW", "SCHEDULED (LOCAL)", "SCHEDULED (UTC)", "DECISION", "TICKS"]
    print_table([*headers, "WORKFLOW", "PHASE", "DECIDED AT"], lines, "Decisions")


def kube_events_table(result: dict[str, Any], *, plain: bool) -> None:
    """The Kubernetes Events (`--kube-events`), one row per Event object as `kubectl get
    events` lists them, aggregated and counted; nothing when they were not asked for."""
    if "kubeEvents" not in result:
        return
    headers = ["FIRST SEEN", "LAST SEEN", "TYPE", "REASON", "CRONWORKFLOW", "COUNT", "MESSAGE"]
    rows = [
        [
            e["firstTimestamp"],
            e["lastTimestamp"],
            e["type"],
            e["reason"],
            e["cronWorkflow"],
            str(e["count"]),
            e["message"],
        ]
        for e in result["kubeEvents"]
    ]
    click.echo()
    if plain:
        click.echo("Kubernetes Events")
        print_plain(headers, rows)
    else:
        print_table(headers, rows, "Kubernetes Events")


def summary_tables(entries: list[dict[str, Any]]) -> None:
    headers, rows = summary_table(entries)
    print_table(headers, rows, "Summary")


def _time(value: str, flag: str) -> datetime:
    """A time flag by the one rule of the CLI (adapters/application/inputs.py)."""
    from cronsource.adapters.application.inputs import FieldError, parse_time

    try:
        return parse_time(value, flag)
    except FieldError as e:
        fail(str(e), 2)


def _outage(
    value: str, start: datetime, end: datetime, flag: str = "--outage", shown: str | None = None
) -> tuple[datetime, datetime]:
    """`--outage A..B`: both times by the one rule, A before B, within --start..--end.
    (`flag` names another flag of that form; `shown`, the value as given, when `value` is
    the window alone of it.)"""
    shown = value if shown is None else shown
    a, sep, b = value.partition("..")
    if not sep or not a.strip() or not b.strip():
        fail(f"{flag}: {shown!r} is not FROM..TO (2026-03-07T10:00:00Z..2026-03-07T12:00Z)", 2)
    first, last = _time(a.strip(), flag), _time(b.strip(), flag)
    if last <= first:
        fail(f"{flag}: {shown!r} ends before it starts", 2)
    if first < start or first > end:
        fail(f"{flag}: {shown!r} starts outside --start..--end", 2)
    return first, last


def _target_fails(value: str, start: datetime, end: datetime) -> tuple[datetime, datetime, str]:
    """`--target-fails A..B[:ERROR]`: the window as `--outage`'s, and the error the target
    answers every create in it (default 503; a scenario's `targetFails.error`). A time has
    colons of its own: the part after the last one is the error only when the end does not
    read as a time with it (`...T12:00:00+01:00` is a time; `...T12:00:00Z:429` is not)."""
    from cronsource.adapters.application.inputs import FieldError, parse_time
    from cronsource.adapters.entrypoints.simulate.target import target_error

    window, error = value, "503"
    head, colon, tail = value.rpartition(":")
    if colon and ".." in head:
        try:
            parse_time(value.partition("..")[2].strip(), "--target-fails")
        except FieldError:
            window, error = head, tail.strip()
    first, last = _outage(window, start, end, "--target-fails", value)
    try:
        target_error(error)
    except ValueError as e:
        fail(f"--target-fails: {e}", 2)
    return first, last, error


def _plain_scenario(
    files: tuple[str, ...],
    start: str | None,
    end: str | None,
    outages: tuple[str, ...],
    run_duration: str | None,
    run_phase: str | None,
    namespace: str | None,
    target_fails: tuple[str, ...] = (),
) -> Any:
    """The scenario of `-f`: the flags checked (one line naming the flag), the manifests
    admitted as `apply -f` admits them (adapters/application/manifestfiles.py)."""
    from cronsource.adapters.entrypoints.cli.admission import read_files
    from cronsource.adapters.entrypoints.simulate import ScenarioError, from_manifests
    from cronsource.domain.durations import parse_duration

    if start is None or end is None:
        fail(f"{'--start' if start is None else '--end'}: needed with -f", 2)
    t0, t1 = _time(start, "--start"), _time(end, "--end")
    if t1 < t0:
        fail(f"--end: {end!r} is before --start {start!r}", 2)
    windows = [_outage(o, t0, t1) for o in outages]
    faults = [_target_fails(f, t0, t1) for f in target_fails]
    if run_duration is not None:
        try:
            parse_duration(run_duration)
        except ValueError as e:
            fail(f"--run-duration: {e}", 2)
    got = read_files(files, namespace)
    if got.problems:
        raise SystemExit(2)  # each problem was named on its own line
    if not got.manifests:
        what = f"{got.skipped[0][0]}: {got.skipped[0][1]}" if got.skipped else "no document"
        fail(f"{what} is not a CronWorkflow; found no CronWorkflow to simulate", 2)
    if got.skipped:
        n = len(got.skipped)
        click.echo(
            f"{n} other document{'s' if n != 1 else ''} skipped (not CronWorkflows)", err=True
        )
    try:
        return from_manifests(
            got.calendar_documents + got.documents,
            start=t0,
            end=t1,
            outages=windows,
            run_duration=run_duration or "30s",
            run_phase=run_phase or "Succeeded",
            target_faults=faults,
        )
    except ScenarioError as e:
        fail(str(e), 2)


def _scenario_file(scenario: str) -> Any:
    from cronsource.adapters.application.documents import DocumentError, load_yaml
    from cronsource.adapters.entrypoints.simulate import ScenarioError, load_scenario

    try:
        docs = load_yaml(read_input(scenario, 2), scenario, file=True)
    except DocumentError as e:
        fail(str(e), 2)
    if len(docs) > 1:
        fail(
            f"{scenario}: {len(docs)} YAML documents; a scenario is one (plain manifests:"
            " simulate -f FILE --start T --end T)",
            2,
        )
    try:
        return load_scenario(docs[0] if docs else None)
    except ScenarioError as e:
        fail(f"{scenario}: {e}", 2)


@cli.command()
@click.argument("scenario", required=False, type=click.Path(allow_dash=True))
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    help="plain manifests instead of a scenario: a file of one or more documents, a directory"
    " (as `apply -f`) or -; needs --start and --end",
)
@click.option("--start", help=f"with -f: when the manifests are applied; {TIME_RULE} UTC")
@click.option("--end", help="with -f: when the simulation ends; the same rule")
@click.option(
    "--outage",
    "outages",
    multiple=True,
    metavar="FROM..TO",
    help="with -f: no scheduler runs from FROM to TO (repeatable)",
)
@click.option(
    "--target-fails",
    "target_fails",
    multiple=True,
    metavar="FROM..TO[:ERROR]",
    help="with -f: the cluster refuses every create from FROM to TO with ERROR: an HTTP"
    " status (default 503; 429, 5xx retried, 400, 403, 404, 422 not), timeout or reset"
    " (repeatable)",
)
@click.option("--run-duration", help="with -f: how long each run takes (default 30s)")
@click.option(
    "--run-phase",
    type=click.Choice(["Succeeded", "Failed", "Error"]),
    help="with -f: how each run ends (default Succeeded)",
)
@click.option(
    "--kube-events",
    is_flag=True,
    help="also the Kubernetes Events `run --kube` would send: a table, or `kubeEvents` in"
    " json|yaml (a scenario may ask with `kubeEvents: true`)",
)
@click.option(
    "--name",
    "names",
    multiple=True,
    help="show only CronWorkflows of this name (a shell pattern: 'etl-*'; repeatable)",
)
@click.option(
    "--only",
    help="show only these decisions: fired, skipped, or a skip reason (WhenFalse, Suspended, ...)",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(SIM_OUTPUTS),
    help="table: decisions per CronWorkflow, then the summary (the summary alone above"
    f" {FLEET} CronWorkflows); timeline: one line per decision, in time order across"
    " CronWorkflows; summary: one row per CronWorkflow; json|yaml: everything, every decision"
    " unfolded (tables fold repeated skips into one row with their count); name: the Workflows",
)
@global_options(
    output=False,
    all_namespaces=False,
    selector=False,
    namespace_help="show only this namespace; with -f also the namespace of manifests that"
    " name none (as `apply -n`)",
)
def simulate(
    scenario: str | None,
    files: tuple[str, ...],
    start: str | None,
    end: str | None,
    outages: tuple[str, ...],
    target_fails: tuple[str, ...],
    run_duration: str | None,
    run_phase: str | None,
    kube_events: bool,
    names: tuple[str, ...],
    only: str | None,
    output: str | None,
) -> None:
    """Run the real engine on a virtual clock (docs/simulate.md): a SCENARIO file, or plain
    manifests with -f FILE|DIR|- --start T --end T."""
    from cronsource.adapters.application.inputs import FieldError
    from cronsource.adapters.entrypoints.simulate import ScenarioError
    from cronsource.adapters.entrypoints.simulate import simulate as run_simulation

    obj = _obj()
    source = scenario or ", ".join(files)
    try:
        sel = Selection(tuple(names), obj.namespace, parse_only(only))
    except FieldError as e:
        fail(str(e), 2)
    if scenario is not None and files:
        fail(f"{scenario}: a scenario file or -f manifests, not both", 2)
    if files:
        sc = _plain_scenario(
            files, start, end, outages, run_duration, run_phase, obj.namespace, target_fails
        )
    elif scenario is not None:
        for flag, value in (
            ("--start", start),
            ("--end", end),
            ("--outage", outages),
            ("--target-fails", target_fails),
            ("--run-duration", run_duration),
            ("--run-phase", run_phase),
        ):
            if value:
                fail(f"{flag}: only with -f (a scenario file says its own)", 2)
        sc = _scenario_file(scenario)
    else:
        fail("give a SCENARIO file, or manifests with -f FILE|DIR|- --start T --end T", 2)
    if obj.store:
        config = obj.store_config()
        try:
            check_store(config, need_tables=False)
        except StoreUnavailable as e:
            fail(str(e), 2)
    if sc.ticks >= SAY_WORK:
        from cronsource.adapters.entrypoints.simulate.scenario import MAX_TICKS

        click.echo(
            f"simulating about {sc.ticks:,} ticks of {sc.cron_workflow_count:,}"
            f" CronWorkflow(s) (simulate's bound: {MAX_TICKS:,} ticks); Ctrl-C stops it",
            err=True,
        )
    result = _run(sc, obj.store, source, run_simulation, ScenarioError, kube_events)
    _show(result, _zones(sc), sel, output or obj.output, auto=output is None)


def _run(
    sc: Any, store: str | None, source: str, run: Any, scenario_error: Any, kube_events: bool
) -> Any:
    """The simulation, ended promptly by SIGINT/SIGTERM, its errors one line each."""
    import signal

    from cronsource.adapters.entrypoints.simulate import SimulationInterrupted

    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    # Installed explicitly: a shell starts background jobs with SIGINT ignored, and Python
    # then installs no handler of its own, so Ctrl-C / kill -INT did nothing.
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run(sc, store, stop=lambda: bool(stopping), kube_events=kube_events)
    except StoreURLError as e:
        fail(str(e), 2)
    except scenario_error as e:
        fail(f"{source}: {e}", 2)
    except SimulationInterrupted as e:
        fail(f"{source}: {e}", 130)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _show(
    result: dict[str, Any], zones: dict[str, str], sel: Selection, output: str, *, auto: bool
) -> None:
    """The result in the chosen output; `auto` (no -o on the command): the table, or the
    summary alone for a fleet, saying so on stderr. The summary counts every decision of
    the CronWorkflows shown: `--only` picks the rows (and which CronWorkflows), not what
    their counts add up."""
    counted = summary(select(result, Selection(sel.names, sel.namespace)), zones)
    result = select(result, sel)
    shown = {f"{c['namespace']}/{c['name']}" for c in result["cronWorkflows"]}
    entries = [e for e in counted if e["cronWorkflow"] in shown]
    if output in ("json", "yaml"):
        emit(View({**result, "summary": entries}, [], []), output)
    elif output == "name":
        for w in result["workflows"]:
            click.echo(w["name"])
    elif output == "timeline":
        decisions_table(result, zones, sel, in_time=True)
        kube_events_table(result, plain=True)
    elif output == "summary" or (auto and output == "table" and len(entries) > FLEET):
        if output != "summary":
            click.echo(
                f"{len(entries)} CronWorkflows: one row each; every decision with -o table,"
                " in time order with -o timeline",
                err=True,
            )
        summary_tables(entries)
        kube_events_table(result, plain=False)
    else:
        decisions_table(result, zones, sel, in_time=False)
        click.echo()
        summary_tables(entries)
        kube_events_table(result, plain=False)
