"""Who may move the projections' positions: at most one process of a store at a time.

The lock differs by store (a flock beside a SQLite file, a PostgreSQL session advisory lock,
nothing for an in-process store, or the projector role a `run` replica's shard ownership
holds), and the projection runner (adapters/runtime/projector.py) asks only this protocol.
"""

from __future__ import annotations

import fcntl
import os
import threading
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from cronsource.adapters.infrastructure.pgpool import broken_connection
from cronsource.adapters.infrastructure.store.conninfo import with_defaults

if TYPE_CHECKING:
    import psycopg

    from cronsource.adapters.infrastructure.store.config import StoreConfig

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
    the process dies, even by SIGKILL, so a crashed `run` never leaves the role taken.
    The holder writes its replica identity into the file (`holder`; empty for a command),
    which `cronsource replicas` reads while the lock is held elsewhere."""

    def __init__(self, path: str, holder: str | None = None) -> None:
        self.path = path
        self.holder = holder
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
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, (self.holder or "").encode(), 0)
            except OSError:
                pass  # the name is for people; the lock is what counts
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

    def holder_name(self) -> str:
        """The identity the holder wrote (empty: none, or a command catching up)."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                return f.read(512).strip()
        except OSError:
            return ""

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
        import psycopg  # PostgreSQL's only (store/conninfo.py)

        if self._held:
            return True
        for last in (False, True):
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(
                    with_defaults(self.conninfo, connect_timeout=5), autocommit=True
                )
            try:
                row = self._conn.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)", (PROJECTOR_LOCK_CLASS, self.key)
                ).fetchone()
                break
            except psycopg.Error as e:
                self.close()  # the server went away, and the lock with the session
                # Not held, so nothing was lost with it: a session that died while idle
                # (the server restarted) is made again once, not a failed command.
                if last or not broken_connection(e):
                    raise
        self._held = bool(row and row[0])
        return self._held

    def release(self) -> None:
        import psycopg

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


def lock_for(config: StoreConfig, holder: str | None = None) -> ProjectorLock:
    """The projector lock of this store; `holder` is the replica identity a SQLite `run`
    writes into its lock file."""
    if config.kind == "postgresql":
        return AdvisoryLock(config.pg_conninfo, config.pg_schema)
    if config.kind == "sqlite":
        return FileLock(f"{config.sqlite_path}.projector-lock", holder)
    return InProcessLock()
