"""The `cronsource` command line: tables for people, `-o json|yaml` for machines.

Bad input exits non-zero with the field named and stores nothing: manifests are admitted in
full (every document of a file) before the first one is applied.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn
from zoneinfo import ZoneInfo

import click
import yaml
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from adapters.engine import Engine, build_engine, migrate
from adapters.store import StoreConfig, StoreURLError
from domain.manifest import CronWorkflowManifest, ManifestError, is_other_kind, parse_manifest
from domain.service import NotFound
from projections.readmodel import rfc3339

OUTPUT = click.Choice(["table", "json", "yaml"])
err_console = Console(stderr=True)


def now() -> datetime:
    """The real clock, read here at the edge and passed into every domain command."""
    return datetime.now(UTC)


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def console() -> Console:
    """Tables fit the terminal; piped output gets wide lines rather than wrapped cells."""
    return Console() if sys.stdout.isatty() else Console(width=250)


def parse_time(value: str, field: str) -> datetime:
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        fail(f"{field}: {value!r} is not an RFC 3339 time (e.g. 2026-05-04T10:00:00Z)")
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def load_documents(path: str) -> list[tuple[str, object]]:
    """YAML documents of a file ('-' is stdin), each with a source label for messages."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        fail(f"{path}: not valid YAML: {e}")
    if not docs:
        fail(f"{path}: no documents")
    return [(f"{path}#{i}" if len(docs) > 1 else path, d) for i, d in enumerate(docs)]


def admit(paths: list[str], namespace: str | None = None) -> list[CronWorkflowManifest]:
    """Every document of every file, or exit 1 naming each bad field (nothing is applied).
    A manifest without a namespace takes `-n` (as kubectl does)."""
    manifests, problems = [], []
    for path in paths:
        for source, doc in load_documents(path):
            if is_other_kind(doc):
                continue  # as `argo cron lint`: other kinds in the file are not ours
            if namespace and isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
                doc["metadata"].setdefault("namespace", namespace)
            try:
                manifests.append(parse_manifest(doc, source))
            except ManifestError as e:
                problems += [f"{source}: {p}" for p in e.problems]
    if not manifests and not problems:
        fail("found no CronWorkflow in the specified files")  # Argo: "found nothing to lint"
    if problems:
        for p in problems:
            click.echo(f"error: {p}", err=True)
        sys.exit(1)
    return manifests


def emit(data: Any, output: str, table: Callable[[], Table]) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2, default=str))
    elif output == "yaml":
        click.echo(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False))
    else:
        console().print(table())


class Ctx:
    def __init__(self, store: str | None, namespace: str) -> None:
        self.store = store
        self.namespace = namespace

    @contextmanager
    def engine(self) -> Iterator[Engine]:
        try:
            config = StoreConfig.parse(self.store)
        except StoreURLError as e:
            fail(str(e))
        try:
            engine = build_engine(config)
        except Exception as e:  # the store is unreachable or broken: say so, exit non-zero
            fail(f"cannot open store {config.url}: {e}")
        try:
            engine.catch_up()
            yield engine
        finally:
            engine.close()


@click.group()
@click.option(
    "--store",
    envvar="CRONSOURCE_STORE",
    default=None,
    help="sqlite:///PATH (default ./cronsource.db), postgresql://..., memory:",
)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.pass_context
def cli(ctx: click.Context, store: str | None, namespace: str) -> None:
    """cronsource: an event-sourced scheduler for Argo CronWorkflows."""
    ctx.obj = Ctx(store, namespace)


# ---------------------------------------------------------------------- admission


@cli.command()
@click.argument("files", nargs=-1, required=True)
def lint(files: tuple[str, ...]) -> None:
    """Validate manifests; exit 1 with path-qualified messages."""
    ms = admit(list(files))
    click.echo(f"{len(ms)} CronWorkflow(s) valid")


