"""Snapshots bound every load: tests/unit/test_snapshots.py's tests
on a real PostgreSQL.

The same test functions, collected here: their `stores` marker gives them the server stores in
this tier and the embedded ones in the unit tier (tests/conftest.py)."""

from tests.unit.test_snapshots import (  # noqa: F401 (collected here by pytest)
    test_a_load_reads_the_latest_snapshot_and_the_events_after_it,
    test_a_replica_that_stops_leaves_the_next_start_no_tail_to_replay,
    test_the_snapshot_state_round_trips_every_field,
)
