"""Manifests from files, directories and stdin, for `lint`, `apply` and `run PATHS`.

Every path is read and every document admitted before anything is decided, and every
problem is kept: `lint DIR` used to stop at the first file it could not read and name no
other. A bad file (missing, unreadable, binary, not YAML, or holding a manifest that is not
admitted) is named in each of its lines; the caller exits non-zero once, at the end, and
`apply` applies none of the files when any is bad.

A directory is read, recursively, for `.yaml`, `.yml` and `.json` files (the extensions
kubectl reads). Documents of other kinds are counted (`lint` says `2 other documents
skipped`): `argo cron lint` ignores them too, and a directory often holds both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TypeGuard

from cronsource.adapters.application.documents import (
    MAX_INPUT_BYTES,
    DocumentError,
    default_namespace,
    from_client,
    load_json,
    load_yaml,
)
from cronsource.domain.calendars import (
    CalendarError,
    CalendarSpec,
    calendar_spec,
    is_calendar_document,
)
from cronsource.domain.manifest import (
    CronWorkflowManifest,
    ManifestError,
    is_other_kind,
    manifest_warnings,
    parse_manifest,
)
from cronsource.domain.workflowspec import json_type

SUFFIXES = (".yaml", ".yml", ".json")


STDIN = "-"


@dataclass
class Admission:
    """What the paths held. `manifests` are (source, manifest) of the admitted ones;
    `problems` and `warnings` are lines naming their source; `skipped` are (source, what
    it is: `kind ConfigMap`, `a document without a kind`) of documents of other kinds;
    `bad_files` the paths with a problem, each once; `documents` the admitted documents as
    read (`-n` filled in), in the order of `manifests`: `simulate -f` applies them as a
    scenario's `cronWorkflows`."""

    manifests: list[tuple[str, CronWorkflowManifest]] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    #: ConfigMaps labelled `cronsource.io/calendar: "true"`, admitted as calendars, and the
    #: documents as read (`simulate -f` applies them before the CronWorkflows).
    calendars: list[tuple[str, CalendarSpec]] = field(default_factory=list)
    calendar_documents: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    files: int = 0
    bad_files: list[str] = field(default_factory=list)

    def bad(self, path: str, lines: Sequence[str]) -> None:
        self.problems += lines
        if path not in self.bad_files:
            self.bad_files.append(path)

    def summary(self) -> str:
        """`6 CronWorkflow(s) valid, 2 other documents skipped, 1 file with errors`."""
        parts = [f"{len(self.manifests)} CronWorkflow(s) valid"]
        if self.calendars:
            parts.append(f"{len(self.calendars)} calendar(s) valid")
        if self.skipped:
            n = len(self.skipped)
            parts.append(f"{n} other document{'s' if n != 1 else ''} skipped")
        if self.bad_files:
            n = len(self.bad_files)
            parts.append(f"{n} file{'s' if n != 1 else ''} with errors")
        return ", ".join(parts)


def expand(
    paths: Sequence[str], exclude: str | None = None
) -> tuple[list[str], list[tuple[str, str]]]:
    """(files to read, (path, problem line) of the paths that give none). A directory
    gives its .yaml, .yml and .json files, recursively, leaving out `exclude` (the local
    target's workflows directory: `run .` must not read its own Workflow files back); '-'
    is stdin. A missing path, or a directory without such files, is a problem line, and the
    other paths are still read."""
    files: list[str] = []
    problems: list[tuple[str, str]] = []
    skip = Path(exclude).resolve() if exclude else None
    for p in paths:
        path = Path(p)
        if p == STDIN:
            files.append(p)
        elif path.is_dir():
            found = sorted(
                str(f)
                for f in path.rglob("*")
                if f.suffix in SUFFIXES
                and not f.is_dir()
                and not (skip is not None and f.resolve().is_relative_to(skip))
            )
            if not found:
                problems.append((p, f"{p}: no .yaml, .yml or .json files in this directory"))
            files += found
        elif path.exists() or path.is_symlink():  # a dangling link is read, and named
            files.append(p)
        else:
            problems.append((p, f"{p}: no such file or directory"))
    return files, problems


