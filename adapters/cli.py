"""The `cronsource` command line: tables for people, `-o json|yaml|name` for machines.

Habits carry over from kubectl and `argo cron`: the global flags (`--store`, `-n`, `-A`, `-o`,
`-l`) go before or after the command, several names or a label selector where kubectl takes
them, `-f DIR` and `-f -`, `-h`. Every failure is one `error:` line naming the cause and the
fix, and a non-zero exit; an unknown name, namespace or event type is an error, never an
empty table. Bad input stores nothing: manifests are admitted in full (every document of
every file) before the first one is applied.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import metadata
from typing import Any, NoReturn
from zoneinfo import ZoneInfo

import click
import yaml
from click.shell_completion import CompletionItem, get_completion_class
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from adapters.api import EVENT_TYPES, SKIP_REASONS, FieldError
from adapters.engine import Engine, build_engine, migrate
from adapters.explain import explain, removed_before
from adapters.loggaps import Gap, find_gaps, repair_gaps
from adapters.manifestfiles import Admission, admit_files
from adapters.objects import backfill_result, next_fire_times
from adapters.presence import schedulers_running
from adapters.selectors import parse_label_selector, select
from adapters.store import StoreConfig, StoreURLError
from adapters.storecheck import StoreUnavailable, check_store, describe
from domain.backfill import (
    DEFAULT_MAX_BACKFILL_TICKS,
    OVERLAPS,
    BackfillPlan,
    BackfillTooLarge,
    HistoryRemoved,
)
from domain.cronworkflow import CronWorkflow
from domain.manifest import CronWorkflowManifest, ManifestError
from domain.service import Applied, NotFound
from domain.timestamps import TimestampError, parse_timestamp
from projections.readmodel import StatusRow, rfc3339

OUTPUTS = ("table", "wide", "json", "yaml", "name")
KIND = "cronworkflow.argoproj.io"
#: `get cronworkflow NAME` as kubectl takes it: the resource word is optional.
RESOURCE_WORDS = {"cronworkflow", "cronworkflows", "cwf", "cronwf", "cronworkflow.argoproj.io"}
err_console = Console(stderr=True)
#: What `list`, `get`, `apply`, `trigger` and `backfill` say when no scheduler holds the store.
NOTHING_RUNS = (
    "warning: no `cronsource run` is running on this store: nothing fires, and no Workflow is"
    " created, until one runs"
)


def now() -> datetime:
    """The real clock, read here at the edge and passed into every domain command."""
    return datetime.now(UTC)


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def parse_time(value: str, flag: str) -> datetime:
    """RFC 3339 between 1970 and 2199 (domain/timestamps.py, as the HTTP API: cron arithmetic
    near year 9999 overflows, and no schedule question needs it)."""
    try:
        return parse_timestamp(value, flag, naive_is_utc=True)
    except TimestampError as e:
        fail(str(e))


def read_input(path: str, code: int = 1) -> bytes:
    """The bytes of a file ('-' is stdin), at most MAX_INPUT_BYTES (exit `code` beyond: a
    huge file is refused before it is read into memory)."""
    from adapters.documents import MAX_INPUT_BYTES

    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        fail(f"{path}: {e.strerror}", code)
    if len(data) > MAX_INPUT_BYTES:
        fail(f"{path}: larger than the limit of {MAX_INPUT_BYTES} bytes (3 MiB)", code)
    return data


# ---------------------------------------------------------------------- global flags


@dataclass
class Ctx:
    """The global flags, from before or after the command (the later one wins)."""

    store: str | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    output: str = "table"
    selector: str | None = None
    config: StoreConfig | None = field(default=None, repr=False)
    #: Whether no `cronsource run` holds the store (None: not asked yet; see `unscheduled`).
    nothing_runs: bool | None = field(default=None, repr=False)

    @property
    def ns(self) -> str:
        return self.namespace or "default"

    def store_config(self) -> StoreConfig:
        try:
            self.config = StoreConfig.parse(self.store)
        except StoreURLError as e:
            fail(str(e))
        return self.config

    def unscheduled(self, engine: Engine) -> bool:
        """Whether no `cronsource run` holds the store (adapters/presence.py, what the status
        page reads too), asked once per command. A store that cannot say (`memory:`, or a
        failed query) gets no warning."""
        if self.nothing_runs is None:
            try:
                self.nothing_runs = schedulers_running(engine) == 0
            except Exception:
                self.nothing_runs = False
        return self.nothing_runs

    @contextmanager
    def engine(self, *, catch_up: bool = True, notice: bool = False) -> Iterator[Engine]:
        """The engine over a store that answers and is migrated, or one `error:` line.
        `notice`: once the command succeeded, say on stderr when no `cronsource run` holds
        the store (nothing it recorded fires until one does)."""
        config = self.store_config()
        try:
            check_store(config)
        except StoreUnavailable as e:
            fail(str(e))
        try:
            engine = build_engine(config)
        except Exception as e:  # the store broke between the check and now
            fail(describe(e, config))
        try:
            # The one place a CLI command touches the projections: read what is projected
            # (projecting first only when no projector runs anywhere), and before exiting
            # wait until the status view shows what the command wrote (adapters/projector.py).
            if catch_up:
                engine.projector.settle(wait=False)
            with engine.service.receipt() as wrote:
                yield engine
            engine.projector.settle(wrote)
            if notice and self.unscheduled(engine):
                click.echo(NOTHING_RUNS, err=True)
        finally:
            engine.close()


def _obj() -> Ctx:
    return click.get_current_context().ensure_object(Ctx)


def _setter(attr: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def set_value(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is None or value is False:
            return
        setattr(ctx.ensure_object(Ctx), attr, value)

    return set_value


def global_options(
    *, output: bool = True, all_namespaces: bool = True, selector: bool = True
) -> Callable[[Any], Any]:
    """The global flags on a command too, so they may follow it (`get hello -n team-a`)."""

    def deco(f: Any) -> Any:
        opts = [
            click.option(
                "--store",
                envvar="CRONSOURCE_STORE",
                expose_value=False,
                callback=_setter("store"),
                help="sqlite:///PATH (default ./cronsource.db), postgresql://USER@HOST/DB, memory:",
            ),
            click.option(
                "-n",
                "--namespace",
                expose_value=False,
                callback=_setter("namespace"),
                help="namespace (default: default)",
            ),
        ]
        if all_namespaces:
            opts.append(
                click.option(
                    "-A",
                    "--all-namespaces",
                    is_flag=True,
                    default=None,
                    expose_value=False,
                    callback=_setter("all_namespaces"),
                    help="every namespace",
                )
            )
        if output:
            opts.append(
                click.option(
                    "-o",
                    "--output",
                    type=click.Choice(OUTPUTS),
                    expose_value=False,
                    callback=_setter("output"),
                    help="table (default), wide, json, yaml or name",
                )
            )
        if selector:
            opts.append(
                click.option(
                    "-l",
                    "--selector",
                    expose_value=False,
                    callback=_setter("selector"),
                    help="label selector, e.g. team=data,tier in (a,b),!legacy",
                )
            )
        for o in reversed(opts):
            f = o(f)
        return f

    return deco


# ---------------------------------------------------------------------- output


def _plain(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """kubectl's columns: left-aligned, three spaces apart, no box drawing (for pipes)."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = [
        "   ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()
        for r in [headers, *rows]
    ]
    return "\n".join(lines)


