"""`cronsource lint` gives Argo v4.0.5's own verdict (its `argo cron lint --strict`, run from
Argo's code by tests/argo/oracle), for the same reason, on every CronWorkflow manifest of
Argo's source tree and on cases of our own aimed at Argo's validation rules
(tests/argo/lint_cases.py): where both refuse, both name the same field.

Where cronsource differs on purpose, the case is named in DELIBERATE with the reason; each is
also a row of docs/argo-compatibility.md. Any other disagreement fails, listing every case with
both verdicts. A missing Argo build fails the test (tests/argo/peer.py), it never skips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cronsource.adapters.entrypoints.cli import cli
from tests.argo import corpus, peer
from tests.argo.lint_cases import CASES
from tests.argo.reasons import same_reason

#: Cases where cronsource's verdict differs from Argo's lint on purpose -> (why, the phrase
#: of docs/argo-compatibility.md that documents it).
_LEGACY = (
    "Argo v4 refuses v3's spec.schedule under strict lint; cronsource still reads it so that a"
    " v3 manifest keeps working during a migration",
    "Legacy `spec.schedule`",
)
_REF = (
    "offline, Argo's lint finds a WorkflowTemplate only among the files it is given (and only"
    " under the namespace written in it); in a cluster the template may exist, and cronsource"
    " does not resolve references at admission",
    "Whether a `workflowTemplateRef` names a WorkflowTemplate that exists",
)
_EVERY_ZERO = ("almost certainly a mistake; Argo ticks every second", "`@every 0s`")
_EXPRESSIONS = (
    "an expression that can only fail at every tick is refused at apply (and stopStrategy"
    " without an expression is refused by Argo's CRD, so by the API server)",
    "`when` and `stopStrategy` at lint",
)
DELIBERATE: dict[str, tuple[str, str]] = {
    "own:legacy-schedule": _LEGACY,
    "test/e2e/testdata/convert/convert-legacy-cron.yaml": _LEGACY,
    "own:ref-not-in-file": _REF,
    "own:ref-in-same-file": _REF,
    "examples/cron-backfill.yaml": _REF,
    "examples/dag-inline-cronworkflow.yaml": _REF,
    "test/e2e/cron/cron-daily-job.yaml": _REF,
    "own:steps-template-ref": _REF,
    "own:schedule-every-0s": _EVERY_ZERO,
    "own:when-syntax-error": _EXPRESSIONS,
    "own:stop-syntax-error": _EXPRESSIONS,
    "own:stop-empty": _EXPRESSIONS,
}

#: Disagreements found by this test that are bugs in cronsource, not yet fixed (issue 10,
#: item 4). Named so that the test catches any new one and says when one is fixed.
OPEN: dict[str, str] = {}


def _cronsource_ok(path: Path) -> tuple[bool, str]:
    """cronsource's verdict through its real `lint` command (in process: one per file)."""
    result = CliRunner().invoke(cli, ["lint", str(path)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback is a bug of its own, never a verdict
    return result.exit_code == 0, result.output.strip()


def _cases(tmp_path: Path) -> dict[str, Path]:
    tree = peer.source_tree()
    files: dict[str, Path] = {}
    for m in corpus.manifests(tree):
        path = tmp_path / "argo" / f"{m.slug}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(m.text)
        files[m.origin] = path
    for name, text in CASES.items():
        path = tmp_path / "own" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        files[f"own:{name}"] = path
    return files


def _disagreements(tmp_path: Path) -> tuple[int, list[dict[str, Any]]]:
    files = _cases(tmp_path)
    argo = peer.lint(list(files.values()))
    rows = []
    for origin, path in files.items():
        verdict = argo[path]
        ours, message = _cronsource_ok(path)
        argo_says = "; ".join(verdict["errors"]) or verdict["output"].strip()
        # Two refusals agree only when they name the same field (and, inside workflowSpec,
        # say what Argo's ValidateWorkflow says).
        if ours != verdict["ok"] or (not ours and not same_reason(argo_says, message)):
            rows.append(
                {
                    "case": origin,
                    "argo": "ok" if verdict["ok"] else f"fail: {argo_says}",
                    "cronsource": "ok" if ours else f"fail: {message}",
                }
            )
    return len(files), rows


def test_the_corpus_covers_argos_tree() -> None:
    """The walk finds Argo's examples, e2e files, Go test literals and docs (not CRDs)."""
    origins = [m.origin for m in corpus.manifests(peer.source_tree())]
    assert "examples/cron-workflow.yaml" in origins
    assert any(o.startswith("workflow/cron/operator_test.go#") for o in origins)
    assert any(o.startswith("cmd/argo/commands/cron/util_test.go#") for o in origins)
    assert any(o.startswith("test/e2e/cron_test.go#") for o in origins)
    assert any(o.startswith("docs/cron-workflows.md#") for o in origins)
    assert not any("crds" in o for o in origins)
    assert len(origins) >= 40


def test_argos_verdict_is_argos_own(tmp_path: Path) -> None:
    """The oracle really runs Argo's lint: it passes Argo's own example and refuses a name
    over 52 characters with the message of Argo's ValidateCronWorkflow."""
    good = peer.source_tree() / "examples" / "cron-workflow.yaml"
    long_name = tmp_path / "long.yaml"
    long_name.write_text(CASES["name-53-chars"])
    verdicts = peer.lint([good, long_name])
    assert verdicts[good]["ok"] and verdicts[good]["linted"] and not verdicts[good]["errors"]
    assert not verdicts[long_name]["ok"]
    assert "must not be more than 52 characters" in " ".join(verdicts[long_name]["errors"])


def test_cronsource_lint_agrees_with_argo(tmp_path: Path) -> None:
    total, rows = _disagreements(tmp_path)
    unexpected = [r for r in rows if r["case"] not in DELIBERATE and r["case"] not in OPEN]
    stale = sorted((set(DELIBERATE) | set(OPEN)) - {r["case"] for r in rows})
    report = "\n".join(
        f"  {r['case']}: argo {r['argo']} | cronsource {r['cronsource']}" for r in unexpected
    )
    assert not unexpected, f"{len(unexpected)} of {total} cases disagree with Argo:\n{report}"
    assert not stale, f"listed as differences but cronsource now agrees with Argo: {stale}"


@pytest.mark.parametrize("case", sorted(DELIBERATE))
def test_deliberate_differences_are_documented(case: str) -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "argo-compatibility.md"
    assert doc.is_file(), "docs/argo-compatibility.md lists the deliberate differences"
    phrase = DELIBERATE[case][1]
    text = " ".join(doc.read_text().split())  # a phrase may be wrapped across lines
    assert phrase in text, f"{case}: nothing about {phrase!r} in {doc.name}"
