"""`kubectl apply -k deploy/` renders the kustomization with kustomize; the tests render it the
same way: `kustomize build` or `kubectl kustomize` when either is on PATH, else kustomize built
once per machine from its Go module (the Go module proxy, as the test API server is built)
into ~/.cache/cronsource/kustomize/VERSION. A missing Go toolchain fails, never skips."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

VERSION = "v5.5.0"  # what kubectl 1.32 embeds
MODULE = "sigs.k8s.io/kustomize/kustomize/v5"


def command() -> list[str]:
    if found := shutil.which("kustomize"):
        return [found, "build"]
    if found := shutil.which("kubectl"):
        return [found, "kustomize"]
    gobin = Path.home() / ".cache" / "cronsource" / "kustomize" / VERSION
    binary = gobin / "kustomize"
    if not binary.exists():
        go = shutil.which("go") or "/usr/local/go/bin/go"
        assert Path(go).exists(), "neither kubectl, kustomize nor go is installed"
        env = {**os.environ, "GOBIN": str(gobin), "GOFLAGS": "-mod=mod"}
        done = subprocess.run(
            [go, "install", f"{MODULE}@{VERSION}"], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, f"go install {MODULE}: {done.stderr[-3000:]}"
    return [str(binary), "build"]


def render(directory: Path) -> str:
    done = subprocess.run([*command(), str(directory)], capture_output=True, text=True)
    assert done.returncode == 0, f"kustomize {directory}: {done.stderr}"
    return done.stdout
