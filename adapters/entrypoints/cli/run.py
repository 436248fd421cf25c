"""`run`, the main job: apply the given manifests, then schedule and project until SIGTERM. The
wiring is bootstrap's (adapters/bootstrap.py); this module reads the flags and reports.
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import click

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.bootstrap import bootstrap, bootstrap_replica
from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.entrypoints.cli.admission import admit, apply_all
from cronsource.adapters.entrypoints.cli.context import KIND, _obj, fail, global_options, now
from cronsource.adapters.entrypoints.cli.output import ago
from cronsource.adapters.entrypoints.cli.registry import cli
from cronsource.adapters.entrypoints.cli.store import retain_option, retain_refused
from cronsource.adapters.infrastructure.store.check import StoreUnavailable, check_store, describe
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.collector import pace_collector
from cronsource.domain.schedule import local_zone
from cronsource.projections.readmodel import rfc3339


def replica_options(f: Any) -> Any:
    """The flags of a replica, shared by `run` and `project` (declared once, in the order
    `--help` shows them)."""
    for option in reversed(_REPLICA_OPTIONS):
        f = option(f)
    return f


_REPLICA_OPTIONS = [
    click.option(
        "--late-tolerance",
        default="30s",
        show_default=True,
        help="a tick decided later than this after its time is missed",
    ),
    click.option(
        "--workflows-dir",
        default="workflows",
        show_default=True,
        help="local target: where Workflow manifests are written",
    ),
    click.option(
        "--local-run-duration",
        default="1s",
        show_default=True,
        help="local target: a run succeeds after this long",
    ),
    click.option("--kube", is_flag=True, help="use the cluster from kubeconfig/in-cluster"),
    click.option(
        "--kubeconfig",
        default=None,
        help="with --kube: kubeconfig path (default $KUBECONFIG, ~/.kube/config, in-cluster)",
    ),
    click.option(
        "--instance-id",
        default=None,
        envvar="CRONSOURCE_INSTANCE_ID",
        help="with --kube: Argo's controller instance id to select (default: objects without one)",
    ),
    click.option(
        "--http-port",
        type=click.IntRange(0, 65535),
        default=None,
        envvar="CRONSOURCE_HTTP_PORT",
        help="serve /healthz, /readyz and /metrics on this port (default: no probe server)",
    ),
    click.option(
        "--http-host",
        default="127.0.0.1",
        show_default=True,
        envvar="CRONSOURCE_HTTP_HOST",
        help="address of the probe server (0.0.0.0 in a pod, for the kubelet and Prometheus)",
    ),
    click.option(
        "--http-token-file",
        default=None,
        help="bearer token /metrics asks for (else $CRONSOURCE_TOKEN; none: open)",
    ),
    click.option(
        "--per-cronworkflow-metrics",
        is_flag=True,
        envvar="CRONSOURCE_PER_CRONWORKFLOW_METRICS",
        help="with --http-port: also count fires and skipped ticks per CronWorkflow (labels"
        " namespace, name): one series each, for a few hundred CronWorkflows at most",
    ),
    click.option(
        "--max-turn-age",
        default="60s",
        show_default=True,
        help="/healthz and /readyz fail when the scheduler loop finished no turn for this long",
    ),
    click.option(
        "--lease-duration",
        default="15s",
        show_default=True,
        envvar="CRONSOURCE_LEASE_DURATION",
        help="PostgreSQL: a replica that has not renewed its lease for this long (frozen,"
        " partitioned) has its shards and projector role taken by the others",
    ),
    click.option(
        "--retain",
        default=None,
        envvar="CRONSOURCE_RETAIN",
        help="keep the log and the audit for this long (e.g. 90d, 2160h): older events that a"
        " snapshot covers and nothing needs are removed (default: keep everything)",
    ),
    click.option("-v", "--verbose", is_flag=True),
    global_options(output=False, all_namespaces=False, selector=False),
]


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(allow_dash=True))
@click.option(
    "--role", type=click.Choice(["all", "scheduler", "projector"]), default="all", show_default=True
)
@replica_options
def run(paths: tuple[str, ...], role: str, **flags: Any) -> None:
    """The main job: apply PATHS, then schedule and project until SIGTERM."""
    run_replica(paths, role, **flags)


@cli.command()
@replica_options
def project(**flags: Any) -> None:
    """Only the projections and the dispatcher (`run --role projector`): the status view,
    the audit and the Workflows of fires, scaled or placed apart from the schedulers."""
    run_replica((), "projector", **flags)


def run_replica(
    paths: tuple[str, ...],
    role: str,
    late_tolerance: str,
    workflows_dir: str,
    local_run_duration: str,
    kube: bool,
    kubeconfig: str | None,
    instance_id: str | None,
    http_port: int | None,
    http_host: str,
    http_token_file: str | None,
    per_cronworkflow_metrics: bool,
    max_turn_age: str,
    lease_duration: str,
    retain: str | None,
    verbose: bool,
) -> None:
    """One replica of `role` until SIGTERM (`run`, `project`)."""
    import logging

    started = SYSTEM_CLOCK.monotonic()

    from cronsource.adapters.infrastructure.leases import (
        MIN_LEASE_SECONDS,
        LeaseTableMissing,
        check_table,
    )
    from cronsource.adapters.infrastructure.localtarget import LocalTarget
    from cronsource.adapters.infrastructure.logs import configure_logging, replica_filter
    from cronsource.adapters.infrastructure.replica import BadReplicaName, replica_identity
    from cronsource.domain.calendars import CalendarSpec
    from cronsource.domain.durations import parse_duration

    obj = _obj()
    handler = configure_logging(logging.DEBUG if verbose else logging.INFO)
    import os
    import socket

    try:
        # Once, here: handed to the lease, the scheduler (decidedBy) and the log lines.
        identity = replica_identity(os.environ, socket.gethostname(), os.getpid())
    except BadReplicaName as e:
        fail(str(e))
    replica_filter(handler, identity)
    try:
        tolerance = parse_duration(late_tolerance)
    except ValueError as e:
        fail(f"--late-tolerance: {e}")
    try:
        run_duration = parse_duration(local_run_duration)
    except ValueError as e:
        fail(f"--local-run-duration: {e}")
    try:
        turn_age = parse_duration(max_turn_age).total_seconds()
    except ValueError as e:
        fail(f"--max-turn-age: {e}")
    try:
        lease_seconds = parse_duration(lease_duration).total_seconds()
    except ValueError as e:
        fail(f"--lease-duration: {e}")
    retain_for = retain_option(retain)
    if instance_id:
        # A label value selects the objects (workflows.argoproj.io/controller-instanceid):
        # one the API server cannot take started a process whose every watch failed 400.
        from cronsource.domain.objectlimits import label_problems

        for problem in label_problems({"instanceid": instance_id}):
            fail(f"--instance-id: {problem.removeprefix('instanceid: ')}")
    if lease_seconds < MIN_LEASE_SECONDS:
        fail(
            f"--lease-duration: {lease_duration!r} is shorter than {MIN_LEASE_SECONDS:g}s"
            " (a replica renews every 2s at most and needs room for a slow round trip)"
        )
    http_token: str | None = None
    if http_port is not None:
        from cronsource.adapters.entrypoints.http import ServeError, load_token

        try:
            http_token = load_token(http_token_file)
        except ServeError as e:
            fail(str(e))
    calendars: list[CalendarSpec] = []
    manifests = (
        admit(
            paths,
            obj.namespace,
            only_cronworkflows=True,
            exclude=None if kube else workflows_dir,
            with_calendars=calendars,
        )
        if paths
        else []
    )
    config = obj.store_config()
    try:
        check_store(config)
        if config.kind == "postgresql":
            check_table(config.pg_conninfo, config.pg_schema)
    except (StoreUnavailable, LeaseTableMissing) as e:
        fail(str(e))
    except Exception as e:
        fail(describe(e, config))
    api_client: Any = None
    target: Any
    if kube:
        from cronsource.adapters.infrastructure.kube import connect

        try:
            api_client = connect(kubeconfig)
        except Exception as e:
            fail(f"--kube: cannot load a cluster configuration: {e}")
        _credentials_taken(api_client)
        where = "the cluster"
    else:
        target = LocalTarget(workflows_dir, run_duration)
        where = f"{workflows_dir}/"
    try:
        if kube:
            from cronsource.adapters.infrastructure.kube import KubeTarget

            engine = bootstrap(
                config,
                target=KubeTarget(api_client),
                late_tolerance=tolerance,
                replica=identity,
            )
        else:
            engine = bootstrap(config, target=target, late_tolerance=tolerance, replica=identity)
        engine.view.next_due()  # the read model answers: fail here, not in the first turn
    except Exception as e:
        fail(describe(e, config))
    # As `apply` does (three-way): a restart must not undo what a command changed since.
    try:
        ops = Operations(engine, settle_each=False)
        apply_all(
            ops,
            manifests,
            lambda m, result: click.echo(f"{KIND}/{m.metadata.name} {result.what}", err=True),
            calendars=calendars,
            calendar_applied=lambda c, version, what: click.echo(
                f"calendar/{c.name} {what} (version {version})", err=True
            ),
        )
    except SystemExit:
        engine.close()
        raise
    if retain_for is not None and (refused := retain_refused(ops, retain_for, str(retain))):
        engine.close()
        fail(refused)
    replica = bootstrap_replica(
        engine,
        role=role,
        identity=identity,
        lease_seconds=lease_seconds,
        kube=api_client,
        instance_id=instance_id or None,
        local=None if kube else target,
        retain=retain_for,
    )
    loop = replica.loop
    pace_collector()  # a long-running process with many long-lived aggregates
    probes: Any = None
    if http_port is not None:
        from cronsource.adapters.entrypoints.probes import Probes, ProbeServer

        try:
            probes = ProbeServer(
                Probes(
                    engine,
                    loop,
                    engine.clock,
                    token=http_token,
                    max_turn_age=turn_age,
                    per_cronworkflow=per_cronworkflow_metrics,
                ),
                http_host,
                http_port,
            )
        except OSError as e:
            engine.close()
            fail(f"--http-port {http_port}: cannot listen on {http_host}: {e.strerror or e}")
        probes.start()
        click.echo(f"cronsource probes on http://{http_host}:{probes.port}", err=True)
    waker = replica.waker
    loop.install_signal_handlers(waker)
    click.echo(
        f"cronsource running: store {config.shown}, role {role}, replica {identity},"
        f" workflows in {where}",
        err=True,
    )

    def ready() -> None:
        click.echo(f"cronsource ready after {SYSTEM_CLOCK.monotonic() - started:.3f}s", err=True)
        click.echo(next_tick_line(ops, engine.config), err=True)

    try:
        loop.run(waker, on_ready=ready)
    finally:
        if probes is not None:
            probes.stop()
        replica.close()
        if api_client is not None:
            api_client.close()
    click.echo(f"cronsource stopped after {loop.fires} fires", err=True)


def next_tick_line(ops: Operations, config: StoreConfig) -> str:
    """`next tick: default/hello at ... (in 42s)`, or why there is none."""
    try:
        due = [(c.next_due, c) for c in ops.statuses(None) if c.next_due is not None]
    except Exception as e:
        return f"next tick: unknown ({describe(e, config)})"
    if not due:
        return "next tick: none (no live CronWorkflow; apply one, or resume a suspended one)"
    t, c = min(due, key=lambda d: d[0])
    zone = local_zone(c.spec)
    local = t.astimezone(ZoneInfo(zone)).isoformat()
    return f"next tick: {c.namespace}/{c.name} at {rfc3339(t)} ({local} {zone}, {ago(t, now())})"


#: How long start-up waits for the API server to say whether it takes the credentials.
CREDENTIALS_CHECK_SECONDS = 5.0


def _credentials_taken(api_client: Any) -> None:
    """Exit in one line when the API server refuses the kubeconfig's credentials (401): the
    process said "ready" and then failed every watch for ever. One GET of an object that is
    not there (404 answers that the credentials were taken). An API server that does not
    answer is waited for, as every controller waits for it; a 403 may be RBAC scoped to other
    namespaces, which the watches will say."""
    import asyncio

    from cronsource.adapters.infrastructure.kube import CWF, ApiError

    try:
        check = api_client.get("default", CWF, "cronsource-credentials-check")
        api_client.run(asyncio.wait_for(check, CREDENTIALS_CHECK_SECONDS))
    except ApiError as e:
        if e.status == 401:
            api_client.close()
            fail(f"--kube: the API server refused the credentials: {e}")
    except Exception:  # noqa: S110 (no answer: the watches wait and retry, as they always did)
        pass
