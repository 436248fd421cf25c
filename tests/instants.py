"""Named instants (aware UTC) shared by tests, so a DST case reads as its name, not a number.

Each comment gives the local wall time the instant stands for; `test_schedule.py` checks
that the names are true (`test_named_instants_are_what_their_names_say`). Add, don't remove:
other test modules import these.
"""

from datetime import UTC, datetime


def _utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# America/New_York, 2026-03-08: at 02:00 EST the clock jumps to 03:00 EDT; 02:00-02:59 do not
# exist that day.
NY_SPRING_FORWARD = _utc(2026, 3, 8, 7, 0)
#: Where `30 2 * * *` fires that day under the default DST policy: the end of the gap, 03:00 EDT.
NY_SPRING_FORWARD_0230 = NY_SPRING_FORWARD
NY_SPRING_DAY_BEFORE_0230 = _utc(2026, 3, 7, 7, 30)  # 02:30 EST
NY_SPRING_DAY_AFTER_0230 = _utc(2026, 3, 9, 6, 30)  # 02:30 EDT

# America/New_York, 2026-11-01: at 02:00 EDT the clock falls back to 01:00 EST; 01:00-01:59
# happen twice.
NY_FALL_BACK = _utc(2026, 11, 1, 6, 0)
NY_FALL_BACK_0130_FIRST = _utc(2026, 11, 1, 5, 30)  # 01:30 EDT
NY_FALL_BACK_0130_SECOND = _utc(2026, 11, 1, 6, 30)  # 01:30 EST
NY_FALL_DAY_BEFORE_0130 = _utc(2026, 10, 31, 5, 30)  # 01:30 EDT
NY_FALL_DAY_AFTER_0130 = _utc(2026, 11, 2, 6, 30)  # 01:30 EST

# Australia/Lord_Howe, 2026-04-05: at 02:00 +11:00 the clock falls back 30 minutes to
# 01:30 +10:30; 01:30-01:59 happen twice.
LORD_HOWE_FALL_BACK = _utc(2026, 4, 4, 15, 0)
LORD_HOWE_0157_FIRST = _utc(2026, 4, 4, 14, 57)  # 01:57 +11:00
LORD_HOWE_0157_SECOND = _utc(2026, 4, 4, 15, 27)  # 01:57 +10:30
LORD_HOWE_0217 = _utc(2026, 4, 4, 15, 47)  # 02:17 +10:30, where croniter wrongly goes next

# Europe/Berlin, Europe/London and Europe/Dublin change together at 01:00Z: on 2026-03-29
# forward (Berlin 02:00 -> 03:00, London/Dublin 01:00 -> 02:00), on 2026-10-25 back (Berlin
# 03:00 -> 02:00, London/Dublin 02:00 -> 01:00). Dublin's winter time is tzdata's "negative
# DST", which must not matter to us.
EU_SPRING_FORWARD = _utc(2026, 3, 29, 1, 0)
EU_FALL_BACK = _utc(2026, 10, 25, 1, 0)

# America/Santiago changes at midnight: 2026-04-05 00:00 -03 falls back to 23:00 -04 on
# Saturday 04-04 (23:00-23:59 twice); 2026-09-06 00:00 -04 jumps to 01:00 -03 (no midnight).
SANTIAGO_FALL_BACK = _utc(2026, 4, 5, 3, 0)
SANTIAGO_SPRING_FORWARD = _utc(2026, 9, 6, 4, 0)

# Pacific/Auckland: 2026-04-05 03:00 NZDT falls back to 02:00 NZST; 2026-09-27 02:00 NZST
# jumps to 03:00 NZDT.
AUCKLAND_FALL_BACK = _utc(2026, 4, 4, 14, 0)
AUCKLAND_SPRING_FORWARD = _utc(2026, 9, 26, 14, 0)

# Starts of the end-to-end scenarios in tests/scenarios.
SCENARIO_DST_SPRING_START = _utc(2026, 3, 7)
SCENARIO_DST_FALL_START = _utc(2026, 10, 31)
SCENARIO_FIXED_OFFSET_START = _utc(2026, 1, 1)
SCENARIO_MULTIPLE_START = datetime(2026, 5, 4, 9, 59, 30, tzinfo=UTC)

#: A Monday, 10:00Z: the instant most test CronWorkflows are born at (their first tick, under
#: `* * * * *`, is T0 + 1 minute).
T0 = _utc(2026, 5, 4, 10, 0)


def at(hhmmss: str) -> datetime:
    """`HH:MM:SS` on T0's day, 2026-05-04, in UTC: for tests that read as a timetable."""
    h, m, s = (int(x) for x in hhmmss.split(":"))
    return datetime(2026, 5, 4, h, m, s, tzinfo=UTC)
