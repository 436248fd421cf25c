"""Decisions prepared ahead: tests/unit/test_prepared_decisions.py's tests
on a real PostgreSQL.

The same test functions, collected here: their `stores` marker gives them the server stores in
this tier and the embedded ones in the unit tier (tests/conftest.py)."""

from tests.unit.test_prepared_decisions import (  # noqa: F401 (collected here by pytest)
    test_a_burst_decided_in_advance_commits_first_and_looks_up_the_rest_after,
    test_a_cronworkflow_changed_after_the_decision_is_decided_again,
    test_a_decision_whose_instant_is_long_past_is_made_again,
    test_a_save_of_other_events_at_the_same_version_ignores_what_was_prepared,
    test_another_writers_change_the_due_index_shows_is_decided_again_unrefused,
    test_decided_ahead_committed_at_the_instant_and_never_before,
    test_our_own_write_after_the_decision_is_seen_without_a_refused_save,
    test_the_due_index_behind_our_own_save_is_not_trusted_until_our_next_due,
    test_the_warm_up_leaves_alone_what_a_decision_made_in_advance_holds,
    test_what_is_prepared_ahead_is_stored_as_a_save_would_store_it,
)
