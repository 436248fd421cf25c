"""tests/argo/history.py's verdicts, which the Argo interop e2e test rests on: which runs Argo's
own controller lost (taken off `active` by a write of its own while still running, never
listed again), and whether cronsource wrote a status after it let an object go. Each case is a
record as the API server would store it, written by hand."""

from __future__ import annotations

from tests.argo.history import (
    Version,
    cronsource_writes_after_release,
    dropped_by_argo,
    lost_before_adoption,
)


def v(
    rv: int,
    *active: str,
    argo: bool = True,
    seq: str | None = None,
    succeeded: int = 0,
) -> Version:
    return Version(rv, argo, seq, frozenset(active), succeeded, 0)


def test_a_run_argo_took_off_active_while_it_ran_and_never_listed_again_is_argos_loss() -> None:
    # Argo's syncAll works from lists taken before `b` was fired: counting `a` it writes
    # `active` without `b`, which ends (rv 30) before any later write lists it again.
    versions = [v(10, "a", "b"), v(20, succeeded=1), v(40, succeeded=1)]
    assert dropped_by_argo(versions, {"a": 15, "b": 30}) == {"b": 20}


def test_a_run_taken_off_after_it_ended_was_counted_not_lost() -> None:
    versions = [v(10, "a"), v(20, succeeded=1)]
    assert dropped_by_argo(versions, {"a": 15}) == {}


def test_a_run_listed_again_before_it_ended_is_counted_later_not_lost() -> None:
    # The next syncAll found it still running and added it back.
    versions = [v(10, "a", "b"), v(20, succeeded=1), v(25, "b", succeeded=1), v(40, succeeded=2)]
    assert dropped_by_argo(versions, {"a": 15, "b": 30}) == {}


def test_a_run_that_never_ended_is_no_lost_count() -> None:
    assert dropped_by_argo([v(10, "a"), v(20)], {}) == {}


def test_a_run_cronsource_dropped_is_never_put_on_argo() -> None:
    # The write changed cronsource's sequence: cronsource's, whoever owned the object.
    assert dropped_by_argo([v(10, "a", seq="3"), v(20, seq="4")], {"a": 30}) == {}
    # While cronsource owned it, no write is Argo's.
    assert dropped_by_argo([v(10, "a", argo=False), v(20, argo=False)], {"a": 30}) == {}


def test_before_the_adoption_only_a_run_that_had_ended_then_is_argos_loss() -> None:
    # `b` was written out at 20 and the object taken at 30: ended at 25, Argo lost it; still
    # going at 30, it was cronsource's to take (as Argo's next pass would have listed it).
    versions = [v(10, "a", "b"), v(20, "a"), v(30, "a", argo=False, seq="3")]
    assert lost_before_adoption(versions, {"b": 25}) == {"b": 20}
    assert dropped_by_argo(versions, {"b": 35}) == {"b": 20}
    assert lost_before_adoption(versions, {"b": 35}) == {}
    assert lost_before_adoption(versions[:2], {"b": 25}) == {}  # never taken


def test_a_status_cronsource_writes_after_the_release_is_named() -> None:
    argo, adopted, written = v(10, "a"), v(20, "a", argo=False), v(30, argo=False, seq="5")
    released = v(40, argo=True, seq="5")  # the label removed, the status as cronsource left it
    argo_counts = v(50, argo=True, seq="5", succeeded=1)
    assert cronsource_writes_after_release([argo, adopted, written, released, argo_counts]) == []
    late = v(60, argo=True, seq="6")
    assert cronsource_writes_after_release([argo, adopted, written, released, late]) == [60]


def test_before_any_adoption_argos_own_objects_have_no_release_to_be_late_for() -> None:
    # A sequence annotation on an object cronsource never held (a copy from elsewhere) is not
    # a write after a release.
    assert cronsource_writes_after_release([v(10), v(20, seq="1")]) == []
