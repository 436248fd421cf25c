"""`cronsource adopt` and `cronsource release`: move CronWorkflows between Argo's cron
controller and cronsource, each one between two of its ticks (docs/migration.md).

Which controller schedules a CronWorkflow is Argo's instance-id label
(`workflows.argoproj.io/controller-instanceid`): Argo's controller takes the objects labelled
with its instance id (without the label when it has none), cronsource those labelled with its
own (`run --instance-id`). A move is a change of that label. Each controller lets go of an
object as soon as its watch sees the change, and the other takes it then, so a tick that falls
in those milliseconds could be decided by both. For a standard cron schedule that is harmless:
both name the tick's Workflow `<cron>-<unix seconds>`, and both take AlreadyExists of that name
as done. `@every` is not: Argo's controller counts the period from whenever it last
(re)registered the object, so its tick and ours can differ. So each object is relabelled only
inside a window: at least `settle` after its last tick (the owner has fired it and written its
status) and at least `margin` before its next one.

- The next ticks of an object Argo owns are computed from its schedule, with `@every` counted
  from the later of `status.lastScheduledTime` and the object's last update (any update makes
  Argo's controller register the schedule again, from that moment).
- An object cronsource owns is looked up in the store (when one is given): its ticks are
  exact, every tick due is decided, and the object's status must show the last version of its
  stream (the status writer caught up), so Argo's controller reads the runs cronsource started
  (`Forbid` holds) and the counts as they are.

The relabelling is a merge patch with the `resourceVersion` the window was judged on as
precondition: when the object changed in between (its owner fired and wrote its status), the
patch is refused (409), and the object is read and judged again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cronsource.adapters.clock import SYSTEM_CLOCK, Clock
from cronsource.adapters.infrastructure.kube.port import CWF, ApiError, KubeApi
from cronsource.adapters.infrastructure.kube.status import shown_sequence
from cronsource.adapters.runtime.kube.watch import LABEL_INSTANCE, manifest_of
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.manifest import ManifestError, parse_manifest, scheduling_options
from cronsource.domain.schedule import (
    CompiledSchedule,
    ScheduleError,
    compile_schedule,
    needs_anchor,
)
from cronsource.domain.timestamps import TimestampError, parse_timestamp
from cronsource.projections.readmodel import rfc3339

#: Defaults of `--margin` and `--settle`. Argo's controller and ours both react to a label
#: change within milliseconds; 3 s before a tick leaves room for a slow watch, and 2 s after
#: one for the owner's Workflow creation and status write. With `@every 10s` that still
#: leaves a window in every period.
DEFAULT_MARGIN = timedelta(seconds=3)
DEFAULT_SETTLE = timedelta(seconds=2)
#: How often objects still waiting for their window are judged again.
POLL = 0.25

#: Finds the live stream of an object in the store: (namespace, name, uid) -> aggregate, or
#: None when the store has none.
Lookup = Callable[[str, str, str], CronWorkflow | None]


@dataclass(frozen=True)
class Move:
    """What became of one selected CronWorkflow. `moved`: relabelled now; `at`: when.
    `note` says why it was not (already there, no window before the timeout, ...)."""

    namespace: str
    name: str
    moved: bool
    at: datetime | None = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "moved": self.moved,
            "at": rfc3339(self.at),
            "note": self.note,
        }


class MoveError(ValueError):
    """Bad input to a move (a selector, an instance id): one line, nothing changed."""


@dataclass
class Mover:
    """Relabels CronWorkflows one by one, each inside its window (see the module doc).

    `to_cronsource`: adopt (label for `instance_id`) or release (label for `argo_instance_id`,
    "" removing the label). `lookup`: the store, for release; None judges cronsource's objects
    by the cluster alone (its schedule and the last tick the status shows)."""

    kube: KubeApi
    instance_id: str
    argo_instance_id: str = ""
    margin: timedelta = DEFAULT_MARGIN
    settle: timedelta = DEFAULT_SETTLE
    lookup: Lookup | None = None
    clock: Clock = SYSTEM_CLOCK

    def __post_init__(self) -> None:
        if not self.instance_id:
            raise MoveError(
                "--instance-id: cronsource needs an instance id of its own (the label value"
                " that selects it, e.g. cronsource); without one it takes Argo's objects"
            )
        if self.instance_id == self.argo_instance_id:
            raise MoveError(
                f"--argo-instance-id: {self.argo_instance_id!r} is cronsource's instance id too"
            )

    # -- the moves -----------------------------------------------------------------------------

    def adopt(
        self, namespace: str | None, selector: str, names: Sequence[str], timeout: timedelta
    ) -> list[Move]:
        """Label the selected CronWorkflows Argo owns for cronsource."""
        return self._move(namespace, selector, names, timeout, to_cronsource=True)

    def release(
        self, namespace: str | None, selector: str, names: Sequence[str], timeout: timedelta
    ) -> list[Move]:
        """Hand the selected CronWorkflows cronsource owns back to Argo's controller."""
        return self._move(namespace, selector, names, timeout, to_cronsource=False)

    def _owner(self, labels: dict[str, str]) -> str | None:
        """Who owns an object with these labels: "cronsource", "argo", or None (another
        instance of either)."""
        value = labels.get(LABEL_INSTANCE)
        if value == self.instance_id:
            return "cronsource"
        if (value or "") == self.argo_instance_id:
            return "argo"
        return None

    def _move(
        self,
        namespace: str | None,
        selector: str,
        names: Sequence[str],
        timeout: timedelta,
        *,
        to_cronsource: bool,
    ) -> list[Move]:
        source, dest = ("argo", "cronsource") if to_cronsource else ("cronsource", "argo")
        objs = self._select(namespace, selector, names)
        results: dict[tuple[str, str], Move] = {}
        pending: dict[tuple[str, str], dict[str, Any]] = {}
        for obj in objs:
            key = _key(obj)
            owner = self._owner(obj["metadata"].get("labels") or {})
            if owner == dest:
                results[key] = Move(*key, moved=False, note=f"already {dest}'s")
            elif owner != source:
                value = (obj["metadata"].get("labels") or {}).get(LABEL_INSTANCE)
                results[key] = Move(
                    *key, moved=False, note=f"labelled for another controller ({value!r})"
                )
            else:
                pending[key] = obj
        deadline = self.clock.now() + timeout
        waiting: dict[tuple[str, str], str] = {}
        while pending:
            for key, obj in list(pending.items()):
                now = self.clock.now()  # per object: judging one may read the store
                why = self._not_now(obj, now, to_cronsource)
                if why is not None:
                    waiting[key] = why
                    continue
                outcome = self._relabel(obj, to_cronsource)
                if isinstance(outcome, Move):
                    results[key] = outcome
                    pending.pop(key)
                elif outcome is None:
                    results[key] = Move(*key, moved=True, at=now, note=f"now {dest}'s")
                    pending.pop(key)
                else:
                    pending[key] = outcome  # changed since it was read: judge it again
            if not pending:
                break
            if self.clock.now() >= deadline:
                for key in pending:
                    results[key] = Move(
                        *key,
                        moved=False,
                        note=f"not moved: no window before the timeout ({waiting.get(key)})",
                    )
                break
            self.clock.wait(POLL)
            # The owners go on writing (fires, status): judge what the objects are now.
            fresh = {_key(o): o for o in self._select(namespace, selector, ())}
            for key in list(pending):
                if key in fresh:
                    pending[key] = fresh[key]
                else:
                    results[key] = Move(*key, moved=False, note="deleted meanwhile")
                    pending.pop(key)
        return [results[_key(o)] for o in objs]

    def _select(
        self, namespace: str | None, selector: str, names: Sequence[str]
    ) -> list[dict[str, Any]]:
        listed = self.kube.run(self.kube.list(namespace, CWF, selector))
        items: list[dict[str, Any]] = listed.get("items") or []
        if names:
            found = {o["metadata"]["name"]: o for o in items}
            missing = [n for n in names if n not in found]
            if missing:
                where = f" in namespace {namespace}" if namespace else ""
                raise MoveError(f"cronworkflow {', '.join(missing)} not found{where}")
            items = [found[n] for n in names]
        return sorted(items, key=_key)

    def _relabel(self, obj: dict[str, Any], to_cronsource: bool) -> Move | dict[str, Any] | None:
        """Patch the label, on the version judged. None: done; a dict: the object as it is
        now (it changed since it was read); a Move: it cannot be moved."""
        meta = obj["metadata"]
        ns, name = _key(obj)
        value: str | None = self.instance_id if to_cronsource else self.argo_instance_id or None
        body = {
            "metadata": {
                "resourceVersion": meta["resourceVersion"],
                "labels": {LABEL_INSTANCE: value},
            }
        }
        try:
            self.kube.run(self.kube.patch(ns, CWF, name, body))
        except ApiError as e:
            if e.status == 404:
                return Move(ns, name, moved=False, note="deleted meanwhile")
            if e.status != 409:
                raise
            try:
                fresh: dict[str, Any] = self.kube.run(self.kube.get(ns, CWF, name))
            except ApiError as e2:
                if e2.status == 404:
                    return Move(ns, name, moved=False, note="deleted meanwhile")
                raise
            return fresh
        return None

    # -- the window ------------------------------------------------------------------------------

    def _not_now(self, obj: dict[str, Any], now: datetime, to_cronsource: bool) -> str | None:
        """Why this object may not be relabelled at `now`; None when it may."""
        if not to_cronsource and self.lookup is not None:
            ns, name = _key(obj)
            agg = self.lookup(ns, name, str(obj["metadata"].get("uid") or ""))
            if agg is not None:
                return self._not_now_ours(agg, obj, now)
        try:
            schedules, since = argo_schedules(obj)
        except (ManifestError, ScheduleError):
            # Neither controller fires a schedule that does not parse: any moment will do.
            return None
        if since is not None and now - since < self.settle:
            return f"a tick or a new period at {rfc3339(since)}"
        for schedule in schedules:
            why = self._tick_near(schedule, now)
            if why is not None:
                return why
        return None

    def _tick_near(self, schedule: CompiledSchedule, now: datetime) -> str | None:
        tick = schedule.next_after(now - self.settle)
        if tick - now < self.margin:
            return f"a tick at {rfc3339(tick)}"
        return None

    def _not_now_ours(self, agg: CronWorkflow, obj: dict[str, Any], now: datetime) -> str | None:
        """An object cronsource owns, judged by its stream: every due tick decided, the next
        one far enough, and the object showing the stream's last status."""
        if agg.is_live:
            due = agg.schedule.next_after(agg.decided_until)
            if due <= now:
                return f"cronsource has not decided the tick at {rfc3339(due)} yet"
            why = self._tick_near(agg.schedule, now)
            if why is not None:
                return why
        shown = shown_sequence(str(agg.id), obj["metadata"])
        if shown is None or shown < agg.version:
            return (
                f"its status shows version {shown} of cronsource's {agg.version} (is"
                " `cronsource run --kube` running?)"
            )
        return None


