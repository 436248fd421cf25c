"""The `cronsource` command line: tables for people, `-o json|yaml|name` for machines.

Habits carry over from kubectl and `argo cron`: the global flags (`--store`, `-n`, `-A`, `-o`,
`-l`) go before or after the command, several names or a label selector where kubectl takes
them, `-f DIR` and `-f -`, `-h`. Every failure is one `error:` line naming the cause and the
fix, and a non-zero exit; an unknown name, namespace or event type is an error, never an
empty table. Bad input stores nothing: manifests are admitted in full (every document of
every file) before the first one is applied.

One module per command group, registered on the group of `registry` when imported here:
a new command is a function in the module of its group (or a new module imported below).
"""

from cronsource.adapters.entrypoints.cli import (  # noqa: F401  (each registers its commands)
    admission,
    backfill,
    handover,
    reads,
    run,
    serve,
    simulate,
    store,
    writes,
)
from cronsource.adapters.entrypoints.cli.context import NOTHING_RUNS
from cronsource.adapters.entrypoints.cli.registry import cli, main

__all__ = ["NOTHING_RUNS", "cli", "main"]
