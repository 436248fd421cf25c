"""The kube package loads its modules on first use (adapters/infrastructure/kube/__init__.py):
its lazy table, its `__all__` and the names a star import gets must stay one list."""

from __future__ import annotations

import importlib

import cronsource.adapters.infrastructure.kube as kube


def test_every_exported_name_has_a_home_and_resolves_to_the_object_there() -> None:
    homes = kube._HOMES
    assert sorted(kube.__all__) == sorted(homes)
    for name, home in homes.items():
        assert getattr(kube, name) is getattr(importlib.import_module(home), name)