@cli.command()
@click.option("-f", "--filename", "files", multiple=True, required=True)
@click.pass_obj
def apply(obj: Ctx, files: tuple[str, ...]) -> None:
    """Create or update CronWorkflows from YAML (multi-document)."""
    manifests = admit(list(files), obj.namespace)
    with obj.engine() as engine:
        for m in manifests:
            _, what = engine.service.apply(m, now())
            click.echo(f"cronworkflow.argoproj.io/{m.metadata.name} {what}")
        engine.catch_up()


@cli.command(name="migrate")
@click.pass_obj
def migrate_cmd(obj: Ctx) -> None:
    """Create or upgrade the store schema."""
    try:
        config = StoreConfig.parse(obj.store)
        migrate(config)
    except StoreURLError as e:
        fail(str(e))
    except Exception as e:
        fail(f"cannot migrate {obj.store}: {e}")
    click.echo(f"store {config.url} ready")


# ---------------------------------------------------------------------- reading


def _cron_object(c: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": c["metadata"],
        "spec": c["spec"],
        "status": c["status"],
    }


def _next_run(c: dict[str, Any]) -> str:
    return rfc3339(c["nextDue"]) or "-"


@cli.command(name="list")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.option("-A", "--all-namespaces", is_flag=True)
@click.pass_obj
def list_cmd(obj: Ctx, output: str, all_namespaces: bool) -> None:
    """CronWorkflows with schedules, timezone, suspended, last and next run."""
    with obj.engine() as engine:
        rows = engine.view.statuses(None if all_namespaces else obj.namespace)

    def table() -> Table:
        t = Table(
            "NAMESPACE",
            "NAME",
            "SCHEDULES",
            "TIMEZONE",
            "SUSPENDED",
            "LAST RUN",
            "NEXT RUN",
            "ACTIVE",
        )
        for c in rows:
            spec = c["spec"]
            t.add_row(
                c["namespace"],
                c["name"],
                ", ".join(spec.get("schedules") or [spec.get("schedule", "")]),
                spec.get("timezone") or "UTC",
                str(spec.get("suspend", False)).lower(),
                c["status"].get("lastScheduledTime") or "-",
                _next_run(c),
                str(len(c["status"].get("active") or [])),
            )
        return t

    emit([_cron_object(c) for c in rows], output, table)


def _get(engine: Engine, namespace: str, name: str) -> dict[str, Any]:
    for c in engine.view.statuses(namespace):
        if c["name"] == name:
            return c
    fail(f"cronworkflow {namespace}/{name} not found")


@cli.command()
@click.argument("name")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_obj
def get(obj: Ctx, name: str, output: str) -> None:
    """One CronWorkflow, as `argo cron get`."""
    with obj.engine() as engine:
        c = _get(engine, obj.namespace, name)

    def table() -> Table:
        t = Table("FIELD", "VALUE", show_header=False)
        spec, st = c["spec"], c["status"]
        t.add_row("Name", c["name"])
        t.add_row("Namespace", c["namespace"])
        t.add_row("Schedules", ", ".join(spec.get("schedules") or [spec.get("schedule", "")]))
        t.add_row("Timezone", spec.get("timezone") or "UTC")
        t.add_row("Concurrency", spec.get("concurrencyPolicy", "Allow"))
        t.add_row("Suspended", str(spec.get("suspend", False)).lower())
        t.add_row("Phase", st.get("phase", ""))
        t.add_row("LastScheduledTime", st.get("lastScheduledTime") or "-")
        t.add_row("NextScheduledTime", _next_run(c))
        t.add_row("Active", ", ".join(a["name"] for a in st.get("active") or []) or "-")
        t.add_row("Succeeded/Failed", f"{st.get('succeeded', 0)}/{st.get('failed', 0)}")
        for cond in st.get("conditions") or []:
            t.add_row(f"Condition {cond['type']}", cond.get("message", ""))
        return t

    emit(_cron_object(c), output, table)