def read_bytes(path: str, stdin: BinaryIO) -> bytes:
    """The bytes of a file ('-' is stdin), at most MAX_INPUT_BYTES: a huge file is refused
    before it is read into memory. DocumentError (one line) when it cannot be read."""
    try:
        if path == STDIN:
            data = stdin.read(MAX_INPUT_BYTES + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        raise DocumentError(f"{path}: cannot read it: {e.strerror or e}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise DocumentError(f"{path}: larger than the limit of {MAX_INPUT_BYTES} bytes (3 MiB)")
    return data


def documents(path: str, stdin: BinaryIO) -> list[tuple[str, object]]:
    """The documents of one file, each with the source label messages name (`f.yaml`, or
    `f.yaml#1` in a file of several; `<stdin>`). A `.json` file is one JSON document;
    anything else is YAML (a stream of documents). DocumentError when unreadable."""
    data = read_bytes(path, stdin)
    label = "<stdin>" if path == STDIN else path
    docs = [load_json(data, label)] if path.endswith(".json") else load_yaml(data, label, file=True)
    if not docs:
        raise DocumentError(f"{label}: no documents")
    out: list[tuple[str, object]] = []
    for i, d in enumerate(docs):
        source = f"{label}#{i}" if len(docs) > 1 else label
        if _is_list(d):
            out += [(f"{source} items[{j}]", from_client(o)) for j, o in enumerate(d["items"])]
        else:
            out.append((source, from_client(d)))
    return out


def _is_list(doc: object) -> TypeGuard[dict[str, Any]]:
    """A list of objects (`kind: List`, or `CronWorkflowList` as `get -o yaml` writes
    several): kubectl applies its items, so `get -o yaml > f; apply -f f` works here too."""
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        return False
    kind = doc.get("kind")
    return isinstance(kind, str) and kind.endswith("List")


def admit_files(
    paths: Sequence[str],
    stdin: BinaryIO,
    namespace: str | None = None,
    *,
    only_cronworkflows: bool = False,
    exclude: str | None = None,
    strict: bool = False,
) -> Admission:
    """Read and admit every document of every path, keeping every problem.

    A manifest without a namespace takes `namespace` (`-n`, as kubectl does). With
    `only_cronworkflows` (`run PATHS`: a directory may hold anything) a document of any other
    kind, or of none, is skipped; otherwise only a document with another kind is, and one
    without a kind is refused (a typo should not pass as "another kind"). With `strict`
    (`lint --strict`) a name Argo does not define in `when` or `stopStrategy` is a problem,
    else a warning."""
    out = Admission()
    files, missing = expand(paths, exclude)
    for path, line in missing:
        out.files += 1  # named on the command line, so one of the files the user gave
        out.bad(path, [line])
    for path in files:
        out.files += 1
        try:
            docs = documents(path, stdin)
        except DocumentError as e:
            out.bad(path, [str(e)])
            continue
        for source, doc in docs:
            kind = doc.get("kind") if isinstance(doc, dict) else None
            if is_calendar_document(doc):
                assert isinstance(doc, dict)
                try:
                    out.calendars.append((source, calendar_spec(doc, namespace or "default")))
                except CalendarError as e:
                    out.bad(path, [f"{source}: {e}"])
                    continue
                default_namespace(doc, namespace)
                out.calendar_documents.append(doc)
                continue
            if (only_cronworkflows and kind != "CronWorkflow") or is_other_kind(doc):
                if isinstance(kind, str) and kind:
                    shown = f"kind {kind:.60}"
                else:
                    shown = (
                        "a document without a kind"
                        if isinstance(doc, dict)
                        else f"a document of type {json_type(doc)}"
                    )
                out.skipped.append((source, shown))
                continue
            default_namespace(doc, namespace)
            try:
                manifest = parse_manifest(doc, source)
            except ManifestError as e:
                out.bad(path, [f"{source}: {p}" for p in e.problems])
                continue
            warnings = [f"{source}: {w}" for w in manifest_warnings(manifest)]
            if strict and warnings:
                out.bad(path, [f"{w} (--strict)" for w in warnings])
                continue
            out.warnings += warnings
            out.manifests.append((source, manifest))
            assert isinstance(doc, dict)  # parse_manifest admits mappings only
            out.documents.append(doc)
    return out
