"""CronWorkflow manifests and expressions found in Argo's own source tree, read at test time.

Argo's examples, e2e tests, unit tests and docs are the closest thing to what users really
write; nothing is copied into this repository. Sources:

* YAML files anywhere in the tree (examples/, test/e2e/, manifests/, ...) holding a CronWorkflow
  (the whole file is one case: `argo cron lint` lints its CronWorkflows and ignores other kinds);
* Go raw string literals (`...`) in *_test.go files that hold a CronWorkflow (workflow/cron,
  cmd/argo/commands/cron, test/e2e, workflow/common, ...);
* fenced code blocks of docs/*.md holding a CronWorkflow.

Expressions are every `spec.when` and `spec.stopStrategy.expression` of those manifests plus
the `when:` / `stopStrategy:` fragments of the docs' code blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_KIND = re.compile(r"""^\s*kind:\s*["']?CronWorkflow["']?\s*$|"kind"\s*:\s*"CronWorkflow\"""", re.M)
_GO_RAW = re.compile(r"`([^`]*)`", re.S)
_MD_BLOCK = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_SKIP_DIRS = {"node_modules", "ui", "sdks", "vendor"}
# Go assignments in Argo's unit tests: cronWf.Spec.When = "..." / Expression: "..."
_GO_WHEN = re.compile(r'Spec\.When\s*=\s*"((?:[^"\\]|\\.)*)"')
_GO_STOP = re.compile(r'Expression:\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Manifest:
    """One case: `origin` names where in Argo's tree it comes from, `text` is the file."""

    origin: str
    text: str

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.origin)


@dataclass(frozen=True)
class Expression:
    origin: str
    kind: str  # "when" or "stop"
    source: str


def _files(tree: Path, suffixes: tuple[str, ...]) -> Iterator[Path]:
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree)
        if rel.parts and rel.parts[0] in _SKIP_DIRS:
            continue
        if path.is_file() and path.name.endswith(suffixes):
            yield path


_CRD = re.compile(r"^kind:\s*CustomResourceDefinition\s*$", re.M)
_DOCUMENT_SEPARATOR = re.compile(r"^---[^\n]*$", re.M)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # Argo's CRDs are megabytes of YAML


def _holds_cron_workflow(text: str) -> bool:
    """A CronWorkflow object, not a CRD that names the kind: any document of that kind, or,
    when the text does not parse (Argo's malformed test inputs), the kind line alone."""
    for part in _DOCUMENT_SEPARATOR.split(text):
        if _CRD.search(part) or not _KIND.search(part):
            continue
        try:
            doc = yaml.load(part, Loader=_LOADER)  # noqa: S506 (a safe loader)
        except yaml.YAMLError:
            return True
        if isinstance(doc, dict) and doc.get("kind") == "CronWorkflow":
            return True
    return False


def manifests(tree: Path) -> list[Manifest]:
    """Every CronWorkflow manifest of Argo's tree, in a stable order."""
    found: list[Manifest] = []
    for path in _files(tree, (".yaml", ".yml")):
        text = path.read_text(errors="replace")
        if _holds_cron_workflow(text):
            found.append(Manifest(str(path.relative_to(tree)), text))
    for path in _files(tree, ("_test.go",)):
        text = path.read_text(errors="replace")
        literals = [m for m in _GO_RAW.findall(text) if _holds_cron_workflow(m)]
        for i, literal in enumerate(literals, 1):
            found.append(Manifest(f"{path.relative_to(tree)}#{i}", literal))
    docs = tree / "docs"
    for path in _files(docs, (".md",)):
        text = path.read_text(errors="replace")
        blocks = [b for b in _MD_BLOCK.findall(text) if _holds_cron_workflow(b)]
        for i, block in enumerate(blocks, 1):
            found.append(Manifest(f"{path.relative_to(tree)}#{i}", block))
    return found


def _documents(text: str) -> Iterator[Any]:
    try:
        yield from yaml.load_all(text, Loader=_LOADER)  # noqa: S506 (a safe loader)
    except yaml.YAMLError:
        return


def _spec_expressions(origin: str, spec: Any) -> Iterator[Expression]:
    if not isinstance(spec, dict):
        return
    when = spec.get("when")
    if isinstance(when, str) and when:
        yield Expression(origin, "when", when)
    stop = spec.get("stopStrategy")
    if isinstance(stop, dict) and isinstance(stop.get("expression"), str):
        yield Expression(origin, "stop", stop["expression"])


def expressions(tree: Path) -> list[Expression]:
    """Every `when` and stopStrategy expression in Argo's manifests and docs, deduplicated."""
    found: dict[tuple[str, str], Expression] = {}
    for m in manifests(tree):
        for doc in _documents(m.text):
            if isinstance(doc, dict) and doc.get("kind") == "CronWorkflow":
                for e in _spec_expressions(m.origin, doc.get("spec")):
                    found.setdefault((e.kind, e.source), e)
    for path in _files(tree / "workflow" / "cron", ("_test.go",)):
        text = path.read_text(errors="replace")
        for kind, pattern in (("when", _GO_WHEN), ("stop", _GO_STOP)):
            for literal in pattern.findall(text):
                source = json.loads(f'"{literal}"')  # Go's and JSON's escapes agree here
                found.setdefault(
                    (kind, source), Expression(str(path.relative_to(tree)), kind, source)
                )
    # Fragments of the CronWorkflow pages only: elsewhere `when` is a step's condition.
    for path in _files(tree / "docs", ("cron-workflows.md",)):
        for i, block in enumerate(_MD_BLOCK.findall(path.read_text(errors="replace")), 1):
            for doc in _documents(block):
                for e in _spec_expressions(f"docs/{path.name}#{i}", doc):
                    found.setdefault((e.kind, e.source), e)
    return list(found.values())
