"""The one owner of the projections: who may move their positions, and how readers wait.

A projection (status view, audit, due index, dispatch) follows the log with a position it
moves in the same transaction as its rows, and follows aggregates in a cache of its own that
two threads must not evolve at once. So exactly one thread in one process moves positions at a
time: the holder of the projector lock (`run`'s projector replica, or, when none runs, a short
catch-up by whoever needs fresh reads) inside this class's mutex.

Everyone else reads. A command returns a receipt with its log position (`CronService.receipt`);
a reader that must see its own write calls `settle(receipt)`:

- a projector is running in this process: wait until it has passed the position;
- none runs anywhere (a CLI command or `serve` on a quiet store): take the lock and project,
  at most `SETTLE_BUDGET` seconds of work, then let it go again so that a `run` started later
  can take it;
- another process holds it (`cronsource run`): wait until its position passes ours.

Either way the wait is bounded; `settle` returns whether the read model has caught up, and a
reader that got `False` says the status may be behind rather than hang.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

import psycopg

from cronsource.adapters.infrastructure.store.conninfo import with_defaults
from cronsource.domain.service import Receipt

if TYPE_CHECKING:
    from cronsource.adapters.infrastructure.store.config import StoreConfig
    from cronsource.adapters.runtime.engine import Engine

log = logging.getLogger("cronsource")

#: Seconds of projection work a reader may do itself when no projector runs. The read model
#: of a store nobody projected for a long time catches up over several commands (each says so)
#: instead of one command blocking for minutes.
SETTLE_BUDGET = 10.0
#: Seconds a reader waits for another projector to pass its position.
SETTLE_TIMEOUT = 10.0
#: How often a reader looks at the position while another process projects.
POLL_SECONDS = 0.05
#: PostgreSQL advisory-lock class of the projector role (adapters/infrastructure/shards.py takes the
#: same).
PROJECTOR_LOCK_CLASS = 0x6375


def projector_lock_key(schema: str) -> int:
    """The advisory-lock key of one schema's projector: each schema is its own log, so a
    simulation in a scratch schema never waits on the projector of the real one."""
    return zlib.crc32(schema.encode()) & 0x7FFFFFFF if schema else 0


class ProjectorLock(Protocol):
    """Held by at most one process of a store at a time."""

    def try_acquire(self) -> bool:
        """Take it if free (or already held by us); never blocks."""
        ...

    def release(self) -> None: ...

    def close(self) -> None:
        """Release, and let go of whatever holds the lock (a connection, a descriptor)."""
        ...


class InProcessLock:
    """`memory:` and simulations: the store lives in this process, so it is always ours."""

    def try_acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


class FileLock:
    """SQLite: an advisory `flock` on a file beside the database. The kernel drops it when
    the process dies, even by SIGKILL, so a crashed `run` never leaves the role taken."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        # `held_elsewhere` must not probe while another thread of this process takes the
        # lock: the probe would see our own hold and call it another process's.
        self._guard = threading.Lock()

    def try_acquire(self) -> bool:
        with self._guard:
            if self._fd is not None:
                return True
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            self._fd = fd
            return True

    def release(self) -> None:
        with self._guard:
            if self._fd is not None:
                os.close(self._fd)  # closing the descriptor drops the flock
                self._fd = None

    def held_elsewhere(self) -> bool:
        """Whether another process holds the lock now (a `cronsource run`, or for a moment
        a command catching up the read model); False while this process holds it. Probed
        with a lock taken and dropped at once, on a descriptor of its own."""
        with self._guard:
            if self._fd is not None:
                return False
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            finally:
                os.close(fd)  # drops the probe's lock if it got it
            return False

    def close(self) -> None:
        self.release()


class AdvisoryLock:
    """PostgreSQL: a session advisory lock on a connection of its own, which the server
    releases when the session ends (a dead process cannot keep it). The connection stays
    open between uses, so a reader that projects costs a lock round trip, not a connect."""

    def __init__(self, conninfo: str, schema: str) -> None:
        self.conninfo = conninfo
        self.key = projector_lock_key(schema)
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._held = False

    def try_acquire(self) -> bool:
        if self._held:
            return True
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                with_defaults(self.conninfo, connect_timeout=5), autocommit=True
            )
        try:
            row = self._conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (PROJECTOR_LOCK_CLASS, self.key)
            ).fetchone()
        except psycopg.Error:
            self.close()  # the server went away, and the lock with the session
            raise
        self._held = bool(row and row[0])
        return self._held

    def release(self) -> None:
        if self._held and self._conn is not None:
            self._held = False
            try:
                self._conn.execute(
                    "SELECT pg_advisory_unlock(%s, %s)", (PROJECTOR_LOCK_CLASS, self.key)
                )
            except psycopg.Error:
                self.close()

    def close(self) -> None:
        conn, self._conn, self._held = self._conn, None, False
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass


class RoleLock:
    """`run`: the projector role its shard ownership holds (adapters/infrastructure/shards.py);
    taken and given back by the ownership's rebalance, not by readers."""

    def __init__(self, is_projector: Callable[[], bool]) -> None:
        self.is_projector = is_projector

    def try_acquire(self) -> bool:
        return self.is_projector()

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass  # the ownership's own lock is the ownership's to close


