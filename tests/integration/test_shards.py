"""Shard ownership on a PostgreSQL server that holds more than one cronsource store: the
replicas of one store split its shards among themselves only. Advisory locks are per database,
so the members of another store on the same server must not count (they would shrink each
replica's share and leave shards, and so CronWorkflows, with no owner)."""

from __future__ import annotations

import pytest

from cronsource.adapters.bootstrap import migrate
from cronsource.adapters.infrastructure.shards import SHARDS, AdvisoryLockShards
from cronsource.adapters.infrastructure.store.config import StoreConfig
from tests import pgserver

pytestmark = pytest.mark.postgres


def test_members_of_another_database_leave_a_sole_replica_every_shard(
    pg_url: str, pg_server_url: str
) -> None:
    other = pgserver.fresh_database(pg_server_url)
    migrate(StoreConfig.parse(pg_url))
    migrate(StoreConfig.parse(other))
    ours = AdvisoryLockShards(StoreConfig.parse(pg_url).pg_conninfo)
    theirs = [AdvisoryLockShards(StoreConfig.parse(other).pg_conninfo) for _ in range(2)]
    try:
        for replica in theirs:
            replica.rebalance()
        ours.rebalance()
        for replica in theirs:
            replica.rebalance()
        assert len(ours.owned) == SHARDS
        assert sorted(len(r.owned) for r in theirs) == [SHARDS // 2, SHARDS // 2]
    finally:
        for replica in [ours, *theirs]:
            replica.release()
        pgserver.drop_database(other)
