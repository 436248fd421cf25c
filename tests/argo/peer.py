"""Argo Workflows v4.0.5, built from its Go module, as the reference the differential tests
compare cronsource with (see ``oracle/main.go`` and ``scripts/build-argo.sh``).

``CRONSOURCE_ARGO_ORACLE`` and ``CRONSOURCE_ARGO_CONTROLLER`` name the binaries (scripts/test.sh
exports them); without them the build script is run, which builds once per machine and reuses
its cache after. A binary that cannot be built fails the test that needs it, never skips it.
Argo's source tree (examples, e2e tests, docs) is read from the Go module cache, where the
build put it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from tests.buildscript import built_paths

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-argo.sh"
ORACLE_MODULE = Path(__file__).resolve().parent / "oracle"
ARGO_MODULE = "github.com/argoproj/argo-workflows/v4"
ARGO_VERSION = "v4.0.5"
ENV_ORACLE = "CRONSOURCE_ARGO_ORACLE"
ENV_CONTROLLER = "CRONSOURCE_ARGO_CONTROLLER"
BUILD_TIMEOUT = 3600.0  # cold: module download and two large Go builds on 2 cores
CALL_TIMEOUT = 300.0


class ArgoPeerError(RuntimeError):
    """Argo's binaries or source could not be built, found or run."""


@cache
def _built() -> tuple[Path, Path]:
    oracle_path, controller_path = built_paths(BUILD_SCRIPT, 2, BUILD_TIMEOUT, ArgoPeerError)
    return oracle_path, controller_path


def _binary(env: str, index: int) -> Path:
    explicit = os.environ.get(env)
    path = Path(explicit) if explicit else _built()[index]
    if not os.access(path, os.X_OK):
        raise ArgoPeerError(f"{env}={path} is not an executable file")
    return path


def oracle() -> Path:
    """The oracle binary (tests/argo/oracle)."""
    return _binary(ENV_ORACLE, 0)


def controller() -> Path:
    """Argo's workflow-controller binary."""
    return _binary(ENV_CONTROLLER, 1)


@cache
def source_tree() -> Path:
    """Argo's module source, as `go mod download` left it (read only)."""
    try:
        proc = subprocess.run(
            ["go", "mod", "download", "-json", f"{ARGO_MODULE}@{ARGO_VERSION}"],
            cwd=ORACLE_MODULE,
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT,
            check=False,
            env={**os.environ, "GOTOOLCHAIN": "local"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ArgoPeerError(f"cannot locate Argo's module source: {exc}") from exc
    if proc.returncode != 0:
        raise ArgoPeerError(f"go mod download {ARGO_MODULE}@{ARGO_VERSION}: {proc.stderr[-1000:]}")
    tree = Path(json.loads(proc.stdout)["Dir"])
    if not (tree / "workflow" / "cron" / "operator.go").is_file():
        raise ArgoPeerError(f"{tree} does not look like Argo's source tree")
    return tree


def _run(args: Sequence[str], stdin: str) -> str:
    try:
        proc = subprocess.run(
            [str(oracle()), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ArgoPeerError(f"oracle {args[0]} gave no answer in {CALL_TIMEOUT:.0f} s") from exc
    if proc.returncode != 0:
        raise ArgoPeerError(f"oracle {args[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def lint(files: Sequence[Path]) -> dict[Path, dict[str, Any]]:
    """Argo's `cron lint --strict` verdict on each file: {"ok", "linted", "errors", "output"}."""
    out = _run(["lint", *map(str, files)], "")
    verdicts = [json.loads(line) for line in out.splitlines() if line]
    if len(verdicts) != len(files):
        raise ArgoPeerError(f"oracle lint answered {len(verdicts)} of {len(files)} files")
    return {Path(v["file"]): v for v in verdicts}


def evaluate(cases: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Argo's answer for each case ({"kind": "when"|"stop", "expression", "cronWorkflow",
    "now"?}): {"result": bool} or {"error": message}, in order, from one oracle process."""
    cases = list(cases)
    lines = "".join(json.dumps({**c, "id": i}) + "\n" for i, c in enumerate(cases))
    answers = [json.loads(line) for line in _run(["expr"], lines).splitlines() if line]
    if [a["id"] for a in answers] != list(range(len(cases))):
        raise ArgoPeerError(f"oracle expr answered {len(answers)} of {len(cases)} cases")
    return answers


def cron_get(cron_workflow: Mapping[str, Any]) -> dict[str, Any]:
    """Decode a CronWorkflow with Argo's Go types (unknown fields are an error) and return
    {"get": what `argo cron get` prints, "status": the status as Argo's types hold it}."""
    answer: dict[str, Any] = json.loads(_run(["status"], json.dumps(cron_workflow)))
    return answer
