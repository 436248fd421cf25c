"""Which replica decides which CronWorkflows: a work split, never a correctness mechanism.

Two replicas deciding the same CronWorkflow is safe (the version check rejects the stale one);
the split only saves the wasted loads and retries. On PostgreSQL each replica holds session
advisory locks: one "member" lock that says it is alive, one lock per shard it owns, and maybe
the projector lock, all on one session of its own. A replica that dies (even by SIGKILL) loses
its session and so its locks at once; the others see fewer members at their next rebalance and
take the freed shards. Take-over time is therefore one rebalance period (REBALANCE_SECONDS)
after PostgreSQL notices the closed connection.

A replica that is frozen keeps its session. So each one also renews a lease
(adapters/infrastructure/leases.py) from a thread of its own; the others terminate the session of a
replica whose lease lapsed and take its shards at the rebalance after. A replica that runs again
after its lease lapsed gives up everything it held before it writes: the scheduler asks
`check_lease` before each commit, the projector role lapses with the lease, and the projections
write on the lock session itself (`projector_transaction`), which a replica that lost the role no
longer has.
"""

from __future__ import annotations

import logging
import math
import os
import random
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol
from uuid import UUID

from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.infrastructure import leases
from cronsource.adapters.infrastructure.leases import LEASE_SECONDS, Lease, LeaseLost
from cronsource.adapters.infrastructure.locks import (
    PROJECTOR_LOCK_CLASS,
    InProcessLock,
    ProjectorLock,
    projector_lock_key,
)
from cronsource.adapters.infrastructure.store.conninfo import with_defaults

SHARDS = 64
REBALANCE_SECONDS = 1.0
_MEMBER_CLASS = 0x6373  # 'cs': advisory lock class of members
_SHARD_CLASS = 0x6374  # 'ct': advisory lock class of shards
#: Member keys below this are replicas that schedule; a replica that only projects
#: (`cronsource project`, `run --role projector`) takes its member key above it, so that it
#: is alive and leased like the others but not counted when the shards are shared out (it
#: would hold shards it never decides) nor as a scheduler running.
SCHEDULING_MEMBERS = 2**30

log = logging.getLogger("cronsource")


def shard_of(cron_id: UUID | str, shards: int = SHARDS) -> int:
    return (cron_id.int if isinstance(cron_id, UUID) else UUID(cron_id).int) % shards


class Ownership(Protocol):
    def owns(self, cron_id: UUID | str) -> bool: ...

    def rebalance(self) -> None: ...

    def is_projector(self) -> bool: ...

    def release(self) -> None: ...

    def check_lease(self) -> None:
        """Raise LeaseLost if this replica may no longer write what it decided with the
        shards it holds (the scheduler asks before each commit)."""
        ...


class SoleOwner:
    """An embedded store has one scheduler process; it owns every shard. It projects while it
    holds `projector_lock` (on SQLite a file lock, so a second `run` or a CLI command on the
    same file does not project beside it; adapters/runtime/projector.py)."""

    def __init__(self, projector_lock: ProjectorLock | None = None) -> None:
        self.projector_lock = projector_lock or InProcessLock()

    def owns(self, cron_id: UUID | str) -> bool:
        return True

    def rebalance(self) -> None:
        pass

    def is_projector(self) -> bool:
        return self.projector_lock.try_acquire()

    def release(self) -> None:
        self.projector_lock.release()

    def check_lease(self) -> None:
        pass  # one process, no lease: nobody else can take its shards

    @property
    def owned(self) -> set[int]:
        return set(range(SHARDS))


class ProjectorFenced(LeaseLost):
    """A projection write by a replica that does not hold the projector role (any more)."""


