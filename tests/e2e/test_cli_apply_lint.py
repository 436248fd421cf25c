"""`cronsource run PATHS` as a process (issue 21, item 4): restarting `run` on a file that says
`suspend: false` keeps a suspend made with the CLI, as kubectl's three-way apply would."""

from __future__ import annotations

import os
import subprocess
import time

from tests.integration.test_cli_apply_lint import ARGO_EXAMPLE, get, history
from tests.integration.test_cli_first_hour import EXE, ROOT, cs


def test_restarting_run_with_a_file_saying_suspend_false_keeps_a_cli_suspend(tmp_path):
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    d = tmp_path / "crons"
    d.mkdir()
    (d / "cron-workflow.yaml").write_text(ARGO_EXAMPLE)
    cs("apply", "-f", str(d), store=store)
    cs("suspend", "hello-world", store=store)
    env = {k: v for k, v in os.environ.items() if k != "CRONSOURCE_STORE"}
    assert EXE
    p = subprocess.Popen(
        [EXE, "--store", store, "run", str(d), "--workflows-dir", str(tmp_path / "wf")],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stderr is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = p.stderr.readline()
            lines.append(line)
            if line.startswith("next tick:") or not line:
                break
        text = "".join(lines)
    finally:
        p.terminate()
        p.wait(timeout=30)
    assert "hello-world unchanged" in text, text
    assert "warning: default/hello-world: spec.suspend kept at true" in text, text
    assert "next tick: none" in text, text
    assert get("hello-world", store)["spec"]["suspend"] is True
    assert "Resumed" not in history("hello-world", store)
