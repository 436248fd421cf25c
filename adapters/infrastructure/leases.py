"""Leases: how a replica that stops answering, but keeps its connection, loses its shards.

Shard ownership and the projector role are PostgreSQL session advisory locks
(adapters/infrastructure/shards.py). A replica that dies loses its session, and the server releases
its locks. A replica that is frozen (SIGSTOP, a paused VM, a debugger, a swap storm) does not: its
TCP connection stays open, the server keeps its session, and its shards fire for nobody until it
is killed. So each replica also holds a lease: a row of `cronsource_leases` (created by
`migrate`, in the store's schema) that it renews every `renew_every` seconds.

- A row not renewed for its `lease_seconds` has lapsed. That is judged by the server's clock
  (`now()` against the `renewed_at` it wrote itself), so replicas' clocks are never compared.
  The next replica to rebalance terminates the backends the row names (`pg_terminate_backend`;
  the server then releases their advisory locks, and rolls back a transaction one of them had
  open) and deletes the row. The freed shards are taken at the rebalance after, as after a crash.
- The lapsed replica, when it runs again, must not act on what it held. It measures its own
  lease on its monotonic clock from the moment before its last successful renewal (at or before
  the `renewed_at` the server recorded) and gives up its shards and projector role once
  `renew_deadline` has passed, two thirds of the lease: before any other replica may take them.
  Kubernetes' leader election keeps the same margin (lease 15 s, renew deadline 10 s, retry 2 s).

A backend is terminated only while it holds the lapsed replica's member lock: a pid the server
has since given to another session is never touched.

Privileges: `pg_terminate_backend` is allowed on sessions of the caller's own role (or of a
role it has the privileges of), or with the role `pg_signal_backend`; superusers' sessions only
by superusers (docs/operator-guide.md, "Frozen replicas").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.infrastructure.store.conninfo import with_defaults

#: Seconds a replica may go without renewing before the others take its shards (`run
#: --lease-duration`). Long enough that a busy server or a short network hiccup does not move
#: shards; short enough that a frozen replica's CronWorkflows are decided again well inside the
#: 30 s late tolerance, so that its ticks still fire on time.
LEASE_SECONDS = 15.0
#: The shortest lease `run` accepts: below it, a renewal every `renew_every` leaves no room for
#: one slow round trip before the renew deadline.
MIN_LEASE_SECONDS = 3.0

MISSING = (
    "the store has no lease table (cronsource_leases): run `cronsource migrate` with this"
    " version before starting its replicas"
)

#: The lease has lapsed, by the server's clock.
_LAPSED = "renewed_at + lease_seconds * interval '1 second' < now()"


class LeaseLost(RuntimeError):
    """This replica's lease lapsed (or its lock session is gone): what it decided under the
    ownership it held must not be written. It re-joins at its next rebalance."""


class LeaseTableMissing(RuntimeError):
    """The store was migrated by a version without leases."""


@dataclass(frozen=True)
class Lapsed:
    """Another replica's lease that was not renewed in time."""

    member: int
    holder: str
    pids: list[int]
    renewed_at: datetime
    overdue: float  # seconds past the end of the lease, by the server's clock
    lease_seconds: float


