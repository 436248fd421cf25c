"""tests/unit/test_backfill_index.py on a real PostgreSQL, where the race it pins was found:
a projection committed between the read model's reads hid fired ticks from a backfill."""

from tests.unit.test_backfill_index import (  # noqa: F401 (collected here by pytest)
    test_a_projection_between_the_read_models_reads_hides_no_fired_tick,
)
