"""Workflow creations per second: `python -m bench.kube_create --workflows N`.

Starts the test Kubernetes API server (tests/kube/apiserver.py: the real generic API server with
our CRDs on an embedded etcd, on this machine) unless `--kubeconfig` names a running one, and
measures in the same run, against the same server:

- ours (`per_second`): the dispatcher path `cronsource run --kube` runs. Set-up, not timed: a
  throwaway store with N CronWorkflows (each with a uid, as the watcher admits them) all due at
  one instant H, their N ScheduleFired committed and the read model caught up. Timed: an engine
  built by `bootstrap` with a KubeTarget (the dispatcher on KubeTarget over our aiohttp client,
  `--in-flight` creations at a time) catching up as the scheduler loop does, `catch_up(H,
  budget=1 s)` per turn, until its dispatch position reaches the head of the log: every
  Workflow created in the cluster and the position committed.
- baseline (`baseline_per_second`): the same N Workflow objects (same bodies, another
  namespace) created by a plain loop on the official synchronous client, one
  `create_namespaced_custom_object` after another, as a simple controller would.

`ratio` = per_second / baseline_per_second. The baseline runs first, so the growing etcd never
favours our figure. Both sides share the machine with the API server and etcd: on a small
machine the server's CPU, not the client, is what the concurrent side runs into.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import cProfile
import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import (
    BenchError,
    Throwaway,
    emit,
    machine_note,
    next_top_of_hour,
    progress,
    r,
    self_peak_rss_mb,
    throwaway_store,
    utcnow,
)
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.kube import IN_FLIGHT, WF, KubeTarget, connect
from cronsource.adapters.infrastructure.kube.port import GROUP, VERSION
from cronsource.adapters.runtime.settings import BATCH, TURN_BUDGET
from cronsource.domain.cronworkflow import CronWorkflow, workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type
from cronsource.projections.dispatch import build_workflow


@contextlib.contextmanager
def api_server(kubeconfig: str | None) -> Iterator[tuple[str, str, int | None]]:
    """(kubeconfig path, what server, its pid if we started it) of the given server, or of a
    test server started now."""
    if kubeconfig:
        yield kubeconfig, "given by --kubeconfig", None
        return
    from tests.kube import apiserver

    with tempfile.TemporaryDirectory(prefix="cronsource-kube-bench-") as workdir:
        began = time.monotonic()
        server = apiserver.start(Path(workdir))
        try:
            note = f"tests/kube test API server, started in {time.monotonic() - began:.1f} s"
            yield str(server.kubeconfig), note, server.process.pid
        finally:
            server.stop(remove_data=True)


def cpu_of(pid: int | None) -> float:
    """CPU seconds (user + system, all threads) a process has used; 0 if unknown."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def manifest(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())},
        "spec": {
            "schedules": ["0 * * * *"],
            "concurrencyPolicy": "Allow",
            "workflowMetadata": {"labels": {"bench": "kube-create"}},
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox", "args": ["1"]}}],
            },
        },
    }


def run(
    n: int,
    in_flight: int,
    rounds: int,
    store: str | None,
    kubeconfig: str | None,
    profiler: cProfile.Profile | None = None,
) -> dict[str, Any]:
    from kubernetes import client as sync_client
    from kubernetes import config as sync_config

    results = []
    with api_server(kubeconfig) as (path, server_note, pid), progress() as bar:
        # Warm-up (not timed): the server builds a resource's storage on its first request
        # (about 2 s here); without this the first side measured would pay for it.
        api = sync_client.CustomObjectsApi(sync_config.new_client_from_config(config_file=path))
        warm_ns = f"bench-warm-{secrets.token_hex(3)}"
        warm = manifest("warm", warm_ns)
        warm["kind"] = "Workflow"
        for _ in range(20):
            api.create_namespaced_custom_object(GROUP, VERSION, warm_ns, WF, warm)
            api.delete_namespaced_custom_object(GROUP, VERSION, warm_ns, WF, "warm")
        for k in range(rounds):
            with throwaway_store(store, "kube-create") as t:
                results.append(one_round(k, n, in_flight, t, path, pid, api, bar, profiler))
        api.api_client.close()
        kind = t.kind

    def median(key: str) -> float:
        return float(statistics.median(x[key] for x in results))

    per_second, baseline_per_second = median("per_second"), median("baseline_per_second")
    return {
        "name": "kube_create",
        "n": n,
        "in_flight": in_flight,
        "rounds": rounds,
        # Medians over the rounds (each round: baseline, then ours, fresh namespaces).
        "seconds": r(median("seconds"), 3),
        "per_second": r(per_second),
        "baseline_seconds": r(median("baseline_seconds"), 3),
        "baseline_per_second": r(baseline_per_second),
        "ratio": r(per_second / baseline_per_second, 2),
        "each_round": results,
        "peak_rss_mb": r(self_peak_rss_mb()),
        "server": server_note,
        "store": kind,
        "machine": machine_note(),
    }


