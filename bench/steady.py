"""Fire skew at steady load: `python -m bench.steady --crons N --minutes M --store URL`.

Starts the real `cronsource run` as a separate process on a fresh store with N CronWorkflows,
and watches the event log from this process: each ScheduleFired is timestamped when it first
becomes visible (a poll every 20 ms), so skew = visible - scheduled is an upper bound of the
commit time minus the scheduled time. Also samples the scheduler's peak RSS. Prints one JSON
object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml
from rich.progress import Progress

from adapters.engine import build_engine, migrate
from adapters.store import StoreConfig
from bench.common import percentile, r, rss_mb


def manifests(n: int, schedule: str | None, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    return [
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": f"steady-{i:06d}", "namespace": "bench"},
            "spec": {
                "schedules": [schedule or f"{rng.randrange(60)} * * * *"],
                "workflowSpec": {"entrypoint": "main"},
            },
        }
        for i in range(n)
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--crons", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("--store", default=None)
    ap.add_argument("--schedule", default=None, help="one schedule for all (default: M * * * *)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cronsource-steady-"))
    store = a.store or f"sqlite:///{work / 'steady.db'}"
    config = StoreConfig.parse(store)
    migrate(config)
    path = work / "crons.yaml"
    path.write_text(yaml.safe_dump_all(manifests(a.crons, a.schedule, a.seed)))
    exe = Path(sys.executable).parent / "cronsource"
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(exe), "--store", store, "run", str(path), "--workflows-dir", str(work / "wf")],
        stdout=subprocess.DEVNULL,
        stderr=open(work / "run.log", "w"),
    )
    engine = build_engine(config, create_tables=False)
    app = engine.service
    seen = 0
    skews: list[float] = []
    peak = 0.0
    ready_s = None
    deadline = time.monotonic() + a.minutes * 60
    with Progress() as progress:
        task = progress.add_task("steady load", total=a.minutes * 60)
        while time.monotonic() < deadline and proc.poll() is None:
            notes = app.recorder.select_notifications(start=seen + 1, limit=5000)
            now = datetime.now(UTC)
            for n in notes:
                seen = n.id
                if n.topic == "cronsource:ScheduleFired/v1":
                    ev = app.mapper.to_domain_event(n)
                    skews.append((now - ev.scheduled_time).total_seconds() * 1000)
            if ready_s is None and seen >= a.crons:
                ready_s = time.monotonic() - started
            peak = max(peak, rss_mb(proc.pid))
            progress.update(
                task, completed=min(a.minutes * 60, a.minutes * 60 - (deadline - time.monotonic()))
            )
            time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    engine.close()
    result = {
        "name": "steady",
        "n": a.crons,
        "store": config.kind,
        "minutes": a.minutes,
        "fires": len(skews),
        "p50_ms": r(percentile(skews, 0.5)),
        "p99_ms": r(percentile(skews, 0.99)),
        "max_ms": round(max(skews), 1) if skews else None,
        "mean_ms": round(statistics.fmean(skews), 1) if skews else None,
        "peak_rss_mb": round(peak, 1),
        "startup_seconds": round(ready_s, 2) if ready_s else None,
        "exit_code": code,
    }
    if os.environ.get("CRONSOURCE_BENCH_KEEP") is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
