"""`simulate`: a scenario run on a virtual clock in a scratch store, printed as tables (the
orchestrator is adapters/entrypoints/simulate/).
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from zoneinfo import ZoneInfo

import click

from cronsource.adapters.entrypoints.cli.context import _obj, fail, global_options, read_input
from cronsource.adapters.entrypoints.cli.output import (
    View,
    calendar_cell,
    dst_cell,
    emit,
    print_table,
    ticks_cell,
    values_cell,
)
from cronsource.adapters.entrypoints.cli.registry import cli
from cronsource.adapters.infrastructure.store.check import StoreUnavailable, check_store
from cronsource.adapters.infrastructure.store.config import StoreURLError
from cronsource.domain.timestamps import parse_timestamp


def _zones(sc: Any) -> dict[str, str]:
    """Each simulated CronWorkflow's time zone (the last applied spec wins)."""
    out: dict[str, str] = {}
    docs = list(sc.cron_workflows) + [a.apply for a in sc.actions if a.apply is not None]
    for d in docs:
        try:
            meta, spec = d.get("metadata") or {}, d.get("spec") or {}
            key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
            out[key] = spec.get("timezone") or "UTC"
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


def simulate_tables(result: dict[str, Any], zones: dict[str, str]) -> None:
    """Every decision (fires and skips, with reasons), then one summary line per
    CronWorkflow: what a user wants to know before applying a schedule."""
    by_name = {w["name"]: w for w in result["workflows"]}
    rows = []
    fired: dict[str, Counter[str]] = {}
    skipped: dict[str, Counter[str]] = {}
    for e in result["events"]:
        cw = e["cronWorkflow"]
        fired.setdefault(cw, Counter())
        skipped.setdefault(cw, Counter())
        if e["type"] not in ("ScheduleFired", "ScheduleSkipped"):
            continue
        zone = zones.get(cw, "UTC")
        if e["type"] == "ScheduleFired":
            w = by_name.get(e["workflow"] or "", {})
            decision = f"fired ({e.get('trigger', 'schedule')})" + dst_cell(e)
            fired[cw][e.get("trigger", "schedule")] += 1
            phase = w.get("phase", "-")
        else:
            decision = (
                f"skipped: {e.get('reason')}" + calendar_cell(e) + values_cell(e) + dst_cell(e)
            )
            skipped[cw][e.get("reason") or "?"] += e.get("count", 1)
            phase = "-"
        rows.append(
            [
                cw,
                _local(e["scheduledTime"], zone),
                e["scheduledTime"] or "-",
                decision,
                ticks_cell(e),
                e["workflow"] or "-",
                phase,
                e["at"],
            ]
        )
    print_table(
        [
            "CRONWORKFLOW",
            "SCHEDULED (LOCAL)",
            "SCHEDULED (UTC)",
            "DECISION",
            "TICKS",
            "WORKFLOW",
            "PHASE",
            "DECIDED AT",
        ],
        rows,
        "Decisions",
    )
    click.echo()
    status = {f"{c['namespace']}/{c['name']}": c["status"] for c in result["cronWorkflows"]}
    summary = []
    for cw in sorted(set(fired) | set(status)):
        f, s = fired.get(cw, Counter()), skipped.get(cw, Counter())
        st = status.get(cw, {})
        summary.append(
            [
                cw,
                zones.get(cw, "UTC"),
                str(sum(f.values()) + sum(s.values())),
                str(sum(f.values()))
                + (f" ({', '.join(f'{k} {v}' for k, v in sorted(f.items()))})" if f else ""),
                str(sum(s.values()))
                + (f" ({', '.join(f'{k} {v}' for k, v in sorted(s.items()))})" if s else ""),
                str(st.get("succeeded", 0)),
                str(st.get("failed", 0)),
                str(len(st.get("active") or [])),
            ]
        )
    print_table(
        [
            "CRONWORKFLOW",
            "TIMEZONE",
            "RUNS+SKIPS",
            "FIRED",
            "SKIPPED",
            "SUCCEEDED",
            "FAILED",
            "ACTIVE",
        ],
        summary,
        "Summary",
    )


@cli.command()
@click.argument("scenario", type=click.Path(allow_dash=True))
@global_options(all_namespaces=False, selector=False, namespace=False)
def simulate(scenario: str) -> None:
    """Run the real engine on a virtual clock (docs/simulate.md)."""
    from cronsource.adapters.application.documents import DocumentError, load_yaml
    from cronsource.adapters.entrypoints.simulate import ScenarioError, load_scenario
    from cronsource.adapters.entrypoints.simulate import simulate as run_simulation

    obj = _obj()
    try:
        docs = load_yaml(read_input(scenario, 2), scenario)
    except DocumentError as e:
        fail(str(e), 2)
    if len(docs) > 1:
        fail(f"{scenario}: {len(docs)} YAML documents; a scenario is one", 2)
    data = docs[0] if docs else None
    try:
        sc = load_scenario(data)
    except ScenarioError as e:
        fail(f"{scenario}: {e}", 2)
    if obj.store:
        config = obj.store_config()
        try:
            check_store(config, need_tables=False)
        except StoreUnavailable as e:
            fail(str(e), 2)
    import signal

    from cronsource.adapters.entrypoints.simulate import SimulationInterrupted

    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    # Installed explicitly: a shell starts background jobs with SIGINT ignored, and Python
    # then installs no handler of its own, so Ctrl-C / kill -INT did nothing.
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = run_simulation(sc, obj.store, stop=lambda: bool(stopping))
    except StoreURLError as e:
        fail(str(e), 2)
    except ScenarioError as e:
        fail(f"{scenario}: {e}", 2)
    except SimulationInterrupted as e:
        fail(f"{scenario}: {e}", 130)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)

    if obj.output in ("json", "yaml"):
        emit(View(result, [], []), obj.output)
    elif obj.output == "name":
        for w in result["workflows"]:
            click.echo(w["name"])
    else:
        simulate_tables(result, _zones(sc))
