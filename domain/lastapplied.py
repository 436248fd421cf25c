"""kubectl's three-way apply, over the fields of a CronWorkflow that a file can name.

Three configurations meet at an apply: the one the last apply wrote (the *record*, kept in
the event log as kubectl keeps it in the `kubectl.kubernetes.io/last-applied-configuration`
annotation), the file applied now, and the live object (what the last writer of any kind
left: an apply, `cronsource suspend`, an HTTP PUT, the Kubernetes watch).

Why not take the file's values (a two-way apply): after `cronsource suspend`, re-applying a
file that says `suspend: false` (as Argo's own examples/cron-workflow.yaml does) resumed the
CronWorkflow, on `apply` and on every `run PATHS` restart. Here a field another writer changed
since the last apply keeps that writer's value as long as the file's value for it has not
changed since the last apply, even when the file names it; `force` (`--force-conflicts`)
takes the file's values.

Field by field (mappings are merged key by key, as kubectl merges a custom resource; lists
and scalars are one value each):

| the file | since the last apply            | result                                  |
|----------|---------------------------------|-----------------------------------------|
| names it | its value changed               | the file's value                        |
| names it | unchanged, live still the same  | the file's value (= live)               |
| names it | unchanged, live changed         | live kept (force: the file's value)     |
| dropped  | live still the last applied one | removed (back to the default)           |
| dropped  | live changed                    | live kept (force: removed)              |
| never    |                                 | live kept                               |

A dropped field another writer changed stays as that writer set it, as server-side apply
leaves a field the applier no longer claims to its other owner.

Field managers (the HTTP API's server-side apply, `PATCH` with `application/apply-patch+yaml`
and `?fieldManager=NAME`): the record also says which manager wrote it (`manager`; absent:
`DEFAULT_MANAGER`, the manager of `cronsource apply` and of the Python API's `apply`, so their
records are as they always were). An apply by the record's own manager is the three-way apply
above. An apply by another manager is refused (`ApplyConflict`, naming each field) where it
would change a value the record's manager set (`ownership_conflicts`), unless forced; it then
merges with an empty record of its own (every field it names takes its value, the rest stays
live) and its record replaces the other's. The default manager never conflicts, as kubectl's
client-side apply never does: over another manager's record it applies two-way, as it does
without a record, and says so. One record, not per-field ownership: the last manager to apply
owns what it named.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from cronsource.domain.manifest import CronWorkflowManifest


class _Missing:
    """A field that is not there (distinct from a null, which admission drops anyway)."""

    def __repr__(self) -> str:
        return "<unset>"


MISSING: Final = _Missing()

#: The keys a record may have: what `applied_config` writes, and the manager (`with_manager`).
_TOP_KEYS: Final = frozenset({"metadata", "spec", "manager"})

#: The field manager of `cronsource apply` and the Python API's `apply`, and of every record
#: that names none (all records written before managers were kept).
DEFAULT_MANAGER: Final = "cronsource"
_META_KEYS: Final = frozenset({"labels", "annotations"})


@dataclass(frozen=True)
class Kept:
    """A field left at its live value although the file names it (or dropped it).

    `live` and `file` are the two values (MISSING: not set); `dropped` when the file no
    longer names the field."""

    path: str
    live: Any
    file: Any

    @property
    def dropped(self) -> bool:
        return self.file is MISSING

    def describe(self) -> str:
        """One line for the user: what was kept, and how to take the file's value instead."""
        since = (
            f"{self.path} kept at {_show(self.live)}, set since the last apply by another writer"
        )
        if self.dropped:
            return f"{since} (the file no longer sets it; --force-conflicts resets it)"
        return f"{since} (the file still says {_show(self.file)}; --force-conflicts takes it)"


def _show(value: Any) -> str:
    if value is MISSING:
        return "unset"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Merged:
    """The configuration an apply leads to, and the fields it kept at their live value."""

    config: dict[str, Any]
    kept: tuple[Kept, ...]


def applied_config(manifest: CronWorkflowManifest) -> dict[str, Any]:
    """What the file names, as the record keeps it: `spec` with only the fields the file set
    (a default is not a value the file chose), and `metadata.labels`/`annotations` when the
    file has them. Plain JSON types, so the record serialises as any event field does."""
    meta = manifest.metadata
    spec = manifest.spec.model_dump(by_alias=True, exclude_unset=True, mode="json")
    # A value admission reads as unset (a negative history limit, as Argo reads it) is not
    # recorded as a null: against a live object without the field, the next apply took that
    # null for a value another writer had removed, said `updated` and warned of a conflict.
    config: dict[str, Any] = {"spec": {k: v for k, v in spec.items() if v is not None}}
    named = {
        k: dict(getattr(meta, k)) for k in ("labels", "annotations") if k in meta.model_fields_set
    }
    if named:
        config["metadata"] = named
    return config


def live_config(
    spec: Mapping[str, Any],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    suspended: bool,
) -> dict[str, Any]:
    """The live object in the record's shape. `suspend` is the live state (a `cronsource
    suspend` sets it without touching the stored spec)."""
    return {
        "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
        "spec": {**spec, "suspend": suspended},
    }


def with_manager(config: dict[str, Any], manager: str) -> dict[str, Any]:
    """The record an apply by `manager` keeps: `config`, naming the manager unless it is the
    default (so `cronsource apply` keeps writing exactly the records it always wrote)."""
    return config if manager == DEFAULT_MANAGER else {**config, "manager": manager}


