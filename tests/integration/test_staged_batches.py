"""Staged batches: tests/unit/test_staged_batches.py's tests on a real PostgreSQL.

The same test functions, collected here: their `stores` marker gives them the server stores in
this tier and the embedded ones in the unit tier (tests/conftest.py)."""

from tests.unit.test_staged_batches import (  # noqa: F401 (collected here by pytest)
    test_a_batch_refused_every_time_is_saved_one_by_one,
    test_a_burst_stops_at_a_failed_append_with_the_batches_before_it_settled,
    test_a_command_saved_before_the_aftermath_is_not_undone,
    test_a_refused_batch_is_decided_again_as_a_batch,
    test_the_store_has_a_batch_before_its_aftermath,
)
