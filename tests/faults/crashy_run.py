"""`cronsource` with crash hooks, for tests/e2e/test_faults.py. Usage: same argv as `cronsource`.

    CRONSOURCE_FAULT=POINT:N  python tests/faults/crashy_run.py --store URL run FILE ...

With CRONSOURCE_FAULT set, the process sends itself SIGKILL the N-th time it reaches POINT
(after writing `FAULT POINT N` to stderr), so a crash lands exactly in a window that random
timing hits only rarely. Nothing of the product is changed: the hooks wrap its methods and
then call `cronsource.adapters.entrypoints.cli.main()` with the same arguments.

Points:

- `fire-committed`: `CronService.append_batch` has just saved a batch with at least one
  ScheduleFired; nothing was projected or dispatched yet (between the append and the file),
  and the service has not yet updated what it keeps about the batch.
- `dispatch-before-create`: the dispatcher is about to create the Workflow file of a
  projected ScheduleFired (the read model shows the run active, no file exists).
- `dispatch-after-create`: the Workflow file exists, the dispatch position has not moved
  (the restarted dispatcher creates it again and must find it is already there).
- `readmodel-in-txn`: inside the read model's transaction, after the status and audit rows
  and the new position are written and before COMMIT; nothing of it is committed.
- `before-run-completed`: the run watcher persisted a `.phase` file and is about to append
  RunCompleted.

Stalls (a frozen replica, tests/e2e/test_fault_frozen_replica.py):

    CRONSOURCE_STALL=POINT  CRONSOURCE_STALL_ARM=PATH  python tests/faults/crashy_run.py ...

The first time the process reaches POINT after the file PATH exists, it writes `STALL POINT`
to stderr and sends itself SIGSTOP (every thread stops, the PostgreSQL sessions stay open), so
the freeze lands exactly where a replica holds something it must not act on later. After
SIGCONT it writes `STALL woke` and goes on. Points:

- `before-commit`: the scheduler has decided a batch and is about to commit it
  (`Scheduler._commit`). Every later `CronService.append_batch` of a decision made before the
  stall writes `STALE COMMIT` and is counted as `stale_commits` in the stats file.
- `readmodel-in-txn`: as the crash point of that name, inside the read model's transaction
  before COMMIT. How that transaction ends is written after the wake-up:
  `STALL txn committed` or `STALL txn failed: ERROR`.

SIGUSR1 writes the stack of every thread to stderr (to see where a replica hangs).

CRONSOURCE_FAULT_STATS=PATH: at a clean exit, write `{"rejected_writes": N, "fires": N,
"stale_commits": N}` (the service's count of saves the store refused as stale, which the CLI
does not print).
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from cronsource.adapters.entrypoints import cli  # noqa: E402
from cronsource.adapters.infrastructure.localtarget import LocalTarget  # noqa: E402
from cronsource.adapters.infrastructure.readside.database import PostgresDatabase, SqliteDatabase  # noqa: E402
from cronsource.adapters.infrastructure.readside.model import ReadModel  # noqa: E402
from cronsource.adapters.infrastructure.shards import AdvisoryLockShards  # noqa: E402
from cronsource.adapters.runtime.scheduler import Scheduler  # noqa: E402
from cronsource.domain.service import CronService  # noqa: E402

POINTS = (
    "fire-committed",
    "dispatch-before-create",
    "dispatch-after-create",
    "readmodel-in-txn",
    "before-run-completed",
)


class Fault:
    def __init__(self, spec: str) -> None:
        point, _, n = spec.partition(":")
        if point not in POINTS:
            raise SystemExit(f"CRONSOURCE_FAULT: unknown point {point!r}; one of {POINTS}")
        self.point = point
        self.n = int(n or "1")
        self.seen = 0

    def reached(self, point: str) -> None:
        if point != self.point:
            return
        self.seen += 1
        if self.seen >= self.n:
            sys.stderr.write(f"FAULT {point} {self.seen}\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)


STALL_POINTS = ("before-commit", "readmodel-in-txn")


class Stall:
    def __init__(self, point: str, arm: str) -> None:
        if point not in STALL_POINTS:
            raise SystemExit(f"CRONSOURCE_STALL: unknown point {point!r}; one of {STALL_POINTS}")
        self.point = point
        self.arm = arm
        #: Wall time of the stall (None: not yet): decisions made before it are stale after.
        self.at: datetime | None = None
        self.stale_commits = 0
        self._lock = threading.Lock()

    def reached(self, point: str) -> bool:
        """Stall here if armed and not yet stalled; True if this call stalled."""
        if point != self.point or not os.path.exists(self.arm):
            return False
        with self._lock:
            if self.at is not None:
                return False
            self.at = datetime.now(UTC)
        sys.stderr.write(f"STALL {point} at {self.at.isoformat()}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSTOP)
        sys.stderr.write(f"STALL woke at {datetime.now(UTC).isoformat()}\n")
        sys.stderr.flush()
        return True


def install_stall(stall: Stall) -> None:
    commit = Scheduler._commit

    def stalling_commit(self: Scheduler, staged: Any, at: Any, *rest: Any) -> Any:
        stall.reached("before-commit")
        return commit(self, staged, at, *rest)

    Scheduler._commit = stalling_commit  # type: ignore[method-assign]

    append_batch = CronService.append_batch

    def watched_append_batch(
        self: CronService, staged: Any, at: Any, decided_by: str | None = None
    ) -> Any:
        if stall.at is not None and at <= stall.at:
            stall.stale_commits += 1
            sys.stderr.write(f"STALE COMMIT of a decision made at {at.isoformat()}\n")
            sys.stderr.flush()
        return append_batch(self, staged, at, decided_by)

    CronService.append_batch = watched_append_batch  # type: ignore[method-assign]

    write_batch = ReadModel.write_batch
    writing = threading.local()

    def stalling(transaction: Any) -> Any:
        @contextlib.contextmanager
        def stalling_transaction(self: Any) -> Iterator[Any]:
            stalled = False
            try:
                with transaction(self) as conn:
                    yield conn
                    if getattr(writing, "active", False):
                        stalled = stall.reached("readmodel-in-txn")
            except BaseException as e:
                if stalled:
                    sys.stderr.write(f"STALL txn failed: {type(e).__name__}: {e}\n")
                    sys.stderr.flush()
                raise
            if stalled:
                sys.stderr.write("STALL txn committed\n")
                sys.stderr.flush()

        return stalling_transaction

    def tracked_write_batch(self: ReadModel, items: Any) -> int:
        writing.active = True
        try:
            return write_batch(self, items)
        finally:
            writing.active = False

    for db in (SqliteDatabase, PostgresDatabase, AdvisoryLockShards):
        name = "projector_transaction" if db is AdvisoryLockShards else "transaction"
        setattr(db, name, stalling(getattr(db, name)))
    ReadModel.write_batch = tracked_write_batch  # type: ignore[method-assign]


def install(fault: Fault) -> None:
    append = CronService.append_batch

    def crashy_append(
        self: CronService, staged: Any, at: Any, decided_by: str | None = None
    ) -> Any:
        report, finish = append(self, staged, at, decided_by)
        if report.fires:
            fault.reached("fire-committed")
        return report, finish

    CronService.append_batch = crashy_append  # type: ignore[method-assign]

    create_many = LocalTarget.create_many

    def crashy_create_many(self: LocalTarget, items: Any, at: Any) -> Any:
        fault.reached("dispatch-before-create")
        errors = create_many(self, items, at)
        fault.reached("dispatch-after-create")
        return errors

    LocalTarget.create_many = crashy_create_many  # type: ignore[method-assign]

    # Inside the read model's transaction: every row and the new position are written, the
    # COMMIT is not. (`write_batch` is the view's write; each database's `transaction` wraps
    # it in BEGIN .. COMMIT. If these names change, the test's "every point was reached" check
    # says so.)
    write_batch = ReadModel.write_batch
    writing = threading.local()

    def crashy(transaction: Any) -> Any:
        @contextlib.contextmanager
        def crashy_transaction(self: Any) -> Iterator[Any]:
            with transaction(self) as conn:
                yield conn
                if getattr(writing, "active", False):
                    fault.reached("readmodel-in-txn")

        return crashy_transaction

    def tracked_write_batch(self: ReadModel, items: Any) -> int:
        writing.active = True
        try:
            return write_batch(self, items)
        finally:
            writing.active = False

    # On PostgreSQL, `run` writes the read model on its projector lock's session.
    for db in (SqliteDatabase, PostgresDatabase, AdvisoryLockShards):
        name = "projector_transaction" if db is AdvisoryLockShards else "transaction"
        setattr(db, name, crashy(getattr(db, name)))
    ReadModel.write_batch = tracked_write_batch  # type: ignore[method-assign]

    # The run watcher's way in, for one end or a batch of them (CronWorkflows whose runs end
    # at one instant, as every `@every 1s` here does now that they tick on whole seconds,
    # are recorded together, without `run_completed`).
    runs_ended = CronService.runs_ended

    def crashy_runs_ended(self: CronService, ends: Any, *args: Any, **kw: Any) -> None:
        if ends:  # the watcher calls it after every look, with nothing ended too
            fault.reached("before-run-completed")
        runs_ended(self, ends, *args, **kw)

    CronService.runs_ended = crashy_runs_ended  # type: ignore[method-assign]


def record_stats(path: str, stall: Stall | None) -> None:
    services: list[CronService] = []
    init = CronService.__init__

    def tracked_init(self: CronService, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        services.append(self)

    CronService.__init__ = tracked_init  # type: ignore[method-assign]

    append = CronService.append_batch
    fires = [0]

    def counting_append(
        self: CronService, staged: Any, at: Any, decided_by: str | None = None
    ) -> Any:
        report, finish = append(self, staged, at, decided_by)
        fires[0] += report.fires
        return report, finish

    CronService.append_batch = counting_append  # type: ignore[method-assign]

    def write() -> None:
        stats = {
            "rejected_writes": sum(s.rejected_writes for s in services),
            "fires": fires[0],
            "stale_commits": stall.stale_commits if stall is not None else 0,
        }
        with open(path, "w") as f:
            json.dump(stats, f)

    atexit.register(write)


def main() -> None:
    # `kill -USR1 PID` prints every thread's stack into the replica's log (hang diagnosis).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stall_point = os.environ.get("CRONSOURCE_STALL")
    stall = Stall(stall_point, os.environ["CRONSOURCE_STALL_ARM"]) if stall_point else None
    stats = os.environ.get("CRONSOURCE_FAULT_STATS")
    if stats:
        record_stats(stats, stall)
    if stall is not None:
        install_stall(stall)
    spec = os.environ.get("CRONSOURCE_FAULT")
    if spec:
        install(Fault(spec))
    sys.argv[0] = "cronsource"
    cli.main()


if __name__ == "__main__":
    main()