@cli.command()
@click.argument("name")
@click.option("--since", default=None)
@click.option("--until", default=None)
@click.option("--type", "types", multiple=True, help="event type, e.g. ScheduleFired (repeatable)")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_obj
def history(
    obj: Ctx, name: str, since: str | None, until: str | None, types: tuple[str, ...], output: str
) -> None:
    """The audit log of one CronWorkflow: every fire and skip, and why."""
    s = parse_time(since, "--since") if since else None
    u = parse_time(until, "--until") if until else None
    with obj.engine() as engine:
        rows = engine.view.audit(obj.namespace, name, since=s, until=u, types=types)
    events = [r.as_event() for r in rows]

    def table() -> Table:
        t = Table("VERSION", "TYPE", "AT", "SCHEDULED", "WORKFLOW", "REASON")
        for e in events:
            t.add_row(
                str(e["version"]),
                e["type"],
                e["at"],
                e["scheduledTime"] or "-",
                e["workflow"] or "-",
                e["reason"] or "-",
            )
        return t

    emit(events, output, table)


@cli.command(name="next")
@click.argument("name")
@click.option("-c", "--count", default=5, show_default=True, type=click.IntRange(1, 1000))
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_obj
def next_cmd(obj: Ctx, name: str, count: int, output: str) -> None:
    """The next N fire times, in the CronWorkflow's zone and in UTC."""
    with obj.engine() as engine:
        try:
            agg = engine.service.find(obj.namespace, name)
        except NotFound as e:
            fail(str(e))
        tz = agg.spec_model.timezone
        zone = ZoneInfo(tz or "UTC")
        t = max(now(), agg.decided_until)
        times = []
        for _ in range(count):
            t = agg.schedule.next_after(t)
            times.append(t)
    data = [{"local": t.astimezone(zone).isoformat(), "utc": rfc3339(t)} for t in times]

    def table() -> Table:
        tb = Table(f"LOCAL ({tz or 'UTC'})", "UTC")
        for d in data:
            tb.add_row(d["local"], d["utc"])
        return tb

    emit(data, output, table)


# ---------------------------------------------------------------------- commands


def _command(obj: Ctx, name: str, do: Callable[[Engine, Any], str]) -> None:
    with obj.engine() as engine:
        try:
            agg = engine.service.find(obj.namespace, name)
        except NotFound as e:
            fail(str(e))
        click.echo(do(engine, agg.id))
        engine.catch_up()


@cli.command()
@click.argument("name")
@click.pass_obj
def suspend(obj: Ctx, name: str) -> None:
    """Suspend: no tick runs until resumed."""
    _command(
        obj, name, lambda e, i: (e.service.suspend(i, now(), by="cli"), f"{name} suspended")[1]
    )


@cli.command()
@click.argument("name")
@click.pass_obj
def resume(obj: Ctx, name: str) -> None:
    """Resume: the ticks of the suspension are decided, at most one runs."""
    _command(obj, name, lambda e, i: (e.service.resume(i, now(), by="cli"), f"{name} resumed")[1])


@cli.command()
@click.argument("name")
@click.pass_obj
def delete(obj: Ctx, name: str) -> None:
    """Delete; the history stays queryable."""
    _command(obj, name, lambda e, i: (e.service.delete(i, now()), f"{name} deleted")[1])


@cli.command()
@click.argument("name")
@click.option(
    "--request-id", default=None, help="idempotency key; a retried request starts no second run"
)
@click.pass_obj
def trigger(obj: Ctx, name: str, request_id: str | None) -> None:
    """Run now (a manual fire)."""
    rid = request_id or uuid.uuid4().hex

    def do(e: Engine, i: Any) -> str:
        wf = e.service.trigger(i, now(), rid)
        return f"workflow {wf} triggered" if wf else f"request {rid} already triggered"

    _command(obj, name, do)


