"""Which replica decides which CronWorkflows: a work split, never a correctness mechanism.

Two replicas deciding the same CronWorkflow is safe (the version check rejects the stale one);
the split only saves the wasted loads and retries. On PostgreSQL each replica holds session
advisory locks: one "member" lock that says it is alive, and one lock per shard it owns. A
replica that dies (even by SIGKILL) loses its session and so its locks at once; the others see
fewer members at their next rebalance and take the freed shards. Take-over time is therefore one
rebalance period (REBALANCE_SECONDS) after PostgreSQL notices the closed connection.
"""

from __future__ import annotations

import math
import random
import threading
from typing import Any, Protocol
from uuid import UUID

SHARDS = 64
REBALANCE_SECONDS = 1.0
_MEMBER_CLASS = 0x6373  # 'cs': advisory lock class of members
_SHARD_CLASS = 0x6374  # 'ct': advisory lock class of shards
_PROJECTOR_CLASS = 0x6375  # 'cu': the single projector lock


def shard_of(cron_id: UUID | str, shards: int = SHARDS) -> int:
    return (cron_id.int if isinstance(cron_id, UUID) else UUID(cron_id).int) % shards


class Ownership(Protocol):
    def owns(self, cron_id: UUID | str) -> bool: ...

    def rebalance(self) -> None: ...

    def is_projector(self) -> bool: ...

    def release(self) -> None: ...


class SoleOwner:
    """An embedded store has one process; it owns everything."""

    def owns(self, cron_id: UUID | str) -> bool:
        return True

    def rebalance(self) -> None:
        pass

    def is_projector(self) -> bool:
        return True

    def release(self) -> None:
        pass

    @property
    def owned(self) -> set[int]:
        return set(range(SHARDS))


class AdvisoryLockShards:
    """Shard ownership through PostgreSQL session advisory locks (see the module docstring)."""

    def __init__(self, conninfo: str, shards: int = SHARDS, want_projector: bool = True) -> None:
        self.conninfo = conninfo
        self.shards = shards
        self.want_projector = want_projector
        self.member_key = random.randrange(1, 2**31 - 1)
        self.owned: set[int] = set()
        self._projector = False
        self._conn: Any = None
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        import psycopg

        if self._conn is None or self._conn.closed:
            self.owned, self._projector = set(), False
            self._conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5)
            self._conn.execute("SELECT pg_advisory_lock(%s, %s)", (_MEMBER_CLASS, self.member_key))
        return self._conn

    def _members(self, conn: Any) -> int:
        row = conn.execute(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = %s AND granted"
            # advisory locks are per database; another store's replicas are not members
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (_MEMBER_CLASS,),
        ).fetchone()
        return max(1, int(row[0]))

    def rebalance(self) -> None:
        """Hold about shards/members shards; take free ones, give back extras."""
        with self._lock:
            try:
                conn = self._connect()
                target = math.ceil(self.shards / self._members(conn))
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
                            "SELECT pg_try_advisory_lock(%s, 0)", (_PROJECTOR_CLASS,)
                        ).fetchone()[0]
                    )
            except Exception:
                # Lost the connection: PostgreSQL released our locks with it, so we hold
                # nothing until we reconnect (another replica may take over meanwhile).
                self._drop()
                raise

    def _drop(self) -> None:
        self.owned, self._projector = set(), False
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
        self._conn = None

    def owns(self, cron_id: UUID | str) -> bool:
        return shard_of(cron_id, self.shards) in self.owned

    def is_projector(self) -> bool:
        return self._projector

    def release(self) -> None:
        with self._lock:
            self._drop()