def record_manager(record: Mapping[str, Any]) -> str:
    """The manager that wrote a usable record (see `record_problem`)."""
    manager = record.get("manager", DEFAULT_MANAGER)
    return manager if isinstance(manager, str) else DEFAULT_MANAGER


def named_config(record: Mapping[str, Any]) -> dict[str, Any]:
    """A usable record without its manager: the configuration `merge` compares."""
    return {k: v for k, v in record.items() if k != "manager"}


class ApplyConflict(Exception):
    """An apply by `manager` would change fields the record's manager (`owner`) set:
    Kubernetes' 409 Conflict of server-side apply. Nothing was saved."""

    def __init__(self, manager: str, owner: str, conflicts: tuple[Kept, ...]) -> None:
        self.manager = manager
        self.owner = owner
        self.conflicts = conflicts
        super().__init__(
            f"apply by field manager {manager!r} conflicts with {owner!r} on "
            + ", ".join(c.path for c in conflicts)
            + " (force=true takes this apply's values)"
        )

    def describe(self, conflict: Kept) -> str:
        """One line for a conflicting field, without its path (the caller names it)."""
        return (
            f"set to {_show(conflict.live)} by field manager {self.owner!r};"
            f" this apply says {_show(conflict.file)}"
        )


def ownership_conflicts(
    record: Mapping[str, Any], file: Mapping[str, Any], live: Mapping[str, Any]
) -> tuple[Kept, ...]:
    """The fields another manager's `record` names that `file` sets to a value other than
    the live one (mappings compared key by key, lists and scalars as one value each, as
    `merge` does). `record` is the configuration without its manager (`named_config`)."""
    out: list[Kept] = []
    _conflicts(record, file, live, "", out)
    return tuple(out)


def _conflicts(
    record: Mapping[str, Any],
    file: Mapping[str, Any],
    live: Mapping[str, Any],
    path: str,
    out: list[Kept],
) -> None:
    for key, value in file.items():
        if key not in record:
            continue
        here = f"{path}.{key}" if path else key
        owned, now = record[key], live.get(key, MISSING)
        if isinstance(value, dict) and isinstance(owned, dict) and isinstance(now, dict):
            _conflicts(owned, value, now, here, out)
        elif value != now:
            out.append(Kept(here, now, value))


def record_problem(record: object) -> str | None:
    """Why a stored record cannot be used for a three-way apply, or None when it can.

    None as a record means there is none: the CronWorkflow was created before records were
    kept, or by a writer that is not an apply (the Kubernetes watch)."""
    if record is None:
        return "no last-applied record"
    if not isinstance(record, dict) or not set(record) <= _TOP_KEYS:
        return "the last-applied record is corrupt (not a configuration)"
    spec = record.get("spec", {})
    meta = record.get("metadata", {})
    if not isinstance(record.get("manager", DEFAULT_MANAGER), str):
        return "the last-applied record is corrupt (its manager is not a string)"
    if not isinstance(spec, dict) or not isinstance(meta, dict) or not set(meta) <= _META_KEYS:
        return "the last-applied record is corrupt (spec or metadata is not a mapping)"
    for key in _META_KEYS & set(meta):
        value = meta[key]
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            return f"the last-applied record is corrupt (metadata.{key} is not a string map)"
    return None


def merge(
    last: Mapping[str, Any], file: Mapping[str, Any], live: Mapping[str, Any], force: bool
) -> Merged:
    """The configuration of a three-way apply (see the table in this module's docstring).
    `last` must have passed `record_problem`."""
    kept: list[Kept] = []
    merged = _merge_maps(last, file, live, "", force, kept)
    return Merged(merged, tuple(kept))


def _merge_maps(
    last: Mapping[str, Any],
    file: Mapping[str, Any],
    live: Mapping[str, Any],
    path: str,
    force: bool,
    kept: list[Kept],
) -> dict[str, Any]:
    out = dict(live)  # what neither the file nor the record names stays as it is
    for key in [*file, *(k for k in last if k not in file)]:
        value = _merge_value(
            last.get(key, MISSING),
            file.get(key, MISSING),
            live.get(key, MISSING),
            f"{path}.{key}" if path else key,
            force,
            kept,
        )
        if value is MISSING:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _merge_value(last: Any, file: Any, live: Any, path: str, force: bool, kept: list[Kept]) -> Any:
    if file is MISSING:  # the file dropped a field the last apply set
        if force or _pruned(live) == _pruned(last):
            return MISSING
        kept.append(Kept(path, live, MISSING))
        return live
    if isinstance(file, dict) and isinstance(live, dict):
        return _merge_maps(last if isinstance(last, dict) else {}, file, live, path, force, kept)
    if not force and last is not MISSING and last == file and live != file:
        kept.append(Kept(path, live, file))
        return live
    return file


def _pruned(value: Any) -> Any:
    """`value` without empty maps, lists and nulls, at any depth: the live object holds a
    field's defaults (`workflowMetadata: {labels: {a: b}, annotations: {}}`), the record only
    what the file said (`{labels: {a: b}}`). Compared as they were, a field the file dropped
    looked changed by another writer: kept, with a false conflict."""
    if isinstance(value, dict):
        pruned = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value