def one_round(
    k: int,
    n: int,
    in_flight: int,
    t: Throwaway,
    path: str,
    pid: int | None,
    api: Any,
    bar: Any,
    profiler: cProfile.Profile | None,
) -> dict[str, Any]:
    suffix = secrets.token_hex(3)
    ours_ns, plain_ns = f"bench-ours-{suffix}", f"bench-plain-{suffix}"

    # -- set-up: N CronWorkflows due at H, fired, projected (not timed) ----------------------
    h = next_top_of_hour(utcnow())
    setup = bootstrap(t.config, create_tables=False)
    task = bar.add_task(f"round {k + 1}: fires in the store", total=n)
    ids = []
    for i in range(0, n, BATCH):
        aggs = [
            CronWorkflow.from_manifest(
                parse_manifest(manifest(f"job-{j:06d}", ours_ns)), h - timedelta(minutes=30)
            )
            for j in range(i, min(n, i + BATCH))
        ]
        setup.service.save(*aggs)
        ids += [a.id for a in aggs]
    for i in range(0, n, BATCH):
        report = setup.service.tick(ids[i : i + BATCH], h)
        bar.advance(task, report.fires)
    setup.projector.catch_up(h)
    bodies = [
        build_workflow(a, workflow_name(a.name, h), h)
        for a in (setup.service.load(cid) for cid in ids)
    ]
    setup.close()

    # -- baseline: the plain synchronous loop, one create after another ----------------------
    task = bar.add_task(f"round {k + 1}: baseline, sync client one by one", total=n)
    began, cpu, server_cpu = time.perf_counter(), time.process_time(), cpu_of(pid)
    for body in bodies:
        plain = copy.deepcopy(body)
        plain["metadata"]["namespace"] = plain_ns
        api.create_namespaced_custom_object(GROUP, VERSION, plain_ns, WF, plain)
        bar.advance(task)
    baseline_seconds = time.perf_counter() - began
    baseline_cpu = time.process_time() - cpu
    baseline_server_cpu = cpu_of(pid) - server_cpu

    # -- ours: the dispatcher path of `run --kube` ---------------------------------------------
    kube = connect(path)
    engine = bootstrap(t.config, target=KubeTarget(kube, in_flight=in_flight), create_tables=False)
    try:
        svc = engine.service
        head = svc.recorder.max_notification_id() or 0
        done = engine.view.max_tracking_id(svc.name, "dispatch") or 0
        task = bar.add_task(
            f"round {k + 1}: ours, dispatcher {in_flight} in flight (events)", total=head - done
        )
        turns = 0
        began, cpu, server_cpu = time.perf_counter(), time.process_time(), cpu_of(pid)
        while done < head:
            if profiler is not None:
                profiler.enable()
            engine.projector.catch_up(h, budget=TURN_BUDGET)
            if profiler is not None:
                profiler.disable()
            turns += 1
            now_at = engine.view.max_tracking_id(svc.name, "dispatch") or 0
            bar.advance(task, now_at - done)
            done = now_at
        seconds = time.perf_counter() - began
        ours_cpu = time.process_time() - cpu
        ours_server_cpu = cpu_of(pid) - server_cpu
        failed = sum(
            1 for cid in ids for e in svc.events.get(cid) if event_type(e) == "SubmissionFailed"
        )
    finally:
        engine.close()
        created = len(kube.run(kube.list(ours_ns, WF, "bench=kube-create")).get("items") or [])
        kube.close()
    if failed or created != n:
        raise BenchError(f"ours created {created} of {n} Workflows ({failed} SubmissionFailed)")
    return {
        "seconds": r(seconds, 3),
        "per_second": r(n / seconds),
        "baseline_seconds": r(baseline_seconds, 3),
        "baseline_per_second": r(n / baseline_seconds),
        "turns": turns,
        # CPU seconds used during each timed part by this process (all threads) and by the
        # API server with its embedded etcd (0 when the server was not started here): both
        # share the machine's cores, which is what bounds the concurrent side on a small one.
        "cpu_seconds": r(ours_cpu, 2),
        "server_cpu_seconds": r(ours_server_cpu, 2),
        "baseline_cpu_seconds": r(baseline_cpu, 2),
        "baseline_server_cpu_seconds": r(baseline_server_cpu, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.kube_create", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--workflows", type=int, default=2000, help="N Workflows (default 2000)")
    ap.add_argument(
        "--in-flight", type=int, default=IN_FLIGHT, help=f"creations at once (default {IN_FLIGHT})"
    )
    ap.add_argument("--rounds", type=int, default=3, help="rounds; medians reported (default 3)")
    ap.add_argument("--store", default=None, help="sqlite:///NEW.db or postgresql://server/db")
    ap.add_argument("--kubeconfig", default=None, help="use this server instead of starting one")
    ap.add_argument("--profile", metavar="FILE", help="cProfile our timed part into FILE")
    args = ap.parse_args(argv)
    if min(args.workflows, args.in_flight, args.rounds) < 1:
        ap.error("--workflows, --in-flight and --rounds must be at least 1")
    profiler = cProfile.Profile() if args.profile else None
    try:
        result = run(
            args.workflows, args.in_flight, args.rounds, args.store, args.kubeconfig, profiler
        )
    except BenchError as e:
        print(f"kube_create: {e}", file=sys.stderr)
        return 1
    if profiler is not None:
        profiler.dump_stats(args.profile)
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