@dataclass
class View:
    """One command's output in every format: data for json/yaml, columns for tables."""

    data: Any
    headers: list[str]
    rows: list[list[str]]
    wide_headers: list[str] = field(default_factory=list)
    wide_rows: list[list[str]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    title: str = ""
    empty: str = ""


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> None:
    """A rich table on a terminal, plain columns when stdout is a pipe or a file."""
    if sys.stdout.isatty():
        t = Table(*headers, title=title or None)
        for r in rows:
            t.add_row(*r)
        Console().print(t)
    else:
        if title:
            click.echo(title)
        click.echo(_plain(headers, rows))


def emit(view: View, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(view.data, indent=2, default=str))
    elif output == "yaml":
        click.echo(yaml.safe_dump(json.loads(json.dumps(view.data, default=str)), sort_keys=False))
    elif output == "name":
        for n in view.names:
            click.echo(n)
    elif not view.rows and view.empty:
        click.echo(view.empty, err=True)
    elif output == "wide" and view.wide_headers:
        rows = [r + w for r, w in zip(view.rows, view.wide_rows, strict=False)]
        print_table(view.headers + view.wide_headers, rows, view.title)
    else:
        print_table(view.headers, view.rows, view.title)


def ago(t: datetime | None, ref: datetime) -> str:
    """`in 3m`, `5s ago`: beside an absolute time, so nobody has to subtract."""
    if t is None:
        return "-"
    s = int((t - ref).total_seconds())
    n = abs(s)
    text = (
        f"{n}s"
        if n < 90
        else f"{n // 60}m"
        if n < 5400
        else f"{n // 3600}h"
        if n < 172800
        else f"{n // 86400}d"
    )
    return f"in {text}" if s >= 0 else f"{text} ago"


# ---------------------------------------------------------------------- the group


class CronsourceGroup(click.Group):
    """Resolves `ls`/`rm` aliases and turns any unexpected error into one line."""

    aliases = {"ls": "list", "rm": "delete", "unsuspend": "resume", "run-now": "trigger"}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as e:
            if os.environ.get("CRONSOURCE_DEBUG"):
                raise
            config = ctx.find_object(Ctx)
            fail(describe(e, config.config if config else None))


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(_version_line())
    ctx.exit(0)


def _version_line() -> str:
    def v(pkg: str) -> str:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return "?"

    py = ".".join(map(str, sys.version_info[:3]))
    return (
        f"cronsource {v('cronsource')} (python {py}, eventsourcing {v('eventsourcing')},"
        f" psycopg {v('psycopg')}, click {v('click')})"
    )


@click.group(
    cls=CronsourceGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Global flags go before or after the command. Shell completion: "
    "`cronsource completion bash|zsh|fish`.",
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="print the version and exit",
)
@global_options()
def cli() -> None:
    """cronsource: an event-sourced scheduler for Argo CronWorkflows."""
    _obj()


def _complete_names(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
    """CronWorkflow names from the store, for shell completion (quiet when it is closed)."""
    try:
        obj = ctx.find_object(Ctx) or Ctx()
        config = StoreConfig.parse(obj.store)
        check_store(config)
        engine = build_engine(config)
        try:
            names = sorted({c.name for c in engine.view.statuses(obj.ns)})
        finally:
            engine.close()
    except Exception:
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def name_argument(required: bool = True, many: bool = False) -> Callable[[Any], Any]:
    return click.argument(
        "names" if many else "name",
        nargs=-1 if many else 1,
        required=required,
        shell_complete=_complete_names,
    )


# ---------------------------------------------------------------------- admission


def read_files(
    paths: Sequence[str],
    namespace: str | None = None,
    *,
    only_cronworkflows: bool = False,
    exclude: str | None = None,
    strict: bool = False,
) -> Admission:
    """Every document of every path, admitted (adapters/manifestfiles.py), its problems and
    warnings printed, one `error:`/`warning:` line each; the caller decides the exit."""
    got = admit_files(
        paths,
        sys.stdin.buffer,
        namespace,
        only_cronworkflows=only_cronworkflows,
        exclude=exclude,
        strict=strict,
    )
    for line in got.problems:
        click.echo(f"error: {line}", err=True)
    for line in got.warnings:
        click.echo(f"warning: {line}", err=True)
    return got


def admit(
    paths: Sequence[str],
    namespace: str | None = None,
    *,
    only_cronworkflows: bool = False,
    exclude: str | None = None,
) -> list[CronWorkflowManifest]:
    """The manifests to apply, or exit 1 after naming every problem of every file: nothing
    is applied when any file is bad, and when others were fine that is said, so a silent
    directory apply cannot be taken for a done one. `run PATHS` (`only_cronworkflows`)
    names each document it skips; `apply` counts them."""
    got = read_files(paths, namespace, only_cronworkflows=only_cronworkflows, exclude=exclude)
    if only_cronworkflows:
        for source, what in got.skipped:
            click.echo(f"skipped {source}: {what} is not a CronWorkflow", err=True)
    elif got.skipped:
        n = len(got.skipped)
        click.echo(
            f"{n} other document{'s' if n != 1 else ''} skipped (not CronWorkflows)", err=True
        )
    if got.problems:
        if got.manifests:
            n, bad = len(got.manifests), len(got.bad_files)
            fail(
                f"nothing applied: {bad} of {got.files} file(s) have errors"
                f" ({n} valid CronWorkflow(s) not applied either)"
            )
        sys.exit(1)
    if not got.manifests:
        fail("found no CronWorkflow in the specified files")  # Argo: "found nothing to lint"
    return [m for _, m in got.manifests]


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option(
    "--strict",
    is_flag=True,
    help="a name Argo does not define in `when` or `stopStrategy` is an error, not a warning",
)
@global_options(output=False, all_namespaces=False, selector=False)
def lint(files: tuple[str, ...], strict: bool) -> None:
    """Validate manifests (files, directories, - for stdin): every bad file is named, one
    line per problem, and the exit is 1 when any is bad."""
    got = read_files(files, strict=strict)
    if not got.manifests and not got.problems:
        fail("found no CronWorkflow in the specified files")  # Argo: "found nothing to lint"
    click.echo(got.summary())
    if got.problems:
        sys.exit(1)


@cli.command()
@click.option(
    "-f", "--filename", "files", multiple=True, required=True, help="file, directory or -"
)
@click.option(
    "--force-conflicts",
    "--overwrite",
    "force",
    is_flag=True,
    help="take the file's values also where another writer changed a field since the last apply",
)
@global_options(all_namespaces=False, selector=False)
def apply(files: tuple[str, ...], force: bool) -> None:
    """Create or update CronWorkflows, as `kubectl apply`: a three-way merge of the last
    applied file, this file and the live object. A field the file does not set keeps its
    live value, and so does one another writer (`cronsource suspend`, an HTTP PUT) changed
    since the last apply while the file's value for it is unchanged; --force-conflicts
    takes the file's values. An unchanged file changes nothing and says `unchanged`."""
    obj = _obj()
    manifests = admit(files, obj.namespace)
    names: list[str] = []

    def applied(m: CronWorkflowManifest, result: Applied) -> None:
        names.append(f"{KIND}/{m.metadata.name}")
        if obj.output != "name":
            click.echo(f"{names[-1]} {result.what}")

    with obj.engine(notice=True) as engine:
        apply_all(engine, manifests, applied, force=force)
    if obj.output == "name":
        click.echo("\n".join(names))


def apply_all(
    engine: Engine,
    manifests: Sequence[CronWorkflowManifest],
    applied: Callable[[CronWorkflowManifest, Applied], None],
    *,
    force: bool = False,
) -> None:
    """Apply every manifest three-way (`apply` and `run PATHS`): its notes as `warning:`
    lines, then `applied` says what it did. First every merge is decided without saving: one
    whose result is not a valid CronWorkflow (a value another writer set, merged with the
    file's) refuses them all, naming it, so files valid on their own are never half applied."""
    refused = []
    for m in manifests:
        try:
            engine.service.apply_config(m, now(), force=force, dry_run=True)
        except ManifestError as e:
            refused.append(str(e))
    if refused:
        for line in refused:
            click.echo(f"error: {line}", err=True)
        n = len(manifests)
        fail(f"nothing applied: {len(refused)} of {n} CronWorkflow(s) would not be valid")
    for m in manifests:
        try:
            result: Applied = engine.service.apply_config(m, now(), force=force)
        except ManifestError as e:  # another writer changed it since the check just above
            fail(str(e))
        for note in result.notes:
            click.echo(f"warning: {note}", err=True)
        applied(m, result)


@cli.command(name="migrate")
@global_options(output=False, all_namespaces=False, selector=False)
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
@click.option("--before", required=True, help="RFC 3339: events that happened before it")
@click.option(
    "-o",
    "--output-file",
    "output_file",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="JSON Lines file to write (gzip when it ends in .gz; - for stdout)",
)
@global_options(output=False, all_namespaces=False, selector=False)
def export_cmd(before: str, output_file: str) -> None:
    """Write the audit log's events before a time as JSON Lines, one event a line, in log
    order: for teams that keep their audit elsewhere before `run --retain` removes it.
    Each line is an event as `history -o json` shows it, with its log `position`."""
    import gzip

    obj = _obj()
    until = parse_time(before, "--before")
    written = 0
    with obj.engine() as engine:
        out: Any
        if output_file == "-":
            out = sys.stdout
        elif output_file.endswith(".gz"):
            out = gzip.open(output_file, "wt", encoding="utf-8")
        else:
            out = open(output_file, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
        try:
            after = 0
            while True:
                rows = engine.view.audit(until=until, after_position=after, limit=5000)
                rows = [r for r in rows if r.at < until]
                for r in rows:
                    out.write(json.dumps({"position": r.notification_id, **r.as_event()}) + "\n")
                written += len(rows)
                if len(rows) < 5000:
                    break
                after = rows[-1].notification_id
        finally:
            if out is not sys.stdout:
                out.close()
    click.echo(f"exported {written} event(s) before {rfc3339(until)}", err=True)


@cli.command(name="check")
@click.option(
    "--repair",
    is_flag=True,
    help="Record each missing version as lost (a VersionsLost event), so the stream replays.",
)
@global_options(output=False, all_namespaces=False, selector=False)
def check_cmd(repair: bool) -> None:
    """Find streams with missing versions in the log.

    An older cronsource could save on top of a log that had lost its tail (a failover to an
    asynchronous standby); such a stream cannot be replayed. Exits 1 when there are holes
    and --repair was not given.
    """
    obj = _obj()
    with obj.engine(catch_up=False) as engine:
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


# ---------------------------------------------------------------------- reading


def retain_option(text: str | None) -> timedelta | None:
    """`--retain` of `run` and `serve`: None (keep everything), or a retention of at least
    a day (one line and exit 1 otherwise; `run` also checks the longest deadline)."""
    if text is None:
        return None
    from adapters.runtime.retention import RetentionTooShort, check_retain

    try:
        retain = parse_retain(text)
        check_retain(retain, timedelta(0))
    except (ValueError, RetentionTooShort) as e:
        fail(e.args[0] if isinstance(e, RetentionTooShort) else f"--retain: {e}")
    return retain


def parse_retain(text: str) -> timedelta:
    """A retention: Go's durations (`2160h`) and whole days (`90d`), as kubectl users write
    them for log retention."""
    from domain.durations import parse_duration

    if text.endswith("d") and text[:-1].isdigit():
        return timedelta(days=int(text[:-1]))
    return parse_duration(text)


def longest_deadline(engine: Engine) -> timedelta:
    """The longest startingDeadlineSeconds of the live CronWorkflows in the store."""
    seconds = [int(row.spec.get("startingDeadlineSeconds") or 0) for row in engine.view.statuses()]
    return timedelta(seconds=max(seconds, default=0))


def known_namespaces(engine: Engine) -> list[str]:
    return engine.view.audit_namespaces()


def check_namespace(engine: Engine, obj: Ctx) -> None:
    """An explicit `-n` that never held a CronWorkflow is a typo until shown otherwise."""
    if obj.namespace is None or obj.all_namespaces:
        return
    # The common case (it exists) is an index search; listing every namespace scans the whole
    # audit (44 ms at a million events, bench/history.py), so only the error message does.
    if not engine.view.has_namespace(obj.namespace):
        known = known_namespaces(engine)
        fail(
            f"namespace {obj.namespace!r} has no CronWorkflows"
            f" (namespaces in this store: {', '.join(known) or 'none'})"
        )


def selected(rows: list[StatusRow], obj: Ctx) -> list[StatusRow]:
    try:
        return select(rows, parse_label_selector(obj.selector))
    except FieldError as e:
        fail(f"-l {obj.selector!r}: {e.message}")


def _schedules(spec: dict[str, Any]) -> str:
    return ", ".join(spec.get("schedules") or [spec.get("schedule", "")])


def _list_view(rows: list[StatusRow], obj: Ctx) -> View:
    t0 = now()
    show_ns = obj.all_namespaces
    table, wide = [], []
    for c in rows:
        spec, st = c.spec, c.status
        nxt = c.next_due
        last = st.get("lastScheduledTime")
        last_t = parse_timestamp(last, "lastScheduledTime", bounded=False) if last else None
        table.append(
            ([c.namespace] if show_ns else [])
            + [
                c.name,
                _schedules(spec),
                spec.get("timezone") or "UTC",
                str(spec.get("suspend", False)).lower(),
                str(len(st.get("active") or [])),
                f"{last} ({ago(last_t, t0)})" if last else "-",
                f"{rfc3339(nxt)} ({ago(nxt, t0)})" if nxt else "-",
            ]
        )
        wide.append(
            [
                spec.get("concurrencyPolicy", "Allow"),
                str(st.get("succeeded", 0)),
                str(st.get("failed", 0)),
                ",".join(f"{k}={v}" for k, v in (c.metadata.get("labels") or {}).items()) or "-",
            ]
        )
    headers = (["NAMESPACE"] if show_ns else []) + [
        "NAME",
        "SCHEDULES",
        "TIMEZONE",
        "SUSPENDED",
        "ACTIVE",
        "LAST RUN",
        "NEXT RUN",
    ]
    where = "any namespace" if show_ns else f"namespace {obj.ns}"
    return View(
        data={
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflowList",
            "metadata": {},
            "items": [c.as_object() for c in rows],
        },
        headers=headers,
        rows=table,
        wide_headers=["CONCURRENCY", "SUCCEEDED", "FAILED", "LABELS"],
        wide_rows=wide,
        names=[f"{KIND}/{c.name}" for c in rows],
        empty=f"No CronWorkflows found in {where}"
        + (f" matching -l {obj.selector!r}." if obj.selector else "."),
    )


def _list(obj: Ctx) -> None:
    with obj.engine(notice=True) as engine:
        check_namespace(engine, obj)
        rows = selected(engine.view.statuses(None if obj.all_namespaces else obj.ns), obj)
    emit(_list_view(rows, obj), obj.output)


@cli.command(name="list")
@global_options()
def list_cmd() -> None:
    """CronWorkflows with schedules, time zone, suspended, last and next run (alias ls)."""
    _list(_obj())


def _find(engine: Engine, namespace: str, name: str) -> StatusRow:
    for c in engine.view.statuses(namespace):
        if c.name == name:
            return c
    fail(f"cronworkflow {namespace}/{name} not found")


def _resolved_row(spec: dict[str, Any], st: dict[str, Any]) -> list[list[str]]:
    """`argo cron get`'s ResolvedSchedules line (Argo PR #16604): every schedule with its `H`
    items resolved, shown only when one has any."""
    resolved = st.get("resolvedSchedules") or {}
    if not resolved:
        return []
    listed = spec.get("schedules") or [spec.get("schedule", "")]
    return [["ResolvedSchedules", ", ".join(resolved.get(s, s) for s in listed)]]


def _get_view(c: StatusRow) -> View:
    spec, st = c.spec, c.status
    t0 = now()
    nxt = c.next_due
    rows = [
        ["Name", c.name],
        ["Namespace", c.namespace],
        ["Schedules", _schedules(spec)],
        *_resolved_row(spec, st),
        ["Timezone", spec.get("timezone") or "UTC"],
        ["Concurrency", spec.get("concurrencyPolicy", "Allow")],
        ["Suspended", str(spec.get("suspend", False)).lower()],
        ["Phase", st.get("phase", "")],
        ["LastScheduledTime", st.get("lastScheduledTime") or "-"],
        ["NextScheduledTime", f"{rfc3339(nxt)} ({ago(nxt, t0)})" if nxt else "-"],
        ["Active", ", ".join(a["name"] for a in st.get("active") or []) or "-"],
        ["Succeeded/Failed", f"{st.get('succeeded', 0)}/{st.get('failed', 0)}"],
    ]
    for cond in st.get("conditions") or []:
        rows.append([f"Condition {cond['type']}", cond.get("message", "")])
    return View(c.as_object(), ["FIELD", "VALUE"], rows, names=[f"{KIND}/{c.name}"])


@cli.command()
@click.argument("names", nargs=-1, shell_complete=_complete_names)
@global_options()
def get(names: tuple[str, ...]) -> None:
    """One CronWorkflow as `argo cron get`; several, or none (all), as a list."""
    obj = _obj()
    names = tuple(n for n in names if n.lower() not in RESOURCE_WORDS)
    if not names:
        _list(obj)
        return
    with obj.engine(notice=True) as engine:
        rows = [_find(engine, obj.ns, n) for n in names]
    if len(rows) == 1 and obj.output in ("table", "json", "yaml"):
        view = _get_view(rows[0])
        if obj.output == "table":  # `argo cron get`: one field a line
            width = max(len(r[0]) for r in view.rows) + 2
            for k, v in view.rows:
                click.echo(f"{k + ':':<{width}}{v}")
            return
        emit(view, obj.output)
        return
    emit(_list_view(rows, obj), obj.output)


def _event_type(value: str) -> str:
    for t in EVENT_TYPES:
        if t.lower() == value.lower():
            return t
    fail(f"--type: unknown event type {value!r} (one of: {', '.join(EVENT_TYPES)})")


def _reason(value: str) -> str:
    for r in SKIP_REASONS:
        if r.lower() == value.lower():
            return r
    fail(f"--reason: unknown skip reason {value!r} (one of: {', '.join(SKIP_REASONS)})")


def ticks_cell(e: dict[str, Any]) -> str:
    """How many ticks an event covers: a folded skip (or a queue) says until when."""
    count = e.get("count")
    if count is None:
        return "1" if e["type"] == "ScheduleFired" else "-"
    last = e.get("lastScheduledTime")
    return f"{count} until {last}" if count > 1 and last else str(count)


def detail_cell(e: dict[str, Any]) -> str:
    """What happened, in a word or two: trigger, reason, phase, who."""
    t = e["type"]
    if t == "ScheduleFired":
        out = f"trigger={e.get('trigger', 'schedule')}"
        if e.get("replaced"):
            out += f" replaced={','.join(e['replaced'])}"
        return out
    if t == "ScheduleSkipped":
        return f"reason={e.get('reason')}" + (f": {e['message']}" if e.get("message") else "")
    if t == "RunCompleted":
        return f"phase={e.get('phase')}" + (
            f" finished={e['finishedAt']}" if e.get("finishedAt") else ""
        )
    if t in ("Suspended", "Resumed"):
        parts = [f"by={e['by']}" if e.get("by") else "", e.get("note") or ""]
        return " ".join(p for p in parts if p) or "-"
    if t == "BackfillQueued":
        return f"overlap={e.get('overlap')} parallel={e.get('parallel')}"
    if t == "HistoryPruned":
        return "removed " + ",".join(e.get("workflows") or [])
    if t == "RunNotStarted":
        return f"reason={e.get('reason')}: {e.get('message')}"
    if t in ("SubmissionFailed", "SpecRejected", "Stopped"):
        transient = " (transient, retried)" if e.get("transient") else ""
        return (e.get("message") or e.get("reason") or "-") + transient
    if t == "SpecUpdated":
        return f"generation={e.get('generation')}"
    if t == "StatusAdopted":
        from adapters.kubeadopt import adopted_cell

        return adopted_cell(e)
    return "-"


def _events_view(events: list[dict[str, Any]], with_cron: bool, empty: str) -> View:
    headers = (["CRONWORKFLOW"] if with_cron else []) + [
        "VERSION",
        "TYPE",
        "AT",
        "SCHEDULED",
        "TICKS",
        "WORKFLOW",
        "DETAIL",
    ]
    rows = [
        ([e["cronWorkflow"]] if with_cron else [])
        + [
            str(e["version"]),
            e["type"],
            e["at"],
            e["scheduledTime"] or "-",
            ticks_cell(e),
            e["workflow"] or "-",
            detail_cell(e),
        ]
        for e in events
    ]
    return View(
        events,
        headers,
        rows,
        names=[f"{e['cronWorkflow']}@{e['version']}" for e in events],
        empty=empty,
    )


@cli.command()
@name_argument(required=False)
@click.option("--since", default=None, help="RFC 3339: events at or after it")
@click.option("--until", default=None, help="RFC 3339: events at or before it")
@click.option("--type", "types", multiple=True, help="event type, e.g. ScheduleFired (repeatable)")
@click.option("--reason", "reasons", multiple=True, help="skip reason, e.g. Suspended (repeatable)")
@global_options()
def history(
    name: str | None,
    since: str | None,
    until: str | None,
    types: tuple[str, ...],
    reasons: tuple[str, ...],
) -> None:
    """The audit log of one CronWorkflow (or, without NAME, of the namespace): every fire
    and skip, and why."""
    obj = _obj()
    s = parse_time(since, "--since") if since else None
    u = parse_time(until, "--until") if until else None
    if s and u and u < s:
        fail(f"--until {until} is before --since {since}")
    want_types = tuple(_event_type(t) for t in types)
    want_reasons = {_reason(r) for r in reasons}
    with obj.engine() as engine:
        check_namespace(engine, obj)
        ns = None if obj.all_namespaces and not name else obj.ns
        if name and not engine.view.ever_existed(obj.ns, name):
            fail(f"cronworkflow {obj.ns}/{name} not found (never applied in namespace {obj.ns})")
        rows = engine.view.audit(ns, name, since=s, until=u, types=want_types)
        kept_from = engine.view.kept_from()
        if kept_from is not None and (s is None or s < kept_from):
            click.echo(f"note: {removed_before(kept_from)}", err=True)
        if obj.selector:
            keep = {
                (c.namespace, c.name)
                for c in selected(engine.view.statuses(ns, include_deleted=True), obj)
            }
            rows = [r for r in rows if (r.namespace, r.name) in keep]
    if want_reasons:
        rows = [r for r in rows if r.reason in want_reasons]
    events = [r.as_event() for r in rows]
    emit(_events_view(events, not name, "No events match."), obj.output)


@cli.command()
@name_argument()
@click.option("--at", "at_", required=True, help="RFC 3339 time of the tick in question")
@global_options(all_namespaces=False, selector=False)
def why(name: str, at_: str) -> None:
    """Why did (or didn't) it run at T: the decision covering T (fired, skipped and why,
    pending, not a tick) and the event behind it (the query of GET .../decision)."""
    obj = _obj()
    t = parse_time(at_, "--at")
    with obj.engine() as engine:
        queries = engine.view
        rows = queries.decisions_at(obj.ns, name, t)
        kept_from = queries.kept_from()
        try:
            agg: CronWorkflow | None = engine.service.find(obj.ns, name)
        except NotFound:
            if not queries.ever_existed(obj.ns, name):
                fail(f"cronworkflow {obj.ns}/{name} not found")
            agg = None
    d = explain(agg, t, rows, kept_from)
    if obj.output in ("json", "yaml"):
        emit(View(d, [], []), obj.output)
        return
    if obj.output == "name":
        click.echo(d["outcome"])
        return
    reason = f" ({d['reason']})" if d.get("reason") else ""
    click.echo(f"{obj.ns}/{name} at {d['at']}: {d['outcome']}{reason}")
    click.echo(d["explanation"])
    if d["decisions"]:
        v = _events_view(d["decisions"], False, "")
        print_table(v.headers, v.rows)


@cli.command(name="next")
@name_argument()
@click.option("-c", "--count", default=5, show_default=True, type=click.IntRange(1, 1000))
@global_options(all_namespaces=False, selector=False)
def next_cmd(name: str, count: int) -> None:
    """The next N fire times, in the CronWorkflow's zone and in UTC."""
    obj = _obj()
    with obj.engine() as engine:
        try:
            agg = engine.service.find(obj.ns, name)
        except NotFound as e:
            fail(str(e))
        t0 = now()
        data = next_fire_times(agg, t0, count)
        tz = agg.spec_model.timezone or "UTC"
    rows = [
        [
            d["local"] or "",
            d["utc"] or "",
            ago(parse_timestamp(d["utc"] or "", "utc", bounded=False), t0),
        ]
        for d in data
    ]
    emit(
        View(data, [f"LOCAL ({tz})", "UTC", "WHEN"], rows, names=[d["utc"] or "" for d in data]),
        obj.output,
    )


# ---------------------------------------------------------------------- commands


def _targets(engine: Engine, obj: Ctx, names: Sequence[str]) -> list[tuple[str, str]]:
    """(namespace, name) of each CronWorkflow named, or selected by `-l` (with -A: in any
    namespace); unknown names are reported and make the exit 1 after the others ran."""
    if not names and not obj.selector:
        fail("give one or more names, or -l SELECTOR")
    if obj.selector:
        rows = selected(engine.view.statuses(None if obj.all_namespaces else obj.ns), obj)
        if not rows:
            fail(f"no CronWorkflow matches -l {obj.selector!r}")
        return [(c.namespace, c.name) for c in rows]
    return [(obj.ns, n) for n in names]


def _each(
    names: Sequence[str], do: Callable[[Engine, CronWorkflow], str], *, notice: bool = False
) -> None:
    obj = _obj()
    missing = done = 0
    with obj.engine() as engine:
        for ns, name in _targets(engine, obj, names):
            try:
                agg = engine.service.find(ns, name)
            except NotFound as e:
                click.echo(f"error: {e}", err=True)
                missing += 1
                continue
            message = do(engine, agg)
            done += 1
            click.echo(f"{KIND}/{name}" if obj.output == "name" else message)
        if notice and done and obj.unscheduled(engine):
            click.echo(NOTHING_RUNS, err=True)  # an unknown name alone stays one error line
    if missing:
        sys.exit(1)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def suspend(names: tuple[str, ...]) -> None:
    """Suspend: no tick runs until resumed (several names, or -l)."""

    def do(e: Engine, a: CronWorkflow) -> str:
        was = a.suspended
        e.service.suspend(a.id, now(), by="cli")
        return f"{KIND}/{a.name} {'unchanged (already suspended)' if was else 'suspended'}"

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def resume(names: tuple[str, ...]) -> None:
    """Resume: the ticks of the suspension are decided, at most one runs."""

    def do(e: Engine, a: CronWorkflow) -> str:
        was = a.suspended or a.stopped
        e.service.resume(a.id, now(), by="cli")
        return f"{KIND}/{a.name} {'resumed' if was else 'unchanged (not suspended)'}"

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@global_options()
def delete(names: tuple[str, ...]) -> None:
    """Delete; the history stays queryable (alias rm)."""

    def do(e: Engine, a: CronWorkflow) -> str:
        e.service.delete(a.id, now())
        return f"{KIND}/{a.name} deleted"

    _each(names, do)


@cli.command()
@name_argument(required=False, many=True)
@click.option(
    "--request-id", default=None, help="idempotency key; a retried request starts no second run"
)
@global_options()
def trigger(names: tuple[str, ...], request_id: str | None) -> None:
    """Run now (a manual fire)."""
    rid = request_id or uuid.uuid4().hex

    def do(e: Engine, a: CronWorkflow) -> str:
        wf = e.service.trigger(a.id, now(), rid)
        if wf is None:
            return f"request {rid} already triggered"
        if _obj().unscheduled(e):
            # Recorded, and created only when a `run` dispatches it (a manual run has no
            # deadline: docs/scheduling.md), so it is not "triggered" yet.
            return f"workflow {wf} queued: nothing creates it until `cronsource run` runs"
        return f"workflow {wf} triggered"

    _each(names, do, notice=True)


# ---------------------------------------------------------------------- backfill


def backfill_summary(ref: str, plan: BackfillPlan, dry_run: bool, pending_after: str) -> str:
    """The one line that says what the backfill does (or would do) with each tick."""
    how = {
        "Allow": "all at once"
        if plan.parallel is None
        else f"{plan.parallel} at a time, the rest queued",
        "Queue": f"one after another, {plan.parallel or 1} at a time",
        "Forbid": "no overlap: a tick whose turn comes while a run is active is skipped",
        "Replace": "each replaces the one before: only the latest runs",
    }[plan.overlap]
    verb = "would start" if dry_run else "started"
    parts = [f"{len(plan.fire)} now"] + ([f"{len(plan.queue)} queued"] if plan.queue else [])
    line = (
        f"{'dry run: ' if dry_run else ''}backfill {ref}: {plan.candidates} ticks in range,"
        f" {verb} {len(plan.runs)} ({', '.join(parts)}; overlap {plan.overlap}: {how}),"
        f" skipped {len(plan.skip)}"
        + (f" ({plan.skip_reason})" if plan.skip else "")
        + f", already fired {len(plan.already)}"
    )
    if plan.skip and plan.overlap in ("Forbid", "Replace"):
        line += "; --overlap Queue runs them one after another"
    return line + pending_after


@cli.command()
@name_argument()
@click.option("--start", required=True, help="RFC 3339: ticks at or after it")
@click.option("--end", required=True, help="RFC 3339: ticks at or before it")
@click.option(
    "--overlap",
    type=click.Choice(OVERLAPS),
    default=None,
    help="how backfill runs overlap (default: the CronWorkflow's concurrencyPolicy);"
    " Queue runs them one after another",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 10_000),
    default=None,
    help="Allow/Queue: at most N backfill runs at once, the rest wait their turn",
)
@click.option(
    "--max-ticks",
    type=click.IntRange(1, 10_000_000),
    default=DEFAULT_MAX_BACKFILL_TICKS,
    show_default=True,
    help="refuse a range with more ticks than this",
)
@click.option("--dry-run", is_flag=True, help="print what would run, change nothing")
@click.option("--cancel", is_flag=True, help="drop the ticks queued by earlier backfills")
@global_options(all_namespaces=False, selector=False)
def backfill(
    name: str,
    start: str,
    end: str,
    overlap: str | None,
    parallel: int | None,
    max_ticks: int,
    dry_run: bool,
    cancel: bool,
) -> None:
    """Run the ticks in [start, end] that never fired (skipped ones, and ticks before the
    CronWorkflow existed); ticks not decided yet are left to the scheduler."""
    obj = _obj()
    s, e = parse_time(start, "--start"), parse_time(end, "--end")
    if e < s:
        fail(f"--end {end} is before --start {start}")
    if parallel is not None and overlap in ("Forbid", "Replace"):
        fail(f"--parallel applies to --overlap Allow or Queue, not {overlap}")
    ref = f"{obj.ns}/{name}"
    with obj.engine(notice=True) as engine:
        try:
            agg = engine.service.find(obj.ns, name)
        except NotFound as ex:
            fail(str(ex))
        if cancel:
            n = engine.service.cancel_backfill(agg.id, now())
            click.echo(f"backfill {ref}: {n} queued ticks cancelled")
            return
        pending_after = (
            f"; ticks after {rfc3339(agg.decided_until)} are not decided yet (the scheduler"
            " decides them)"
            if e > agg.decided_until
            else ""
        )
        kwargs: dict[str, Any] = {"overlap": overlap, "parallel": parallel, "max_ticks": max_ticks}
        try:
            plan = engine.service.plan_backfill(agg.id, s, e, **kwargs)
        except BackfillTooLarge as ex:
            fail(f"--start/--end: {ex} (--max-ticks {max_ticks})")
        except HistoryRemoved as ex:
            fail(f"--start: {ex}")
        if dry_run or not plan.runs:
            data = backfill_result(name, plan, True)
            _backfill_out(obj, data, backfill_summary(ref, plan, True, pending_after), name)
            return
        with Progress(
            TextColumn("backfill {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=not err_console.is_terminal,
        ) as progress:
            task = progress.add_task(ref, total=len(plan.fire))
            done = engine.service.run_backfill(
                agg.id,
                s,
                e,
                now(),
                **kwargs,
                progress=lambda n, total: progress.update(task, completed=n, total=total),
            )
    data = backfill_result(name, done, False)
    _backfill_out(obj, data, backfill_summary(ref, done, False, pending_after), name)


def _backfill_out(obj: Ctx, data: dict[str, Any], summary: str, name: str) -> None:
    machine = obj.output in ("json", "yaml", "name")
    click.echo(summary, err=machine)  # the count first: before a long table
    rows = [[i["scheduledTime"], i["workflow"], i["action"]] for i in data["items"]]
    emit(
        View(
            data,
            ["SCHEDULED", "WORKFLOW", "ACTION"],
            rows,
            names=[i["workflow"] for i in data["items"] if i["action"] != "skip"],
        ),
        obj.output,
    )


# ---------------------------------------------------------------------- the main job


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(allow_dash=True))
@click.option(
    "--role", type=click.Choice(["all", "scheduler", "projector"]), default="all", show_default=True
)
@click.option(
    "--late-tolerance",
    default="30s",
    show_default=True,
    help="a tick decided later than this after its time is missed",
)
@click.option(
    "--workflows-dir",
    default="workflows",
    show_default=True,
    help="local target: where Workflow manifests are written",
)
@click.option(
    "--local-run-duration",
    default="1s",
    show_default=True,
    help="local target: a run succeeds after this long",
)
@click.option("--kube", is_flag=True, help="use the cluster from kubeconfig/in-cluster")
@click.option(
    "--kubeconfig",
    default=None,
    help="with --kube: kubeconfig path (default $KUBECONFIG, ~/.kube/config, in-cluster)",
)
@click.option(
    "--instance-id",
    default=None,
    envvar="CRONSOURCE_INSTANCE_ID",
    help="with --kube: Argo's controller instance id to select (default: objects without one)",
)
@click.option(
    "--http-port",
    type=click.IntRange(0, 65535),
    default=None,
    envvar="CRONSOURCE_HTTP_PORT",
    help="serve /healthz, /readyz and /metrics on this port (default: no probe server)",
)
@click.option(
    "--http-host",
    default="127.0.0.1",
    show_default=True,
    envvar="CRONSOURCE_HTTP_HOST",
    help="address of the probe server (0.0.0.0 in a pod, for the kubelet and Prometheus)",
)
@click.option(
    "--http-token-file",
    default=None,
    help="bearer token /metrics asks for (else $CRONSOURCE_TOKEN; none: open)",
)
@click.option(
    "--per-cronworkflow-metrics",
    is_flag=True,
    envvar="CRONSOURCE_PER_CRONWORKFLOW_METRICS",
    help="with --http-port: also count fires and skipped ticks per CronWorkflow (labels"
    " namespace, name): one series each, for a few hundred CronWorkflows at most",
)
@click.option(
    "--max-turn-age",
    default="60s",
    show_default=True,
    help="/healthz and /readyz fail when the scheduler loop finished no turn for this long",
)
@click.option(
    "--lease-duration",
    default="15s",
    show_default=True,
    envvar="CRONSOURCE_LEASE_DURATION",
    help="PostgreSQL: a replica that has not renewed its lease for this long (frozen,"
    " partitioned) has its shards and projector role taken by the others",
)
@click.option(
    "--retain",
    default=None,
    envvar="CRONSOURCE_RETAIN",
    help="keep the log and the audit for this long (e.g. 90d, 2160h): older events that a"
    " snapshot covers and nothing needs are removed (default: keep everything)",
)
@click.option("-v", "--verbose", is_flag=True)
@global_options(output=False, all_namespaces=False, selector=False)
def run(
    paths: tuple[str, ...],
    role: str,
    late_tolerance: str,
    workflows_dir: str,
    local_run_duration: str,
    kube: bool,
    kubeconfig: str | None,
    instance_id: str | None,
    http_port: int | None,
    http_host: str,
    http_token_file: str | None,
    per_cronworkflow_metrics: bool,
    max_turn_age: str,
    lease_duration: str,
    retain: str | None,
    verbose: bool,
) -> None:
    """The main job: apply PATHS, then schedule and project until SIGTERM."""
    import logging

    started = time.monotonic()

    from adapters.leases import MIN_LEASE_SECONDS, LeaseTableMissing, check_table
    from adapters.localtarget import LocalTarget
    from adapters.logs import configure_logging
    from adapters.runtime.loop import SchedulerLoop
    from adapters.runtime.runwatcher import RunWatcher
    from adapters.runtime.waker import Waker
    from adapters.shards import AdvisoryLockShards, Ownership, SoleOwner
    from domain.durations import parse_duration

    obj = _obj()
    configure_logging(logging.DEBUG if verbose else logging.INFO)
    try:
        tolerance = parse_duration(late_tolerance)
    except ValueError as e:
        fail(f"--late-tolerance: {e}")
    try:
        run_duration = parse_duration(local_run_duration)
    except ValueError as e:
        fail(f"--local-run-duration: {e}")
    try:
        turn_age = parse_duration(max_turn_age).total_seconds()
    except ValueError as e:
        fail(f"--max-turn-age: {e}")
    try:
        lease_seconds = parse_duration(lease_duration).total_seconds()
    except ValueError as e:
        fail(f"--lease-duration: {e}")
    retain_for = retain_option(retain)
    if lease_seconds < MIN_LEASE_SECONDS:
        fail(
            f"--lease-duration: {lease_duration!r} is shorter than {MIN_LEASE_SECONDS:g}s"
            " (a replica renews every 2s at most and needs room for a slow round trip)"
        )
    http_token: str | None = None
    if http_port is not None:
        from adapters.http import ServeError, load_token

        try:
            http_token = load_token(http_token_file)
        except ServeError as e:
            fail(str(e))
    manifests = (
        admit(
            paths,
            obj.namespace,
            only_cronworkflows=True,
            exclude=None if kube else workflows_dir,
        )
        if paths
        else []
    )
    config = obj.store_config()
    try:
        check_store(config)
        if config.kind == "postgresql":
            check_table(config.pg_conninfo, config.pg_schema)
    except (StoreUnavailable, LeaseTableMissing) as e:
        fail(str(e))
    except Exception as e:
        fail(describe(e, config))
    api_client: Any = None
    target: Any
    if kube:
        from adapters.kube import connect

        try:
            api_client = connect(kubeconfig)
        except Exception as e:
            fail(f"--kube: cannot load a cluster configuration: {e}")
        where = "the cluster"
    else:
        target = LocalTarget(workflows_dir, run_duration)
        where = f"{workflows_dir}/"
    try:
        if kube:
            from adapters.kube import build_kube_engine

            engine = build_kube_engine(config, api_client, late_tolerance=tolerance)
        else:
            engine = build_engine(config, target=target, late_tolerance=tolerance)
        engine.view.next_due()
    except Exception as e:
        fail(describe(e, config))
    # As `apply` does: a restart must not undo what a command changed since (issue 21).
    try:
        apply_all(
            engine,
            manifests,
            lambda m, result: click.echo(f"{KIND}/{m.metadata.name} {result.what}", err=True),
        )
    except SystemExit:
        engine.close()
        raise
    ownership: Ownership
    if config.kind == "postgresql":
        shards = AdvisoryLockShards(
            config.pg_conninfo,
            want_projector=role != "scheduler",
            schema=config.pg_schema,
            lease_seconds=lease_seconds,
        )
        if role != "scheduler":
            # The projections write on the session that holds the projector lock, so that a
            # replica whose role was taken while it was frozen cannot write (adapters/shards.py).
            engine.view.write_through(shards.projector_transaction)
        ownership = shards
    else:
        ownership = SoleOwner(engine.projector.lock)
    watcher: Any
    if kube:
        from adapters.kube import KubeSync

        watcher = KubeSync(engine, api_client, namespace=None, instance_id=instance_id or None)
        if role != "scheduler":
            watcher.start()
    else:
        watcher = RunWatcher(engine, target)
    retention = None
    if retain_for is not None:
        from adapters.runtime.retention import Retention, RetentionTooShort, check_retain

        try:
            check_retain(retain_for, longest_deadline(engine))
        except RetentionTooShort as e:
            engine.close()
            fail(str(e))
        retention = Retention(engine, retain_for)
    loop = SchedulerLoop(engine, ownership, role=role, watcher=watcher, retention=retention)
    probes: Any = None
    if http_port is not None:
        from adapters.probes import Probes, ProbeServer

        try:
            probes = ProbeServer(
                Probes(
                    engine,
                    loop,
                    now,
                    token=http_token,
                    max_turn_age=turn_age,
                    per_cronworkflow=per_cronworkflow_metrics,
                ),
                http_host,
                http_port,
            )
        except OSError as e:
            engine.close()
            fail(f"--http-port {http_port}: cannot listen on {http_host}: {e.strerror or e}")
        probes.start()
        click.echo(f"cronsource probes on http://{http_host}:{probes.port}", err=True)
    waker = Waker(engine)
    loop.install_signal_handlers(waker)
    click.echo(
        f"cronsource running: store {config.shown}, role {role}, workflows in {where}", err=True
    )

    def ready() -> None:
        click.echo(f"cronsource ready after {time.monotonic() - started:.2f}s", err=True)
        click.echo(next_tick_line(engine), err=True)

    try:
        loop.run(waker, on_ready=ready)
    finally:
        if probes is not None:
            probes.stop()
        if kube:
            watcher.stop()
        waker.stop()
        engine.close()
        if api_client is not None:
            api_client.close()
    click.echo(f"cronsource stopped after {loop.fires} fires", err=True)


def next_tick_line(engine: Engine) -> str:
    """`next tick: default/hello at ... (in 42s)`, or why there is none."""
    try:
        due = [(c.next_due, c) for c in engine.view.statuses() if c.next_due is not None]
    except Exception as e:
        return f"next tick: unknown ({describe(e, engine.config)})"
    if not due:
        return "next tick: none (no live CronWorkflow; apply one, or resume a suspended one)"
    t, c = min(due, key=lambda d: d[0])
    zone = c.spec.get("timezone") or "UTC"
    local = t.astimezone(ZoneInfo(zone)).isoformat()
    return f"next tick: {c.namespace}/{c.name} at {rfc3339(t)} ({local} {zone}, {ago(t, now())})"


# ---------------------------------------------------------------------- simulate


def _zones(sc: Any) -> dict[str, str]:
    """Each simulated CronWorkflow's time zone (the last applied spec wins)."""
    out: dict[str, str] = {}
    docs = list(sc.cron_workflows) + [a.apply for a in sc.actions if a.apply is not None]
    for d in docs:
        try:
            meta, spec = d.get("metadata") or {}, d.get("spec") or {}
            key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
            out[key] = spec.get("timezone") or "UTC"
        except (AttributeError, KeyError, TypeError):
            continue
    return out


def _local(t: str | None, zone: str) -> str:
    if not t:
        return "-"
    try:
        dt = parse_timestamp(t, "time", bounded=False).astimezone(ZoneInfo(zone))
    except (ValueError, KeyError):
        return "-"
    return dt.strftime("%Y-%m-%d %H:%M:%S %Z")


def simulate_tables(result: dict[str, Any], zones: dict[str, str]) -> None:
    """Every decision (fires and skips, with reasons), then one summary line per
    CronWorkflow: what a user wants to know before applying a schedule."""
    by_name = {w["name"]: w for w in result["workflows"]}
    rows = []
    fired: dict[str, Counter[str]] = {}
    skipped: dict[str, Counter[str]] = {}
    for e in result["events"]:
        cw = e["cronWorkflow"]
        fired.setdefault(cw, Counter())
        skipped.setdefault(cw, Counter())
        if e["type"] not in ("ScheduleFired", "ScheduleSkipped"):
            continue
        zone = zones.get(cw, "UTC")
        if e["type"] == "ScheduleFired":
            w = by_name.get(e["workflow"] or "", {})
            decision = f"fired ({e.get('trigger', 'schedule')})"
            fired[cw][e.get("trigger", "schedule")] += 1
            phase = w.get("phase", "-")
        else:
            decision = f"skipped: {e.get('reason')}"
            skipped[cw][e.get("reason") or "?"] += e.get("count", 1)
            phase = "-"
        rows.append(
            [
                cw,
                _local(e["scheduledTime"], zone),
                e["scheduledTime"] or "-",
                decision,
                ticks_cell(e),
                e["workflow"] or "-",
                phase,
                e["at"],
            ]
        )
    print_table(
        [
            "CRONWORKFLOW",
            "SCHEDULED (LOCAL)",
            "SCHEDULED (UTC)",
            "DECISION",
            "TICKS",
            "WORKFLOW",
            "PHASE",
            "DECIDED AT",
        ],
        rows,
        "Decisions",
    )
    click.echo()
    status = {f"{c['namespace']}/{c['name']}": c["status"] for c in result["cronWorkflows"]}
    summary = []
    for cw in sorted(set(fired) | set(status)):
        f, s = fired.get(cw, Counter()), skipped.get(cw, Counter())
        st = status.get(cw, {})
        summary.append(
            [
                cw,
                zones.get(cw, "UTC"),
                str(sum(f.values()) + sum(s.values())),
                str(sum(f.values()))
                + (f" ({', '.join(f'{k} {v}' for k, v in sorted(f.items()))})" if f else ""),
                str(sum(s.values()))
                + (f" ({', '.join(f'{k} {v}' for k, v in sorted(s.items()))})" if s else ""),
                str(st.get("succeeded", 0)),
                str(st.get("failed", 0)),
                str(len(st.get("active") or [])),
            ]
        )
    print_table(
        [
            "CRONWORKFLOW",
            "TIMEZONE",
            "RUNS+SKIPS",
            "FIRED",
            "SKIPPED",
            "SUCCEEDED",
            "FAILED",
            "ACTIVE",
        ],
        summary,
        "Summary",
    )


@cli.command()
@click.argument("scenario", type=click.Path(allow_dash=True))
@global_options(all_namespaces=False, selector=False)
def simulate(scenario: str) -> None:
    """Run the real engine on a virtual clock (docs/simulate.md)."""
    from adapters.documents import DocumentError, load_yaml
    from adapters.simulate import ScenarioError, load_scenario
    from adapters.simulate import simulate as run_simulation

    obj = _obj()
    try:
        docs = load_yaml(read_input(scenario, 2), scenario)
    except DocumentError as e:
        fail(str(e), 2)
    if len(docs) > 1:
        fail(f"{scenario}: {len(docs)} YAML documents; a scenario is one", 2)
    data = docs[0] if docs else None
    try:
        sc = load_scenario(data)
    except ScenarioError as e:
        fail(f"{scenario}: {e}", 2)
    if obj.store:
        config = obj.store_config()
        try:
            check_store(config, need_tables=False)
        except StoreUnavailable as e:
            fail(str(e), 2)
    import signal

    from adapters.simulate import SimulationInterrupted

    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    # Installed explicitly: a shell starts background jobs with SIGINT ignored, and Python
    # then installs no handler of its own, so Ctrl-C / kill -INT did nothing.
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = run_simulation(sc, obj.store, stop=lambda: bool(stopping))
    except StoreURLError as e:
        fail(str(e), 2)
    except ScenarioError as e:
        fail(f"{scenario}: {e}", 2)
    except SimulationInterrupted as e:
        fail(f"{scenario}: {e}", 130)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)

    if obj.output in ("json", "yaml"):
        emit(View(result, [], []), obj.output)
    elif obj.output == "name":
        for w in result["workflows"]:
            click.echo(w["name"])
    else:
        simulate_tables(result, _zones(sc))


# ---------------------------------------------------------------------- adopt, release


def _move_options(f: Any) -> Any:
    """The options `adopt` and `release` share (adapters/kubeadopt.py)."""
    opts = [
        click.argument("names", nargs=-1),
        click.option("--kubeconfig", default=None, help="default $KUBECONFIG, ~/.kube/config"),
        click.option(
            "--instance-id",
            default="cronsource",
            show_default=True,
            envvar="CRONSOURCE_INSTANCE_ID",
            help="the instance id `cronsource run --kube` selects",
        ),
        click.option(
            "--argo-instance-id",
            default="",
            help="Argo's controller instance id (default: none, Argo takes unlabelled objects)",
        ),
        click.option(
            "--margin", default="3s", show_default=True, help="no move this close before a tick"
        ),
        click.option(
            "--settle", default="2s", show_default=True, help="no move this soon after a tick"
        ),
        click.option("--timeout", default="2m", show_default=True, help="give up after this"),
        global_options(output=True, all_namespaces=True, selector=True),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _move(to_cronsource: bool, names: tuple[str, ...], **flags: Any) -> None:
    from adapters.kubeadopt import MoveError, move
    from domain.durations import parse_duration

    obj = _obj()
    durations = {}
    for flag in ("margin", "settle", "timeout"):
        try:
            durations[flag] = parse_duration(flags[flag])
        except ValueError as e:
            fail(f"--{flag}: {e}")

    def go(lookup: Any) -> list[Any]:
        try:
            return move(
                to_cronsource=to_cronsource,
                kubeconfig=flags["kubeconfig"],
                namespace=None if obj.all_namespaces else obj.ns,
                selector=obj.selector,
                names=names,
                instance_id=flags["instance_id"],
                argo_instance_id=flags["argo_instance_id"],
                lookup=lookup,
                **durations,
            )
        except MoveError as e:
            fail(str(e))

    if to_cronsource or not (obj.store or os.environ.get("CRONSOURCE_STORE")):
        if not to_cronsource:
            click.echo(
                "note: without --store, cronsource's own state is not checked: each object"
                " moves on its schedule alone",
                err=True,
            )
        moves = go(None)
    else:
        with obj.engine() as engine:

            def lookup(ns: str, name: str, uid: str) -> CronWorkflow | None:
                try:
                    return engine.service.find(ns, name, uid)
                except NotFound:
                    return None

            moves = go(lookup)
    rows = [
        [m.namespace, m.name, "yes" if m.moved else "no", rfc3339(m.at) or "-", m.note]
        for m in moves
    ]
    emit(
        View(
            [m.as_dict() for m in moves],
            ["NAMESPACE", "NAME", "MOVED", "AT", "NOTE"],
            rows,
            names=[f"{KIND}/{m.name}" for m in moves if m.moved],
            empty="no CronWorkflow selected",
        ),
        obj.output,
    )
    if any(m.note.startswith("not moved") for m in moves):
        sys.exit(1)


@cli.command()
@_move_options
def adopt(names: tuple[str, ...], **flags: Any) -> None:
    """Hand CronWorkflows from Argo's cron controller to cronsource (label them with
    cronsource's instance id), each between two of its ticks (docs/migration.md)."""
    _move(True, names, **flags)


@cli.command()
@_move_options
def release(names: tuple[str, ...], **flags: Any) -> None:
    """Hand CronWorkflows back to Argo's cron controller, each between two of its ticks,
    once the status on the object shows cronsource's last decision (docs/migration.md)."""
    _move(False, names, **flags)


# ---------------------------------------------------------------------- serve, version


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token-file",
    default=None,
    help="file holding the bearer token (else $CRONSOURCE_TOKEN); required off loopback",
)
@click.option(
    "--retain",
    default=None,
    envvar="CRONSOURCE_RETAIN",
    help="as `run --retain`, applied while no `run` projects this store",
)
@click.option("-v", "--verbose", is_flag=True, help="debug logs and access logs")
@global_options(output=False, all_namespaces=False, selector=False)
def serve(host: str, port: int, token_file: str | None, retain: str | None, verbose: bool) -> None:
    """HTTP API, metrics, health checks and the status page (docs/http-api.md)."""
    from adapters.http import ServeError
    from adapters.http import serve as serve_http

    obj = _obj()
    retain_for = retain_option(retain)
    config = obj.store_config()
    try:
        check_store(config)
    except StoreUnavailable as e:
        fail(str(e))
    try:
        serve_http(
            obj.store,
            host=host,
            port=port,
            token_file=token_file,
            verbose=verbose,
            retain=retain_for,
        )
    except ServeError as e:
        fail(str(e))


@cli.command()
@global_options(all_namespaces=False, selector=False)
def version() -> None:
    """The version of cronsource and its libraries; with --store, whether it is migrated."""
    obj = _obj()
    data: dict[str, Any] = {"version": _version_line()}
    store = obj.store or os.environ.get("CRONSOURCE_STORE")
    if store:
        config = obj.store_config()
        try:
            check_store(config)
            data["store"] = {"url": config.shown, "status": "migrated"}
        except StoreUnavailable as e:
            data["store"] = {"url": config.shown, "status": str(e)}
    if obj.output in ("json", "yaml"):
        emit(View(data, [], []), obj.output)
        return
    click.echo(data["version"])
    if "store" in data:
        click.echo(f"store {data['store']['url']}: {data['store']['status']}")


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script, e.g. `source <(cronsource completion bash)`."""
    cls = get_completion_class(shell)
    if cls is None:  # click knows the three shells above
        fail(f"no completion for {shell}")
    click.echo(cls(cli, {}, "cronsource", "_CRONSOURCE_COMPLETE").source())


def main() -> None:
    """The entry point: click's usage errors become one `error:` line too."""
    try:
        code = cli.main(prog_name="cronsource", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `cronsource`: help, as kubectl
            click.echo(e.format_message())
            sys.exit(0)
        hint = ""
        ctx = getattr(e, "ctx", None)
        if isinstance(e, click.UsageError) and ctx is not None:
            hint = f" (see `{ctx.command_path} -h`)"
        click.echo(f"error: {e.format_message()}{hint}", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