def lock_for(config: StoreConfig) -> ProjectorLock:
    if config.kind == "postgresql":
        return AdvisoryLock(config.pg_conninfo, config.pg_schema)
    if config.kind == "sqlite":
        return FileLock(f"{config.sqlite_path}.projector-lock")
    return InProcessLock()


class Projector:
    """Moves the projections' positions; see the module docstring for who calls what."""

    def __init__(self, engine: Engine, lock: ProjectorLock) -> None:
        self.engine = engine
        self.lock = lock
        #: True while a projection worker of this process turns (`run`): readers here then
        #: wait for it instead of projecting themselves.
        self.worker_running = False
        #: True while a dispatch thread of this process creates the Workflows (`run`): the
        #: projection step then leaves the dispatcher's position to it.
        self.dispatch_thread = False
        self._mutex = threading.Lock()
        self._moved = threading.Condition(threading.Lock())

    # ------------------------------------------------------------------ positions

    def position(self) -> int:
        """How far the read model has projected the log."""
        app = self.engine.service
        return self.engine.view.max_tracking_id(app.name, "readmodel") or 0

    def dispatched(self) -> int:
        """How far the dispatcher has followed the log (every fire up to it has its Workflow)."""
        app = self.engine.service
        return self.engine.view.max_tracking_id(app.name, "dispatch") or 0

    def head(self) -> int:
        return self.engine.service.recorder.max_notification_id() or 0

    # ------------------------------------------------------------------ the projector's turn

    def step(
        self,
        now: datetime | None = None,
        budget: float | None = None,
        stop: Callable[[], bool] | None = None,
        *,
        dispatch: bool | None = None,
    ) -> int:
        """Project what is new, if this process holds the projector lock; returns how many
        events the read model took (0 when another process projects). The dispatcher
        follows too (`dispatch=None`) unless a dispatch thread of its own does
        (`dispatch_step`)."""
        if dispatch is None:
            dispatch = not self.dispatch_thread
        with self._mutex:
            if not self.lock.try_acquire():
                return 0
            done = self.engine.catch_up(now, budget=budget, stop=stop, dispatch=dispatch)
        if done:
            with self._moved:
                self._moved.notify_all()
        return done

    def dispatch_step(
        self,
        now: datetime | None = None,
        budget: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> int:
        """The dispatch thread's turn: create the Workflows of new fires, if this process
        holds the projector lock. The dispatcher keeps its own position and its own copies
        of the aggregates, so it needs no share of the read model's mutex."""
        if not self.lock.try_acquire():
            return 0
        return self.engine.dispatch(now, budget=budget, stop=stop)

    # ------------------------------------------------------------------ readers

    def settle(
        self,
        receipt: Receipt | int | None = None,
        *,
        wait: bool = True,
        timeout: float = SETTLE_TIMEOUT,
    ) -> bool:
        """Make the read model reflect `receipt` (a command's log position; None: the head
        of the log now), or wait until it does; True when it does.

        `wait=False` is for plain reads: when someone else projects, read what is there
        rather than wait (no write of the reader's own is at stake).
        """
        target = receipt.position if isinstance(receipt, Receipt) else receipt
        if target is None:
            target = self.head()
        if target <= 0 or self.position() >= target:
            return True
        if self.worker_running:
            return wait and self._wait_notified(target, timeout)
        projected = self._project_bounded(target, block=wait)
        if projected is not None:
            return projected
        if not wait:
            return False
        if self._wait_polled(target, timeout):
            return True
        log.warning(
            "the status view has not reached this command's write after %.0fs: the"
            " projector (`cronsource run`) is %d events behind the log",
            timeout,
            self.head() - self.position(),
        )
        return False

    def _project_bounded(self, target: int, *, block: bool) -> bool | None:
        """No projector runs here: project ourselves if nobody else does (at most
        SETTLE_BUDGET seconds), then give the lock back. None: another process projects.
        With `block=False` a plain read does not queue behind another thread's catch-up:
        it reads what is there (False)."""
        if not self._mutex.acquire(blocking=block):
            return False
        try:
            if self.position() >= target:
                return True
            if not self.lock.try_acquire():
                return None
            try:
                self.engine.catch_up(datetime.now(UTC), budget=SETTLE_BUDGET, dispatch=False)
            finally:
                self.lock.release()
        finally:
            self._mutex.release()
        behind = self.head() - self.position()
        if self.position() < target:
            log.warning(
                "the status view is %d events behind the log; no projector is running"
                " (start `cronsource run`) and this command projected for %.0fs",
                behind,
                SETTLE_BUDGET,
            )
            return False
        return True

    def _wait_notified(self, target: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._moved:
            while self.position() < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._moved.wait(min(left, POLL_SECONDS * 4))
        return True

    def _wait_polled(self, target: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.position() < target:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_SECONDS)
        return True

    def close(self) -> None:
        self.lock.close()