@cli.command()
@click.argument("name")
@click.option("--start", required=True)
@click.option("--end", required=True)
@click.option("--dry-run", is_flag=True)
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_obj
def backfill(obj: Ctx, name: str, start: str, end: str, dry_run: bool, output: str) -> None:
    """Fire every tick in [start, end] that never fired."""
    s, e = parse_time(start, "--start"), parse_time(end, "--end")
    if e < s:
        fail(f"--end {end} is before --start {start}")
    with obj.engine() as engine:
        try:
            agg = engine.service.find(obj.namespace, name)
        except NotFound as ex:
            fail(str(ex))
        with Progress(console=err_console, transient=True) as progress:
            task = progress.add_task(f"backfill {name}", total=None)
            times = engine.service.backfill(
                agg.id,
                s,
                e,
                now(),
                dry_run=dry_run,
                progress=lambda done, total: progress.update(task, completed=done, total=total),
            )
        engine.catch_up()
    data = [
        {"scheduledTime": rfc3339(t), "workflow": f"{name}-{int(t.timestamp())}"} for t in times
    ]

    def table() -> Table:
        t = Table("SCHEDULED", "WORKFLOW", title=("would fire" if dry_run else "fired"))
        for d in data:
            t.add_row(d["scheduledTime"], d["workflow"])
        return t

    emit(data, output, table)


def _manifest_files(paths: tuple[str, ...]) -> list[str]:
    files: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files += sorted(str(f) for f in path.rglob("*") if f.suffix in (".yaml", ".yml"))
        elif path.exists():
            files.append(p)
        else:
            fail(f"{p}: no such file or directory")
    return files


@cli.command()
@click.argument("paths", nargs=-1)
@click.option(
    "--role", type=click.Choice(["all", "scheduler", "projector"]), default="all", show_default=True
)
@click.option(
    "--late-tolerance",
    default="30s",
    show_default=True,
    help="a tick decided later than this after its time is missed",
)
@click.option(
    "--workflows-dir",
    default="workflows",
    show_default=True,
    help="local target: where Workflow manifests are written",
)
@click.option(
    "--local-run-duration",
    default="1s",
    show_default=True,
    help="local target: a run succeeds after this long",
)
@click.option("--kube", is_flag=True, help="use the cluster from kubeconfig/in-cluster")
@click.option(
    "--kubeconfig",
    default=None,
    help="with --kube: kubeconfig path (default $KUBECONFIG, ~/.kube/config, in-cluster)",
)
@click.option(
    "--instance-id",
    default=None,
    envvar="CRONSOURCE_INSTANCE_ID",
    help="with --kube: Argo's controller instance id to select (default: objects without one)",
)
@click.option("-v", "--verbose", is_flag=True)
@click.pass_obj
def run(
    obj: Ctx,
    paths: tuple[str, ...],
    role: str,
    late_tolerance: str,
    workflows_dir: str,
    local_run_duration: str,
    kube: bool,
    kubeconfig: str | None,
    instance_id: str | None,
    verbose: bool,
) -> None:
    """The main job: apply PATHS, then schedule and project until SIGTERM."""
    import logging
    import time

    started = time.monotonic()

    from adapters.localtarget import LocalTarget
    from adapters.logs import configure_logging
    from adapters.runtime import RunWatcher, SchedulerLoop, Waker
    from adapters.shards import AdvisoryLockShards, Ownership, SoleOwner
    from domain.durations import parse_duration

    configure_logging(logging.DEBUG if verbose else logging.INFO)
    try:
        tolerance = parse_duration(late_tolerance)
    except ValueError as e:
        fail(f"--late-tolerance: {e}")
    try:
        run_duration = parse_duration(local_run_duration)
    except ValueError as e:
        fail(f"--local-run-duration: {e}")
    manifests = admit(_manifest_files(paths), obj.namespace) if paths else []
    try:
        config = StoreConfig.parse(obj.store)
    except StoreURLError as e:
        fail(str(e))
    api_client: Any = None
    target: Any
    if kube:
        from adapters.kube import connect

        try:
            api_client = connect(kubeconfig)
        except Exception as e:
            fail(f"--kube: cannot load a cluster configuration: {e}")
        where = "the cluster"
    else:
        target = LocalTarget(workflows_dir, run_duration)
        where = f"{workflows_dir}/"
    try:
        if kube:
            from adapters.kube import build_kube_engine

            engine = build_kube_engine(config, api_client, late_tolerance=tolerance)
        else:
            engine = build_engine(config, target=target, late_tolerance=tolerance)
        engine.view.next_due()
    except Exception as e:
        hint = " (run `cronsource migrate` first)" if config.kind == "postgresql" else ""
        fail(f"cannot open store {config.url}: {e}{hint}")
    for m in manifests:
        _, what = engine.service.apply(m, now())
        click.echo(f"cronworkflow.argoproj.io/{m.metadata.name} {what}", err=True)
    ownership: Ownership = (
        AdvisoryLockShards(config.pg_conninfo, want_projector=role != "scheduler")
        if config.kind == "postgresql"
        else SoleOwner()
    )
    watcher: Any
    if kube:
        from adapters.kube import KubeSync

        watcher = KubeSync(engine, api_client, namespace=None, instance_id=instance_id or None)
        if role != "scheduler":
            watcher.start()
    else:
        watcher = RunWatcher(engine, target)
    loop = SchedulerLoop(engine, ownership, role=role, watcher=watcher)
    waker = Waker(engine)
    loop.install_signal_handlers(waker)
    click.echo(
        f"cronsource running: store {config.url}, role {role}, workflows in {where}", err=True
    )
    try:
        loop.run(
            waker,
            on_ready=lambda: click.echo(
                f"cronsource ready after {time.monotonic() - started:.2f}s", err=True
            ),
        )
    finally:
        if kube:
            watcher.stop()
        waker.stop()
        engine.close()
        if api_client is not None:
            api_client.close()
    click.echo(f"cronsource stopped after {loop.fires} fires", err=True)


