"""Start-up time and memory of `cronsource run --kube`: `python -m bench.kube_start`.

Starts the test Kubernetes API server (tests/kube/apiserver.py) unless `--kubeconfig` names a
running one, creates `--crons` CronWorkflows in one namespace, then `--rounds` times starts the
installed `cronsource run --kube` on a new SQLite store and reads from it:

- `ready_s`: what it reports ("cronsource ready after N s": engine, first list and watch,
  the loop's first turn; imports and interpreter start excluded),
- `to_ready_s`: wall seconds from the exec to that line (interpreter, imports, all of it),
- `rss_mb` / `peak_rss_mb`: VmRSS and VmHWM of the process `--settle` seconds after ready.

Medians over the rounds. The Kubernetes client is much of what the imports and the memory of
a `--kube` process are (issue 25: the official client against lightkube and aiohttp), which is
why this is measured here and not in bench.history's start-up, whose runs have no cluster.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import emit, machine_note, r
from bench.kube_create import api_server
from cronsource.adapters.infrastructure.kube.port import CWF, GROUP, VERSION

READY = re.compile(r"cronsource ready after ([0-9.]+)s")
NAMESPACE = "bench-start"


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _cron(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name},
        "spec": {
            "schedules": ["0 0 1 1 *"],
            "workflowSpec": {"entrypoint": "main", "templates": [{"name": "main"}]},
        },
    }


def _seed(kubeconfig: str, crons: int) -> None:
    """`crons` CronWorkflows in NAMESPACE, over plain HTTPS (no Kubernetes client here)."""
    from tests.kube import apiserver

    server = apiserver.ApiServer.__new__(apiserver.ApiServer)
    server.kubeconfig = Path(kubeconfig)
    import yaml

    cfg = yaml.safe_load(server.kubeconfig.read_text())
    server.url = cfg["clusters"][0]["cluster"]["server"]
    server.token = cfg["users"][0]["user"]["token"]
    server.create_namespace(NAMESPACE)
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{CWF}"
    have = {i["metadata"]["name"] for i in server.request("GET", path)["items"]}
    for k in range(crons):
        if f"start-{k}" not in have:
            server.request("POST", path, _cron(f"start-{k}"))


def one_round(kubeconfig: str, settle: float, timeout: float, exe: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cronsource-kube-start-") as tmp:
        began = time.monotonic()
        proc = subprocess.Popen(
            [
                str(exe),
                "--store",
                f"sqlite:///{tmp}/cronsource.db",
                "run",
                "--kube",
                "--kubeconfig",
                kubeconfig,
                "--namespace",
                NAMESPACE,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "CRONSOURCE_HTTP_PORT"},
        )
        try:
            assert proc.stderr is not None
            reported = None
            for line in proc.stderr:
                m = READY.search(line)
                if m:
                    reported = float(m.group(1))
                    break
                if time.monotonic() - began > timeout:
                    break
            if reported is None:
                raise RuntimeError(f"no ready line from run --kube (exit {proc.poll()})")
            to_ready = time.monotonic() - began
            time.sleep(settle)
            rss = _status_kb(proc.pid, "VmRSS") / 1024
            peak = _status_kb(proc.pid, "VmHWM") / 1024
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    return {"ready_s": reported, "to_ready_s": to_ready, "rss_mb": rss, "peak_rss_mb": peak}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.kube_start", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--rounds", type=int, default=5, help="starts; medians reported (default 5)")
    ap.add_argument("--crons", type=int, default=50, help="CronWorkflows listed (default 50)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds after ready to read RSS")
    ap.add_argument("--kubeconfig", default=None, help="use this server instead of starting one")
    ap.add_argument(
        "--exe",
        type=Path,
        default=Path(sys.executable).parent / "cronsource",
        help="the cronsource to start (default: this venv's; another venv's to compare)",
    )
    args = ap.parse_args(argv)
    if min(args.rounds, args.crons + 1) < 1:
        ap.error("--rounds must be at least 1 and --crons at least 0")
    with api_server(args.kubeconfig) as (path, server_note, _pid):
        _seed(path, args.crons)
        rounds = [one_round(path, args.settle, 120.0, args.exe) for _ in range(args.rounds)]

    def median(key: str) -> float | None:
        return r(statistics.median(x[key] for x in rounds), 3)

    version = subprocess.run([str(args.exe), "--version"], capture_output=True, text=True)
    emit(
        {
            "bench": "kube_start",
            "rounds": args.rounds,
            "crons": args.crons,
            "ready_s": median("ready_s"),
            "to_ready_s": median("to_ready_s"),
            "rss_mb": median("rss_mb"),
            "peak_rss_mb": median("peak_rss_mb"),
            "all": rounds,
            "server": server_note,
            "exe": str(args.exe),
            "version": version.stdout.strip(),
            "machine": machine_note(),
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
