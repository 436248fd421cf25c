"""One scheduler replica in its own OS process, for tests/integration/test_postgres_integration.py.

    python tests/procs/decide_worker.py --store URL --ids ID,ID,... --instants T,T,... \
        [--mode lockstep|free] [--name NAME]

The store is migrated by the parent; this process builds its engine with CREATE_TABLE=n, as a
replica would. Time is never read from a clock: every decision is made at one of `--instants`.

Protocol (one JSON object per line on stdout, one line per go-ahead on stdin):

- `{"ready": NAME}` once the engine is built; then the process waits for a line on stdin,
  so the parent can start every worker's work at once (a barrier, no sleeping).
- `--mode free`: after that one go-ahead, `svc.tick(ids, at)` for each instant in order.
- `--mode lockstep`: for each instant, wait for a line, `svc.decide_batch(ids, at)`, print
  `{"decided": i}`, wait for a line, `svc.commit_batch(aggs, at)`, print `{"committed": i}`.
  With the parent releasing every worker at each step, all of them decide on the same state
  before any saves: the worst interleaving (argoproj/argo-workflows#4558) at every instant.
- Finally `{"done": NAME, "rejected_writes": N, "fires": N, "saved": N, "batch_rejected": N}`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from uuid import UUID

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from cronsource.adapters.bootstrap import bootstrap  # noqa: E402


def say(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def wait_for_go() -> None:
    if not sys.stdin.readline():
        raise SystemExit("parent went away (stdin closed)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--ids", required=True, help="comma-separated CronWorkflow stream ids")
    p.add_argument("--instants", required=True, help="comma-separated RFC 3339 instants")
    p.add_argument("--mode", choices=("lockstep", "free"), default="free")
    p.add_argument("--name", default=str(os.getpid()))
    args = p.parse_args(argv)

    ids = [UUID(x) for x in args.ids.split(",") if x]
    instants = [datetime.fromisoformat(x) for x in args.instants.split(",") if x]
    engine = bootstrap(args.store, create_tables=False)
    svc = engine.service
    fires = saved = batch_rejected = 0
    try:
        say({"ready": args.name})
        wait_for_go()
        for i, at in enumerate(instants):
            if args.mode == "lockstep":
                if i:
                    wait_for_go()
                aggs = svc.decide_batch(ids, at)
                say({"decided": i})
                wait_for_go()
                report = svc.commit_batch(aggs, at)
                say({"committed": i})
            else:
                report = svc.tick(ids, at)
            fires += report.fires
            saved += report.saved
            batch_rejected += report.rejected
        say(
            {
                "done": args.name,
                "rejected_writes": svc.rejected_writes,
                "fires": fires,
                "saved": saved,
                "batch_rejected": batch_rejected,
            }
        )
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