class AdvisoryLockShards:
    """Shard ownership through PostgreSQL session advisory locks, under a lease (see the
    module docstring). `monotonic` is the clock the lease is measured on (tests pass their
    own); `renew_in_background=False` leaves the renewals to the caller (`renew`)."""

    def __init__(
        self,
        conninfo: str,
        shards: int = SHARDS,
        want_projector: bool = True,
        schema: str = "",
        *,
        want_shards: bool = True,
        lease_seconds: float = LEASE_SECONDS,
        monotonic: Callable[[], float] = SYSTEM_CLOCK.monotonic,
        renew_in_background: bool = True,
        holder: str | None = None,
    ) -> None:
        self.conninfo = conninfo
        self.schema = schema
        self.projector_key = projector_lock_key(schema)
        self.shards = shards
        self.want_projector = want_projector
        self.want_shards = want_shards
        self.lease = Lease(lease_seconds, monotonic)
        #: This replica's identity, written in its lease row: how metrics and `replicas`
        #: name the backend that holds its locks (adapters/infrastructure/replica.py).
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}"
        self.owned: set[int] = set()
        self._projector = False
        self._conn: Any = None
        # One session, several threads: the loop's rebalance, the renewals, the scheduler's
        # check before a commit, the projections' writes. Reentrant: a write that finds the
        # lease lapsed drops the session from inside the lock.
        self._lock = threading.RLock()
        self._renew_in_background = renew_in_background
        self._renewer: threading.Thread | None = None
        self._stopping = threading.Event()
        #: Times this replica gave up its shards because its lease lapsed or its lock session
        #: was lost (the metric cronsource_leases_lost_total).
        self.leases_lost = 0
        #: Lapsed replicas whose backends this one terminated, and terminations the server
        #: refused for want of privilege (cronsource_lease_takeovers_total{result}).
        self.takeovers = 0
        self.takeovers_refused = 0
        self._refusals_logged: set[int] = set()

    def _connect(self) -> Any:
        import psycopg  # PostgreSQL's only (store/conninfo.py)
        from psycopg import sql

        if self._conn is None or self._conn.closed:
            self.owned, self._projector = set(), False
            conn = psycopg.connect(with_defaults(self.conninfo, connect_timeout=5), autocommit=True)
            try:
                if self.schema:
                    # The projections write on this session (projector_transaction), and the
                    # lease table lives in the store's schema.
                    conn.execute(
                        sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema))
                    )
                self.lease.join(conn, self._take_member_lock(conn), self.holder)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            self._start_renewer()
        return self._conn

    def _take_member_lock(self, conn: Any) -> int:
        """A member key nobody holds: the lock that says we are alive, and our lease's key."""
        low, high = (1, SCHEDULING_MEMBERS) if self.want_shards else (SCHEDULING_MEMBERS, 2**31 - 1)
        while True:
            key = random.randrange(low, high)
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (_MEMBER_CLASS, key)
            ).fetchone()
            if row[0]:
                return key

    def _start_renewer(self) -> None:
        if not self._renew_in_background or self._renewer is not None:
            return
        # Its own thread, not the loop's turn: a long turn (a burst of thousands of fires)
        # must not look like a frozen replica.
        self._renewer = threading.Thread(target=self._renew_loop, name="lease", daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        while not self._stopping.wait(self.lease.renew_every):
            try:
                self.renew()
            except Exception as e:  # never let the thread die: the lease would lapse
                log.warning("lease renewal failed: %s: %s", type(e).__name__, e)

    def renew(self) -> bool:
        """Renew the lease; False when there is none to renew, or it was lost (then this
        replica holds nothing until its next rebalance re-joins)."""
        import psycopg

        with self._lock:
            conn = self._conn
            if conn is None or conn.closed:
                return False
            if not self.lease.valid():
                self._lose("its lease lapsed")
                return False
            try:
                renewed = self.lease.renew(conn)
            except psycopg.Error as e:
                self._lose(f"its lock session failed ({type(e).__name__})")
                return False
            if not renewed:
                self._lose("another replica removed its lease")
            return renewed

    def _lose(self, why: str) -> None:
        """Give up every lock this replica holds and say so; the next rebalance re-joins."""
        age = self.lease.age()
        log.warning(
            "shards: %s (last renewal %s ago, lease %gs): giving up %d shards%s and"
            " re-joining; nothing decided under them is written",
            why,
            "never" if age is None else f"{age:.1f}s",
            self.lease.seconds,
            len(self.owned),
            " and the projector role" if self._projector else "",
        )
        self.leases_lost += 1
        self._drop()

    def _members(self, conn: Any, gone: set[int]) -> int:
        row = conn.execute(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = %s AND objid::bigint < %s AND granted AND NOT (pid = ANY(%s))"
            # Advisory locks belong to one database, but pg_locks lists the whole server's:
            # counting another database's replicas left shards of this one unowned.
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (_MEMBER_CLASS, SCHEDULING_MEMBERS, sorted(gone)),
        ).fetchone()
        return max(1, int(row[0]))

    def _take_over(self, conn: Any) -> set[int]:
        """Terminate the sessions of replicas whose lease lapsed; returns the pids that no
        longer count as members (the server may take a moment to release their locks: their
        shards are taken at the next rebalance)."""
        import psycopg

        gone: set[int] = set()
        for lapsed in leases.lapsed(conn, self.lease.member):
            gone.update(lapsed.pids)
            try:
                pids = leases.terminate(conn, lapsed, _MEMBER_CLASS)
            except psycopg.errors.InsufficientPrivilege as e:
                # Not ours to end (another role, and no pg_signal_backend): its shards stay
                # with it until it runs again or dies. Said once per lapsed replica; the
                # metric cronsource_shards_lapsed shows them meanwhile.
                self.takeovers_refused += 1
                if lapsed.member not in self._refusals_logged:
                    self._refusals_logged.add(lapsed.member)
                    log.error(
                        "shards: replica %s has not renewed its lease for %.1fs but this role"
                        " may not terminate its PostgreSQL backend(s) %s (%s); run every"
                        " replica as the same role, or GRANT pg_signal_backend",
                        lapsed.holder,
                        lapsed.overdue + lapsed.lease_seconds,
                        lapsed.pids,
                        str(e).strip().splitlines()[0],
                    )
                continue
            leases.forget(conn, lapsed)
            if pids:
                self.takeovers += 1
                log.warning(
                    "shards: replica %s has not renewed its lease for %.1fs (lease %gs):"
                    " terminated its PostgreSQL backend(s) %s; its shards and roles are free",
                    lapsed.holder,
                    lapsed.overdue + lapsed.lease_seconds,
                    lapsed.lease_seconds,
                    pids,
                )
        return gone

    def rebalance(self) -> None:
        """Hold about shards/members shards; take free ones, give back extras. First give up
        everything if our own lease lapsed, and end the sessions of replicas whose lease did."""
        with self._lock:
            try:
                if self._conn is not None and not self.lease.valid():
                    self._lose("its lease lapsed")
                conn = self._connect()
                before, was_projector = set(self.owned), self._projector
                gone = self._take_over(conn)
                members = self._members(conn, gone)
                target = math.ceil(self.shards / members) if self.want_shards else 0
                if len(self.owned) > target:
                    for s in sorted(self.owned)[target:]:
                        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (_SHARD_CLASS, s))
                        self.owned.discard(s)
                if len(self.owned) < target:
                    start = random.randrange(self.shards)
                    for i in range(self.shards):
                        s = (start + i) % self.shards
                        if s in self.owned:
                            continue
                        got = conn.execute(
                            "SELECT pg_try_advisory_lock(%s, %s)", (_SHARD_CLASS, s)
                        ).fetchone()[0]
                        if got:
                            self.owned.add(s)
                            if len(self.owned) >= target:
                                break
                if self.want_projector and not self._projector:
                    self._projector = bool(
                        conn.execute(
                            "SELECT pg_try_advisory_lock(%s, %s)",
                            (PROJECTOR_LOCK_CLASS, self.projector_key),
                        ).fetchone()[0]
                    )
                self._log_moves(before, was_projector, members)
            except Exception:
                # Lost the connection: PostgreSQL released our locks with it, so we hold
                # nothing until we reconnect (another replica may take over meanwhile).
                self._drop()
                raise

    def _log_moves(self, before: set[int], was_projector: bool, members: int) -> None:
        """Say what this rebalance took and gave back: an operator reading one replica's log
        sees when its share changed, and why (how many replicas it counted)."""
        taken, released = len(self.owned - before), len(before - self.owned)
        if taken or released:
            log.info(
                "shards: replica %s %s; owns %d of %d (%d replica%s)",
                self.holder,
                " and ".join(
                    w
                    for w in (
                        f"took {taken} shard{'s' * (taken != 1)}" if taken else "",
                        f"released {released} shard{'s' * (released != 1)}" if released else "",
                    )
                    if w
                ),
                len(self.owned),
                self.shards,
                members,
                "s" * (members != 1),
                extra={"shardsTaken": taken, "shardsReleased": released, "shards": len(self.owned)},
            )
        if self._projector and not was_projector:
            log.info("shards: replica %s took the projector role", self.holder)

    def check_lease(self) -> None:
        """Before the scheduler commits a batch: the lease is valid on our own clock, and the
        session that holds our locks still answers. Otherwise give up everything and raise
        LeaseLost, so the batch is not written (its CronWorkflows may be someone else's now).

        A batch is always decided and committed within one scheduler step, and a re-join
        happens only at a rebalance, between steps; decisions made ahead for the next instant
        are dropped when their instant is more than a second past (PREPARED_MAX_DELAY), far
        less than a lease. So a batch that passes this check was decided under the lease
        that is checked.
        """
        import psycopg

        with self._lock:
            conn = self._conn
            if conn is None or conn.closed:
                raise LeaseLost("no lease held now: this replica re-joins at its next rebalance")
            if not self.lease.valid():
                age = self.lease.age() or 0.0
                self._lose("its lease lapsed")
                raise LeaseLost(
                    f"lease lapsed ({age:.1f}s since its last renewal, renew deadline"
                    f" {self.lease.renew_deadline:g}s): the batch is not committed"
                )
            try:
                conn.execute("SELECT 1")
            except psycopg.Error as e:
                self._lose(f"its lock session failed ({type(e).__name__})")
                raise LeaseLost("the session holding this replica's locks is gone") from None

    @contextmanager
    def projector_transaction(self) -> Iterator[Any]:
        """A transaction for the projections' writes, on the session that holds the projector
        lock (`ReadModel.write_through`). A session advisory lock is released only with its
        session (we never unlock the projector lock while connected), so a write that commits
        here was made by the projector; one whose session was terminated because its lease
        lapsed fails, even if it was frozen halfway through. Raises ProjectorFenced when this
        replica does not hold the role or its lease lapsed."""
        with self._lock:
            conn = self._conn
            if conn is None or conn.closed or not self._projector:
                raise ProjectorFenced("this replica does not hold the projector role")
            if not self.lease.valid():
                self._lose("its lease lapsed")
                raise ProjectorFenced("lease lapsed: the projector role is given up")
            try:
                with conn.transaction():
                    yield conn
            except Exception:
                if conn.broken or conn.closed:
                    self._lose("its lock session failed during a projection write")
                raise

    def _drop(self) -> None:
        self.owned, self._projector = set(), False
        self.lease.renewed = None
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
        self._conn = None

    def owns(self, cron_id: UUID | str) -> bool:
        return shard_of(cron_id, self.shards) in self.owned

    def is_projector(self) -> bool:
        return self._projector and self.lease.valid()

    def release(self) -> None:
        """SIGTERM: delete our lease and end the session (which releases every lock)."""
        import psycopg

        self._stopping.set()
        with self._lock:
            if self._conn is not None and not self._conn.closed:
                try:
                    self.lease.leave(self._conn)
                except psycopg.Error:
                    pass  # the row lapses and the others delete it
            self._drop()
