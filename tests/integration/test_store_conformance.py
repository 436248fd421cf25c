"""One behaviour, three stores: tests/unit/test_store_conformance.py's tests
on a real PostgreSQL.

The same test functions, collected here: their `stores` marker gives them the server stores in
this tier and the embedded ones in the unit tier (tests/conftest.py)."""

from tests.unit.test_store_conformance import (  # noqa: F401 (collected here by pytest)
    test_a_failed_commit_leaves_no_decided_copy_behind,
    test_a_replica_shares_the_store,
    test_active_runs_come_from_an_upgraded_table_too,
    test_apply_creates_then_updates_and_is_idempotent,
    test_command_retries_on_fresh_state_after_losing_the_race,
    test_due_returns_ids_due_by_then_soonest_first,
    test_events_read_back_in_order_with_explicit_topics,
    test_load_many_equals_loading_one_by_one,
    test_read_model_statuses_and_audit,
    test_stale_commit_is_a_rejected_write_and_its_retry_records_nothing,
    test_stale_save_is_rejected_by_the_store,
    test_tick_fires_each_due_tick_once,
)