@cli.command()
@click.argument("scenario")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_obj
def simulate(obj: Ctx, scenario: str, output: str) -> None:
    """Run the real engine on a virtual clock (DESIGN.md 7.1)."""
    from adapters.simulate import ScenarioError, load_scenario
    from adapters.simulate import simulate as run_simulation

    try:
        data = yaml.safe_load(Path(scenario).read_text())
    except OSError as e:
        fail(f"{scenario}: {e.strerror}", 2)
    except yaml.YAMLError as e:
        fail(f"{scenario}: not valid YAML: {e}", 2)
    try:
        sc = load_scenario(data)
    except ScenarioError as e:
        fail(f"{scenario}: {e}", 2)
    try:
        result = run_simulation(sc, obj.store)
    except StoreURLError as e:
        fail(str(e), 2)

    def table() -> Table:
        t = Table(
            "WORKFLOW",
            "CRONWORKFLOW",
            "SCHEDULED",
            "CREATED",
            "PHASE",
            "FINISHED",
            "DELETED",
            "TRIGGER",
        )
        for w in result["workflows"]:
            t.add_row(
                w["name"],
                w["cronWorkflow"],
                w["scheduledTime"] or "-",
                w["createdAt"],
                w["phase"],
                w["finishedAt"] or "-",
                w["deletedAt"] or "-",
                w["trigger"],
            )
        return t

    emit(result, output, table)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token-file",
    default=None,
    help="file holding the bearer token (else $CRONSOURCE_TOKEN); required off loopback",
)
@click.option("-v", "--verbose", is_flag=True, help="debug logs and access logs")
@click.pass_obj
def serve(obj: Ctx, host: str, port: int, token_file: str | None, verbose: bool) -> None:
    """HTTP API, metrics, health checks and the status page (docs/http-api.md)."""
    from adapters.http import ServeError
    from adapters.http import serve as serve_http

    try:
        serve_http(obj.store, host=host, port=port, token_file=token_file, verbose=verbose)
    except ServeError as e:
        fail(str(e))


def main() -> None:
    cli(prog_name="cronsource")


if __name__ == "__main__":
    main()
