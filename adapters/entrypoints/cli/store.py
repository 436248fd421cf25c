"""The store's own commands: `migrate`, `export` and `check`, and the retention flag `run` and
`serve` share.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from cronsource.adapters.application.explain import removed_before
from cronsource.adapters.application.loggaps import Gap, find_gaps, repair_gaps
from cronsource.adapters.application.operations import Operations
from cronsource.adapters.bootstrap import migrate
from cronsource.adapters.entrypoints.cli.context import (
    OUTPUTS,
    _obj,
    fail,
    global_options,
    now,
    parse_time,
    time_help,
)
from cronsource.adapters.entrypoints.cli.output import reader_gone
from cronsource.adapters.entrypoints.cli.registry import cli
from cronsource.adapters.infrastructure.store.check import StoreUnavailable, check_store
from cronsource.projections.readmodel import rfc3339


@cli.command(name="migrate")
@global_options(output=False, all_namespaces=False, selector=False, namespace=False)
def migrate_cmd() -> None:
    """Create or upgrade the store schema (PostgreSQL: once, before replicas start)."""
    obj = _obj()
    config = obj.store_config()
    try:
        check_store(config, need_tables=False)
        migrate(config)
    except StoreUnavailable as e:
        fail(str(e))
    click.echo(f"store {config.shown} ready")
    with obj.engine(catch_up=False) as engine:
        gaps = find_gaps(engine)
    if gaps:
        click.echo(
            f"warning: {_holes(gaps)}: run `cronsource check` to see them and"
            " `cronsource check --repair` to record the missing versions as lost",
            err=True,
        )


def _holes(gaps: list[Gap]) -> str:
    streams = len({g.stream for g in gaps})
    return f"{len(gaps)} hole(s) in {streams} stream(s) of the log"


@cli.command(name="export")
@click.option(
    "--before", required=True, help=time_help("events that happened before it", named=False)
)
@click.option(
    "-o",
    "--output-file",
    "output_file",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="JSON Lines file to write (gzip when it ends in .gz; - for stdout)",
)
@global_options(output=False, all_namespaces=False, selector=False, namespace=False)
def export_cmd(before: str, output_file: str) -> None:
    """Write the audit log's events before a time as JSON Lines, one event a line, in log
    order: for teams that keep their audit elsewhere before `run --retain` removes it.
    Each line is an event as `history -o json` shows it, with its log `position`."""
    import gzip

    obj = _obj()
    if output_file in OUTPUTS:
        fail(
            f"--output-file {output_file}: a file name, not an output format (export writes"
            " JSON Lines; - for stdout)"
        )
    until = parse_time(before, "--before")
    written = 0
    with obj.operations(must_exist=True) as ops:
        kept_from = ops.kept_from()
        if kept_from is not None:
            # As `history` says it: an export for an auditor that silently starts at the
            # window's start reads as the whole record before --before.
            click.echo(f"note: {removed_before(kept_from)}", err=True)
        out: Any
        aside: Path | None = None  # the file written, renamed over `output_file` when complete
        try:
            if output_file == "-":
                out = sys.stdout
            else:
                aside = _aside(Path(output_file))
                target = str(aside or output_file)
                if output_file.endswith(".gz"):
                    out = gzip.open(target, "wt", encoding="utf-8")
                else:
                    out = open(target, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
        except OSError as e:  # a missing directory, no permission: the flag, not a traceback
            fail(f"--output-file {output_file}: {e.strerror or e}")
        try:
            after = 0
            while True:
                rows = ops.audit_until(until, after, 5000)
                rows = [r for r in rows if r.at < until]
                for r in rows:
                    out.write(json.dumps({"position": r.notification_id, **r.as_event()}) + "\n")
                written += len(rows)
                if len(rows) < 5000 or (out is sys.stdout and reader_gone()):
                    break  # the end, or nobody reads on (`export -o - | head`)
                after = rows[-1].notification_id
            if out is not sys.stdout:
                out.close()
            if aside is not None:
                _put_in_place(aside, Path(output_file))
                aside = None
        except OSError as e:  # the disk full, a file that takes no writes: name the file
            fail(f"--output-file {output_file}: {e.strerror or e}")
        finally:
            if out is not sys.stdout:
                with contextlib.suppress(OSError):
                    out.close()
            if aside is not None:
                aside.unlink(missing_ok=True)
        if output_file == "-":
            with contextlib.suppress(OSError):
                sys.stdout.flush()  # a reader that left after the last write is found here
            if reader_gone():
                # Quiet, as every command whose reader left (`| head`), and never "exported
                # N": what went into the pipe was not all read.
                return
    click.echo(f"exported {written} event(s) before {rfc3339(until)}", err=True)


def _aside(path: Path) -> Path | None:
    """Where an export to `path` is written until it is complete: a new file beside it, so
    an export that fails (a full disk, the store gone) leaves neither a truncated earlier
    export, which may hold events retention has removed since, nor a part that reads as a
    whole record. None for what is not a regular file (a pipe, /dev/stdout): written as it
    is."""
    if path.exists() and not path.is_file():
        return None
    aside = path.with_name(f".{path.name}.{secrets.token_hex(6)}.part")
    # The mode `open` gives a new file (0666 less the umask), or the earlier export's.
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o666
    os.close(os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
    return aside


def _put_in_place(aside: Path, path: Path) -> None:
    """The complete export, on disk (fsync) before it replaces `path` in one rename."""
    fd = os.open(aside, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(aside, path)


@cli.command(name="check")
@click.option(
    "--repair",
    is_flag=True,
    help="Record each missing version as lost (a VersionsLost event), so the stream replays.",
)
@global_options(output=False, all_namespaces=False, selector=False, namespace=False)
def check_cmd(repair: bool) -> None:
    """Find streams with missing versions in the log.

    An older cronsource could save on top of a log that had lost its tail (a failover to an
    asynchronous standby); such a stream cannot be replayed. Exits 1 when there are holes
    and --repair was not given.
    """
    obj = _obj()
    with obj.engine(catch_up=False, must_exist=True) as engine:
        gaps = find_gaps(engine)
        if not gaps:
            click.echo("no stream in the log has missing versions")
            return
        for gap in gaps:
            click.echo(gap.describe())
        if not repair:
            fail(f"{_holes(gaps)}: run `cronsource check --repair` to record them as lost")
        n = repair_gaps(engine, gaps, now())
        click.echo(
            f"recorded {n} missing version(s) as lost (VersionsLost); {_holes(gaps)} repaired"
        )


def retain_option(text: str | None) -> timedelta | None:
    """`--retain` of `run` and `serve`: None (keep everything), or a retention of at least
    a day (one line and exit 1 otherwise; `run` also checks the longest deadline)."""
    if text is None:
        return None
    from cronsource.adapters.runtime.retention import RetentionTooShort, check_retain

    try:
        retain = parse_retain(text)
        check_retain(retain, timedelta(0), text)
    except (ValueError, RetentionTooShort) as e:
        fail(e.args[0] if isinstance(e, RetentionTooShort) else f"--retain: {e}")
    return retain


def parse_retain(text: str) -> timedelta:
    """A retention: Go's durations (`2160h`), whole days (`90d`), as kubectl users write them
    for log retention, and days followed by a Go duration (`1d12h`: it was refused while
    `36h` was taken)."""
    import re

    from cronsource.domain.durations import MAX_SECONDS, parse_duration

    days = re.fullmatch(r"(\d+)d(.*)", text)
    if days is None:
        return parse_duration(text)
    count, rest = days.groups()
    # The bound of every other duration (at most 100 years), checked on the total below;
    # a count too long even for timedelta (`9999999999d`, an OverflowError) is past it too.
    if len(count) > 6:
        raise ValueError(f"duration {text!r} is longer than 100 years")
    try:
        total = timedelta(days=int(count)) + (parse_duration(rest) if rest else timedelta(0))
    except ValueError:
        raise ValueError(
            f"invalid duration {text!r} (expected e.g. '90d', '2160h' or '1d12h')"
        ) from None
    if total.total_seconds() > MAX_SECONDS:
        raise ValueError(f"duration {text!r} is longer than 100 years")
    return total


def retain_refused(ops: Operations, retain: timedelta, shown: str) -> str | None:
    """Why `--retain` (`shown` as the user wrote it) is refused for this store, `run` and
    `serve` alike: shorter than the longest startingDeadlineSeconds of its CronWorkflows.
    None when it is taken."""
    from cronsource.adapters.runtime.retention import RetentionTooShort, check_retain

    deadline = timedelta(seconds=ops.engine.view.longest_deadline())
    try:
        check_retain(retain, deadline, shown)
    except RetentionTooShort as e:
        return str(e)
    return None
