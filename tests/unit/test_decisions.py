"""Given/when/then tests of the pure scheduling rules (domain/decisions.py)."""

from datetime import timedelta

import pytest

from cronsource.domain.decisions import Fire, RunState, Skip, TickPolicy, decide_ticks
from tests.instants import at

MINUTES = [at(f"10:0{i}:00") for i in range(1, 6)]  # 10:01 .. 10:05


def test_on_time_tick_fires():
    out = decide_ticks([at("10:01:00")], at("10:01:05"), TickPolicy(), RunState())
    assert out.decisions == [Fire(at("10:01:00"), "schedule")]
    assert out.decided_until == at("10:01:00")


def test_missed_ticks_without_deadline_are_skipped_as_one_range():
    out = decide_ticks(MINUTES, at("10:05:40"), TickPolicy(), RunState())
    assert out.decisions == [Skip(at("10:01:00"), at("10:05:00"), 5, "DeadlineExceeded")]


def test_deadline_runs_only_the_latest_missed_tick():
    pol = TickPolicy(deadline=timedelta(seconds=600))
    out = decide_ticks(MINUTES, at("10:05:40"), pol, RunState())
    assert out.decisions == [
        Skip(at("10:01:00"), at("10:04:00"), 4, "CatchupLimit"),
        Fire(at("10:05:00"), "catchup"),
    ]


def test_latest_missed_tick_past_its_deadline_is_not_run():
    pol = TickPolicy(deadline=timedelta(seconds=30))
    out = decide_ticks(MINUTES, at("10:05:40"), pol, RunState())
    # Every missed tick gets a decision, and none runs: one folded skip for all five.
    assert out.decisions == [Skip(at("10:01:00"), at("10:05:00"), 5, "DeadlineExceeded")]


def test_catchup_all_runs_the_k_most_recent_oldest_first():
    pol = TickPolicy(deadline=timedelta(seconds=600), catchup_all=True, max_catchup=2)
    out = decide_ticks(MINUTES, at("10:05:40"), pol, RunState())
    assert out.decisions == [
        Skip(at("10:01:00"), at("10:03:00"), 3, "CatchupLimit"),
        Fire(at("10:04:00"), "catchup"),
        Fire(at("10:05:00"), "catchup"),
    ]


def test_forbid_without_deadline_skips_at_once_when_a_run_is_active():
    out = decide_ticks(
        [at("10:01:00")], at("10:01:00"), TickPolicy(concurrency="Forbid"), RunState(("a",))
    )
    assert out.decisions == [Skip(at("10:01:00"), at("10:01:00"), 1, "ConcurrencyForbid")]


def test_forbid_with_deadline_waits_and_decides_nothing():
    pol = TickPolicy(concurrency="Forbid", deadline=timedelta(seconds=300))
    out = decide_ticks([at("10:01:00")], at("10:01:00"), pol, RunState(("a",)))
    assert out.decisions == [] and out.waiting and out.decided_until is None


def test_forbid_waiting_ticks_latest_runs_when_the_run_ends():
    pol = TickPolicy(concurrency="Forbid", deadline=timedelta(seconds=300))
    runs = RunState((), last_finished_at=at("10:03:30"))
    out = decide_ticks(MINUTES[:3], at("10:03:30"), pol, runs)
    assert out.decisions == [
        Skip(at("10:01:00"), at("10:02:00"), 2, "ConcurrencyForbid"),
        Fire(at("10:03:00"), "catchup"),
    ]


def test_replace_names_the_active_runs():
    out = decide_ticks(
        [at("10:01:00")], at("10:01:00"), TickPolicy(concurrency="Replace"), RunState(("a", "b"))
    )
    assert out.decisions == [Fire(at("10:01:00"), "schedule", ("a", "b"))]


@pytest.mark.parametrize(
    ("deadline", "expected"),
    [
        pytest.param(
            None,
            [Skip(at("06:06:00"), at("06:08:00"), 3, "Suspended")],
            id="no deadline: nothing runs",
        ),
        pytest.param(
            60,
            [Skip(at("06:06:00"), at("06:07:00"), 2, "Suspended"), Fire(at("06:08:00"), "catchup")],
            id="deadline: only the latest runs",
        ),
    ],
)
def test_resume_fires_at_most_one_catchup(deadline, expected):
    pol = TickPolicy(deadline=timedelta(seconds=deadline) if deadline else None, catchup_all=True)
    ticks = [at("06:06:00"), at("06:07:00"), at("06:08:00")]
    out = decide_ticks(ticks, at("06:08:20"), pol, RunState(), suspension="Suspended")
    assert out.decisions == expected


def test_when_false_skips_with_the_error_message():
    out = decide_ticks(
        [at("10:01:00")], at("10:01:00"), TickPolicy(), RunState(), when="cannot evaluate"
    )
    assert out.decisions == [
        Skip(at("10:01:00"), at("10:01:00"), 1, "WhenFalse", "cannot evaluate")
    ]


# A stall shorter than the late tolerance (issue 27, item 4): several ticks of one schedule
# are due at one decision, all less than 30 s late. Only the latest is on time.
EVERY_10S = [at("10:00:10"), at("10:00:20"), at("10:00:30")]


def test_after_a_stall_only_the_latest_due_tick_fires_on_time():
    out = decide_ticks(EVERY_10S, at("10:00:38"), TickPolicy(), RunState())
    assert out.decisions == [
        Skip(at("10:00:10"), at("10:00:20"), 2, "DeadlineExceeded"),
        Fire(at("10:00:30"), "schedule"),
    ]


def test_after_a_stall_a_deadline_does_not_add_a_catchup_beside_the_latest_tick():
    pol = TickPolicy(deadline=timedelta(seconds=600))
    out = decide_ticks(EVERY_10S, at("10:00:38"), pol, RunState())
    assert out.decisions == [
        Skip(at("10:00:10"), at("10:00:20"), 2, "CatchupLimit"),
        Fire(at("10:00:30"), "schedule"),
    ]


def test_after_a_stall_catchup_all_runs_the_capped_catchups_then_the_latest():
    pol = TickPolicy(deadline=timedelta(seconds=600), catchup_all=True, max_catchup=1)
    out = decide_ticks(EVERY_10S, at("10:00:38"), pol, RunState())
    assert out.decisions == [
        Skip(at("10:00:10"), at("10:00:10"), 1, "CatchupLimit"),
        Fire(at("10:00:20"), "catchup"),
        Fire(at("10:00:30"), "schedule"),
    ]


def test_a_forbid_tick_no_scheduler_reached_in_time_is_missed_not_forbid():
    """Forbid with a deadline and a run active: a tick the scheduler decides 25 minutes after
    its wait ended (the scheduler was down) was not decided in time (issue 21): it is
    DeadlineExceeded, never ConcurrencyForbid. One decided at the end of its wait did wait
    behind the run: ConcurrencyForbid."""
    pol = TickPolicy(concurrency="Forbid", deadline=timedelta(seconds=60))
    late = decide_ticks([at("10:01:00")], at("10:27:00"), pol, RunState(("a",)))
    assert late.decisions == [Skip(at("10:01:00"), at("10:01:00"), 1, "DeadlineExceeded")]
    waited = decide_ticks([at("10:01:00")], at("10:02:00"), pol, RunState(("a",)))
    assert waited.decisions == [Skip(at("10:01:00"), at("10:01:00"), 1, "ConcurrencyForbid")]
