"""What every command shares: the global flags (before or after the command, the later one wins),
the store they name, the one clock read at the edge, and the one way a command fails (an
`error:` line and a non-zero exit).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NoReturn

import click
from rich.console import Console

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.infrastructure.store.check import StoreUnavailable, check_store, describe
from cronsource.adapters.infrastructure.store.config import StoreConfig, StoreURLError
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.timestamps import TIME_RULE, TimestampError, user_time

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
    return SYSTEM_CLOCK.now()


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def parse_time(value: str, flag: str, zone: str | None = None) -> datetime:
    """A time flag by the one rule of every entrypoint (domain/timestamps.py `user_time`:
    RFC 3339, or a date alone, midnight in `zone`, else UTC), or one `error:` line."""
    try:
        return user_time(value, flag, zone)
    except TimestampError as e:
        fail(str(e))


def time_help(what: str, *, named: bool = True) -> str:
    """A time flag's `--help`: what it selects, then the rule, with the zone a date alone is
    read in (the named CronWorkflow's, or UTC)."""
    zone = "in the CronWorkflow's time zone" if named else "UTC"
    return f"{what}; {TIME_RULE} {zone}"


def read_input(path: str, code: int = 1) -> bytes:
    """The bytes of a file ('-' is stdin), at most MAX_INPUT_BYTES (exit `code` beyond: a
    huge file is refused before it is read into memory)."""
    from cronsource.adapters.application.documents import MAX_INPUT_BYTES

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

    def by_name(self, names: Sequence[str]) -> None:
        """Names pick objects in `-n`'s namespace: with `-l` or `-A` as well, which of them
        was meant is unclear, and a `delete` that acted on the selection alone removed
        objects nobody named. kubectl refuses both, in these words."""
        if names and self.selector:
            fail("name cannot be provided when a selector is specified")
        if names and self.all_namespaces:
            fail("a resource cannot be retrieved by name across all namespaces")

    def store_config(self) -> StoreConfig:
        if self.store == "":  # `--store "$UNSET_VAR"` meant some store, not the default one
            fail(
                "--store: empty (give a store URL: sqlite:///PATH, postgresql://..., memory:;"
                " or leave the flag out for $CRONSOURCE_STORE or ./cronsource.db)"
            )
        try:
            self.config = StoreConfig.parse(self.store)
        except StoreURLError as e:
            fail(str(e))
        return self.config

    def unscheduled(self, ops: Operations) -> bool:
        """Whether no `cronsource run` holds the store (adapters/application/presence.py, what the
        status page reads too), asked once per command. A store that cannot say (`memory:`, or a
        failed query) gets no warning."""
        if self.nothing_runs is None:
            try:
                self.nothing_runs = ops.schedulers_running() == 0
            except Exception:
                self.nothing_runs = False
        return self.nothing_runs

    @contextmanager
    def engine(
        self, *, catch_up: bool = True, notice: bool = False, must_exist: bool = False
    ) -> Iterator[Engine]:
        """The engine over a store that answers and is migrated, or one `error:` line.
        `notice`: once the command succeeded, say on stderr when no `cronsource run` holds
        the store (nothing it recorded fires until one does). `must_exist`: an embedded
        store is not created by this command (check_store)."""
        config = self.store_config()
        try:
            check_store(config, must_exist=must_exist)
        except StoreUnavailable as e:
            fail(str(e))
        try:
            engine = bootstrap(config)
        except Exception as e:  # the store broke between the check and now
            fail(describe(e, config))
        try:
            # The one place a CLI command touches the projections: read what is projected
            # (projecting first only when no projector runs anywhere), and before exiting
            # wait until the status view shows what the command wrote
            # (adapters/runtime/projector.py).
            if catch_up:
                engine.projector.settle(wait=False)
            with engine.service.receipt() as wrote:
                yield engine
            engine.projector.settle(wrote)
            if notice and self.unscheduled(Operations(engine)):
                click.echo(NOTHING_RUNS, err=True)
        finally:
            engine.close()

    @contextmanager
    def operations(
        self, *, notice: bool = False, settle_each: bool = False, must_exist: bool = False
    ) -> Iterator[Operations]:
        """The facade (adapters/application/operations.py) over `engine()`: every command
        goes through it, as HTTP and the Python library do. Its commands do not wait for the
        read model one by one; `engine()` waits once, for all of them, before the exit.
        `settle_each`: they do, for a command that prints each object as it now is (`-o
        json`)."""
        with self.engine(notice=notice, must_exist=must_exist) as engine:
            yield Operations(engine, settle_each=settle_each)


def _obj() -> Ctx:
    return click.get_current_context().ensure_object(Ctx)


def _setter(attr: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def set_value(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is None or value is False:
            return
        setattr(ctx.ensure_object(Ctx), attr, value)

    return set_value


def _set_namespace(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """`-n ""` (often `-n "$UNSET_VAR"`) is refused: `get` answered that namespace '' has
    no CronWorkflows and `simulate` showed nothing at all, exit 0."""
    if value == "":
        fail("--namespace: empty (give a namespace, or leave the flag out for default)")
    _setter("namespace")(ctx, _param, value)


def global_options(
    *,
    output: bool = True,
    all_namespaces: bool = True,
    selector: bool = True,
    store: bool = True,
    namespace: bool = True,
    namespace_help: str = "namespace (default: default)",
) -> Callable[[Any], Any]:
    """The global flags on a command too, so they may follow it (`get hello -n team-a`).
    `store`/`namespace` False: the command does not use it, so its `--help` does not offer
    it; it is still accepted (hidden), as the group accepts it before any command, so a
    script that passes `-n` to every command keeps working. `namespace_help`: what `-n`
    means where it is more than the namespace of the objects named (`simulate`: a filter)."""

    def deco(f: Any) -> Any:
        opts = [
            click.option(
                "--store",
                envvar="CRONSOURCE_STORE",
                expose_value=False,
                callback=_setter("store"),
                hidden=not store,
                help="sqlite:///PATH (default ./cronsource.db), postgresql://USER@HOST/DB, memory:",
            ),
            click.option(
                "-n",
                "--namespace",
                expose_value=False,
                callback=_set_namespace,
                hidden=not namespace,
                help=namespace_help,
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
