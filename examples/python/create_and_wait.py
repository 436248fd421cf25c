"""Create a CronWorkflow from Python, wait for its first run, and print what happened.

    python examples/python/create_and_wait.py [STORE_URL]

Against the embedded store by default (./cronsource.db). Something must schedule it: this
script runs one `cronsource run` of its own for the wait, as a service would rely on the
cluster's replicas. Pass `--server URL` to go through `cronsource serve` with the HTTP client
instead of in process: the calls are the same.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cronsource

MANIFEST = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "CronWorkflow",
    "metadata": {"name": "hello-python", "namespace": "examples"},
    "spec": {
        "schedules": ["@every 2s"],
        "workflowSpec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
    },
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "store", nargs="?", default=None, help="store URL (default ./cronsource.db)"
    )
    parser.add_argument("--server", default=None, help="a `cronsource serve` URL instead")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()

    api: cronsource.Cronsource | cronsource.Client = (
        cronsource.Client(args.server) if args.server else cronsource.open(args.store)
    )
    with api:
        created = api.apply(MANIFEST)
        print(
            f"applied {created.metadata['namespace']}/{created.metadata['name']}"
            f" (version {created.metadata['resourceVersion']})"
        )
        scheduler = _scheduler(args.store) if not args.server else None
        try:
            deadline = time.monotonic() + args.timeout
            while True:
                fired = api.history("examples", "hello-python", types=["ScheduleFired"])
                if fired.items:
                    break
                if time.monotonic() > deadline:
                    print("no run within the timeout", file=sys.stderr)
                    return 1
                time.sleep(0.5)
        finally:
            if scheduler is not None:
                scheduler.terminate()
                scheduler.wait(timeout=30)
        first = fired.items[0]
        print(f"first run {first.workflow} for {first.scheduledTime}, decided at {first.at}")
        status = api.get("examples", "hello-python").status
        print(f"lastScheduledTime {status.lastScheduledTime}")
        api.delete("examples", "hello-python")
    return 0


def _scheduler(store: str | None) -> subprocess.Popen[bytes]:
    """A `cronsource run` for this store, writing Workflows into a scratch directory."""
    workflows = Path(tempfile.mkdtemp(prefix="cronsource-example-"))
    cli = Path(sys.executable).with_name("cronsource")
    flags = ["--store", store] if store else []
    return subprocess.Popen(
        [str(cli), *flags, "run", "--workflows-dir", str(workflows)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


if __name__ == "__main__":
    sys.exit(main())