def argo_schedules(obj: dict[str, Any]) -> tuple[list[CompiledSchedule], datetime | None]:
    """The object's schedule as Argo's controller ticks it now, and for `@every` the latest
    moment its period may count from (a tick there needs its settle time too). `@every` gets
    one schedule per such moment: `status.lastScheduledTime` (a fire), or the object's last
    update (the controller registers the schedule again on every update it sees, one second
    later when it sees it after the second turned)."""
    manifest = parse_manifest(manifest_of(obj), "cronworkflow")
    spec = manifest.spec
    exprs = tuple(spec.all_schedules)
    policy = scheduling_options(dict(manifest.metadata.annotations)).dst_policy
    if not needs_anchor(exprs):
        return [compile_schedule(exprs, spec.timezone, policy)], None
    anchors = _anchors(obj)
    compiled = [compile_schedule(exprs, spec.timezone, policy, anchor=a) for a in anchors]
    return compiled, max(anchors, default=None)


def _anchors(obj: dict[str, Any]) -> list[datetime]:
    meta = obj.get("metadata") or {}
    times: list[datetime] = []
    for text in (
        (obj.get("status") or {}).get("lastScheduledTime"),
        *[m.get("time") for m in meta.get("managedFields") or [] if isinstance(m, dict)],
        meta.get("creationTimestamp"),
    ):
        if not isinstance(text, str):
            continue
        try:
            times.append(parse_timestamp(text, "time", naive_is_utc=True))
        except TimestampError:
            continue
    if not times:
        return []
    latest = max(times)
    return [latest, latest + timedelta(seconds=1)]


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "default", meta["name"]


