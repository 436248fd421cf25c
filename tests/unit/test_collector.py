"""`cronsource run` paces the garbage collector (adapters/runtime/collector.py): full
collections become rare, the young generations are collected as before."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cronsource.adapters.runtime.collector import FULL_COLLECTION_EVERY, pace_collector


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_full_collections_become_rare_and_young_ones_stay(
    thresholds: tuple[int, int, int],
) -> None:
    gc.set_threshold(700, 10, 10)
    pace_collector()
    assert gc.get_threshold() == (700, 10, FULL_COLLECTION_EVERY)
    assert FULL_COLLECTION_EVERY > 10
    assert gc.isenabled()
