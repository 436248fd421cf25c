"""Calendars on a real PostgreSQL: tests/unit/test_calendars.py's store tests (the read model
passing over calendar events, a calendar changed after a decision made in advance, an apply
naming an unknown calendar refused with nothing stored), collected here so their `stores`
marker gives them the server store (tests/conftest.py)."""

from tests.unit.test_calendars import (  # noqa: F401 (collected here by pytest)
    test_a_calendar_changed_after_a_decision_made_in_advance_is_read_at_the_instant,
    test_apply_refuses_a_cronworkflow_naming_an_unknown_calendar_and_stores_nothing,
    test_the_read_model_passes_over_calendar_events,
)
