"""`cronsource simulate`: the real engine on a virtual clock, with a simulated local target.

The domain, the store, the projections and the runtime (adapters/runtime/: the turn of
`cronsource run`, with its prepared decisions, warming, due filtering, budgets and dispatch) are
the production ones; only time (a VirtualClock) and the place Workflows run (SimTarget) are
simulated. With several replicas, every replica decides the next instant in advance on the same
state before any commits (the worst interleaving), so the version check, not luck, is what
keeps a tick from firing twice.
"""

from cronsource.adapters.entrypoints.simulate.orchestrator import SimulationInterrupted, simulate
from cronsource.adapters.entrypoints.simulate.scenario import (
    Scenario,
    ScenarioError,
    from_manifests,
    load_scenario,
)
from cronsource.adapters.entrypoints.simulate.target import SimTarget

__all__ = [
    "Scenario",
    "ScenarioError",
    "SimTarget",
    "SimulationInterrupted",
    "from_manifests",
    "load_scenario",
    "simulate",
]
