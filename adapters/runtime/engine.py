"""What bootstrap hands every entrypoint: the service, its read side, the projection runner and
the indexes over one store, built together (adapters/bootstrap.py) and closed together."""

from __future__ import annotations

from dataclasses import dataclass, field

from cronsource.adapters.clock import Clock
from cronsource.adapters.infrastructure.readside.model import ReadModel
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.indexes import ViewIndex
from cronsource.adapters.runtime.projector import Projector
from cronsource.domain.service import CronService
from cronsource.projections.dispatch import Dispatcher
from cronsource.projections.readmodel import ReadModelProjection


@dataclass
class Engine:
    config: StoreConfig
    service: CronService
    view: ReadModel
    readmodel: ReadModelProjection
    dispatcher: Dispatcher | None
    #: The one owner of the projections' positions.
    projector: Projector
    #: The service's LogIndex (lookups by name, fired ticks).
    index: ViewIndex
    #: The one clock every budget, wait and decision of this engine runs on.
    clock: Clock
    extra_replicas: list[CronService] = field(default_factory=list)

    def forget(self) -> None:
        """Drop every copy of the log this engine keeps in memory: the services' aggregate
        caches, the projections' aggregates and the names read ahead of the status view.
        Called when the store may have lost what those copies were built from (its
        connection was lost, or it is another server now: adapters/runtime/storeidentity.py);
        each is rebuilt from what the log holds on its next use."""
        for svc in [self.service, *self.extra_replicas]:
            svc.forget()
        self.readmodel.follower.forget()
        if self.dispatcher is not None:
            self.dispatcher.follower.forget()
        self.index.forget()
        self.projector.forget()

    def replica(self) -> CronService:
        """Another service instance on the same store (its own cache), as a second process
        would have; `simulate` uses these to interleave replicas."""
        shared = self.service.recorder if self.config.kind == "memory" else None
        svc = CronService(
            env=self.config.env(create_table=False),
            recorder=shared,
            late_tolerance=self.service.late_tolerance,
            index=lambda _: self.index,
        )
        self.extra_replicas.append(svc)
        return svc

    @property
    def rejected_writes(self) -> int:
        return self.service.rejected_writes + sum(r.rejected_writes for r in self.extra_replicas)

    def close(self) -> None:
        self.projector.close()
        for svc in [self.service, *self.extra_replicas]:
            svc.close()
        self.view.close()