class Lease:
    """This replica's lease: its row, and how long it may trust it on its own clock."""

    def __init__(
        self,
        seconds: float = LEASE_SECONDS,
        monotonic: Callable[[], float] = SYSTEM_CLOCK.monotonic,
    ) -> None:
        self.seconds = seconds
        self.monotonic = monotonic
        self.member = 0
        #: monotonic() just before the last renewal the server acknowledged; None: no lease.
        self.renewed: float | None = None
        #: Seconds since the replica's loop last finished a turn (None: not yet), written as
        #: `last_turn` with each renewal (`cronsource replicas`); set by whoever runs the loop.
        self.turn_age: Callable[[], float | None] | None = None
        #: Whether the lease table has `last_turn` (a store migrated before it has not: the
        #: renewals then leave it out rather than fail).
        self._has_last_turn = False

    @property
    def renew_every(self) -> float:
        return min(2.0, self.seconds / 5)

    @property
    def renew_deadline(self) -> float:
        """Seconds after its last renewal this replica stops trusting its lease (see the
        module docstring): the last third is the margin for a commit already on its way and
        for the two clocks running at slightly different rates."""
        return self.seconds * 2 / 3

    def age(self) -> float | None:
        """Seconds since the last acknowledged renewal; None while it holds no lease."""
        return None if self.renewed is None else self.monotonic() - self.renewed

    def valid(self) -> bool:
        age = self.age()
        return age is not None and age < self.renew_deadline

    def join(self, conn: Any, member: int, holder: str) -> None:
        """Write our row, naming the backend that holds our locks (this session)."""
        import psycopg  # PostgreSQL's only (store/conninfo.py)

        t = self.monotonic()
        try:
            conn.execute(
                "INSERT INTO cronsource_leases (member, holder, pids, lease_seconds, renewed_at)"
                " VALUES (%s, %s, ARRAY[pg_backend_pid()], %s, now())"
                " ON CONFLICT (member) DO UPDATE SET holder = excluded.holder,"
                " pids = excluded.pids, lease_seconds = excluded.lease_seconds,"
                " renewed_at = excluded.renewed_at",
                (member, holder, self.seconds),
            )
        except psycopg.errors.UndefinedTable:
            raise LeaseTableMissing(MISSING) from None
        self._has_last_turn = (
            conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
                " AND table_name = 'cronsource_leases' AND column_name = 'last_turn'"
            ).fetchone()
            is not None
        )
        self.member, self.renewed = member, t

    def renew(self, conn: Any) -> bool:
        """Move `renewed_at` to the server's now; False if our row is gone (another replica
        found it lapsed and took over)."""
        t = self.monotonic()
        age = self.turn_age() if self.turn_age is not None else None
        if self._has_last_turn and age is not None:
            cur = conn.execute(
                "UPDATE cronsource_leases SET renewed_at = now(),"
                " last_turn = now() - %s * interval '1 second' WHERE member = %s",
                (max(0.0, age), self.member),
            )
        else:
            cur = conn.execute(
                "UPDATE cronsource_leases SET renewed_at = now() WHERE member = %s", (self.member,)
            )
        if cur.rowcount != 1:
            return False
        self.renewed = t
        return True

    def leave(self, conn: Any) -> None:
        conn.execute("DELETE FROM cronsource_leases WHERE member = %s", (self.member,))
        self.renewed = None


def lapsed(conn: Any, me: int) -> list[Lapsed]:
    """The other replicas' leases that lapsed, by the server's clock."""
    rows = conn.execute(
        "SELECT member, holder, pids, renewed_at,"
        " extract(epoch FROM now() - renewed_at) - lease_seconds, lease_seconds"
        f" FROM cronsource_leases WHERE member <> %s AND {_LAPSED} ORDER BY member",
        (me,),
    ).fetchall()
    return [
        Lapsed(int(m), str(h), [int(p) for p in pids], at, float(over), float(secs))
        for m, h, pids, at, over, secs in rows
    ]


def terminate(conn: Any, lease: Lapsed, member_class: int) -> list[int]:
    """Terminate the lapsed replica's backends that still hold its member lock; returns the
    pids terminated. Raises psycopg's InsufficientPrivilege when this role may not (the
    module docstring says which roles may)."""
    done: list[int] = []
    for pid in lease.pids:
        row = conn.execute(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.pid = %s"
            " AND l.classid::bigint = %s AND l.objid::bigint = %s AND l.objsubid = 2"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (pid, member_class, lease.member),
        ).fetchone()
        if row is not None and row[0]:
            done.append(pid)
    return done


def forget(conn: Any, lease: Lapsed) -> None:
    """Delete a lapsed row once its backends are gone (unless it was renewed meanwhile)."""
    conn.execute(
        "DELETE FROM cronsource_leases WHERE member = %s AND renewed_at = %s",
        (lease.member, lease.renewed_at),
    )


def check_table(conninfo: str, schema: str) -> None:
    """Raise LeaseTableMissing unless `migrate` made the lease table (`run` asks at start, so
    that a store migrated by an older version is named in one line instead of a shard worker
    failing every second)."""
    # The URL's own connect_timeout wins over ours (adapters/infrastructure/store/config.py
    # `with_defaults`).
    import psycopg
    from psycopg import sql

    with psycopg.connect(with_defaults(conninfo, connect_timeout=5), autocommit=True) as conn:
        name = sql.SQL("{}.cronsource_leases").format(sql.Identifier(schema or "public"))
        row = conn.execute(
            sql.SQL("SELECT to_regclass({})").format(sql.Literal(name.as_string(conn)))
        ).fetchone()
    if row is None or row[0] is None:
        raise LeaseTableMissing(MISSING)
