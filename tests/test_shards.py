"""Shard ownership on PostgreSQL is per database: replicas of another database on the same
server are not members, so they never leave shards of this one unowned."""

from __future__ import annotations

from adapters.shards import SHARDS, AdvisoryLockShards
from adapters.store import StoreConfig
from tests.pgserver import drop_database, fresh_database


def test_replicas_of_another_database_on_the_server_take_no_share(
    pg_url: str, pg_server_url: str
) -> None:
    other_url = fresh_database(pg_server_url)
    others = [
        AdvisoryLockShards(StoreConfig.parse(other_url).pg_conninfo, want_projector=False)
        for _ in range(3)
    ]
    ours = AdvisoryLockShards(StoreConfig.parse(pg_url).pg_conninfo, want_projector=False)
    try:
        for replica in others:
            replica.rebalance()  # three members alive on the other database
        ours.rebalance()
        # alone in its database, it holds every shard, whatever runs beside it on the server
        assert len(ours.owned) == SHARDS
    finally:
        ours.release()
        for replica in others:
            replica.release()
        drop_database(other_url)
