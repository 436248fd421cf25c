"""A log that lost its tail is never written over: tests/unit/test_lost_tail.py's tests
on a real PostgreSQL.

The same test functions, collected here: their `stores` marker gives them the server stores in
this tier and the embedded ones in the unit tier (tests/conftest.py)."""

from tests.unit.test_lost_tail import (  # noqa: F401 (collected here by pytest)
    test_a_batch_with_one_stream_ahead_of_the_log_writes_nothing,
    test_a_command_after_a_lost_tail_decides_on_what_the_log_holds,
    test_an_append_must_follow_the_last_version_in_the_log,
    test_the_scheduler_after_a_lost_tail_fires_each_tick_once_without_gaps,
)