def adopted_cell(e: dict[str, Any]) -> str:
    """The DETAIL of a StatusAdopted event in `cronsource history`: what was taken over."""
    out = (
        f"from the object's status: succeeded={e.get('succeeded', 0)}"
        f" failed={e.get('failed', 0)} active={len(e.get('active') or [])}"
    )
    if e.get("stopped"):
        out += " stopped"
    if e.get("unreadable"):
        out += "; not read: " + "; ".join(e["unreadable"])
    return out


def move(
    *,
    to_cronsource: bool,
    kubeconfig: str | None,
    namespace: str | None,
    selector: str | None,
    names: Sequence[str],
    instance_id: str,
    argo_instance_id: str,
    margin: timedelta,
    settle: timedelta,
    timeout: timedelta,
    lookup: Lookup | None = None,
) -> list[Move]:
    """What `cronsource adopt` / `release` do: select (by NAMEs, `-l SELECTOR` or both),
    then relabel each selected object in its window. Raises MoveError for bad input, before
    anything changes."""
    from cronsource.adapters.application.inputs import FieldError
    from cronsource.adapters.application.selectors import parse_label_selector
    from cronsource.adapters.infrastructure.kube.client import connect

    if not names and selector is None:
        raise MoveError("name the CronWorkflows, or select them with -l SELECTOR")
    try:
        parse_label_selector(selector)
    except FieldError as e:
        raise MoveError(f"-l: {e.message}") from None
    for flag, d in (("--margin", margin), ("--settle", settle), ("--timeout", timeout)):
        if d < timedelta(0):
            raise MoveError(f"{flag}: must not be negative")
    if kubeconfig is not None and not os.path.isfile(kubeconfig):
        raise MoveError(f"--kubeconfig: {kubeconfig}: no such file")
    try:
        kube = connect(kubeconfig)
    except Exception as e:
        raise MoveError(f"--kubeconfig: cannot load a cluster configuration: {e}") from None
    try:
        mover = Mover(kube, instance_id, argo_instance_id, margin, settle, lookup)
        if to_cronsource:
            return mover.adopt(namespace, selector or "", names, timeout)
        return mover.release(namespace, selector or "", names, timeout)
    except ApiError as e:
        raise MoveError(f"the cluster refused: {e}") from None
    finally:
        kube.close()
