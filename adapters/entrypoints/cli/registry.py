"""The `cronsource` group every command registers on, its aliases and one-line errors, name
completion, and `version`/`completion`. The command modules register themselves on import
(adapters/entrypoints/cli/__init__.py imports them all).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Any

import click
from click.shell_completion import CompletionItem, get_completion_class

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.entrypoints.cli.context import (
    RESOURCE_WORDS,
    Ctx,
    _obj,
    fail,
    global_options,
)
from cronsource.adapters.entrypoints.cli.output import (
    View,
    emit,
    stdout_gone_quietly,
    tolerate_closed_readers,
)
from cronsource.adapters.infrastructure.store.check import StoreUnavailable, check_store, describe
from cronsource.adapters.infrastructure.store.config import StoreConfig


class CronsourceGroup(click.Group):
    """Resolves `ls`/`rm` aliases and turns any unexpected error into one line."""

    aliases = {"ls": "list", "rm": "delete", "unsuspend": "resume", "run-now": "trigger"}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (
            click.exceptions.ClickException,
            click.exceptions.Exit,
            click.Abort,
            BrokenPipeError,  # the reader left: main() ends quietly, as kubectl
        ):
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
        engine = bootstrap(config)
        try:
            names = sorted({c.name for c in Operations(engine).statuses(obj.ns)})
        finally:
            engine.close()
    except Exception:
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def object_name(value: str) -> str:
    """NAME, or TYPE/NAME as kubectl takes it and `-o name` prints it
    (`cronworkflow.argoproj.io/nightly`, `cwf/nightly`): `get -o name | xargs cronsource
    suspend` works as it does with kubectl."""
    if not value:
        raise click.BadParameter("resource name may not be empty")  # kubectl's words
    kind, slash, name = value.rpartition("/")
    if not slash:
        return value
    if kind.lower() not in RESOURCE_WORDS or not name:
        raise click.BadParameter(
            f"{value!r} is not NAME or TYPE/NAME of a CronWorkflow"
            f" (TYPE one of {', '.join(sorted(RESOURCE_WORDS))})"
        )
    return name


def object_names(names: tuple[str, ...], *, words: bool = False) -> tuple[str, ...]:
    """The names given, TYPE/ taken off; a leading resource word dropped (`delete cwf a b`,
    kubectl's `TYPE NAME...`); with `words`, every one (`get cronworkflows`: all)."""
    if names and names[0].lower() in RESOURCE_WORDS and (words or len(names) > 1):
        names = names[1:]
    if words:
        names = tuple(n for n in names if n.lower() not in RESOURCE_WORDS)
    return tuple(object_name(n) for n in names)


def name_argument(required: bool = True, many: bool = False) -> Callable[[Any], Any]:
    def normalised(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        if many:
            return object_names(value)
        return value if value is None else object_name(value)

    return click.argument(
        "names" if many else "name",
        nargs=-1 if many else 1,
        required=required,
        shell_complete=_complete_names,
        callback=normalised,
    )


@cli.command()
@global_options(all_namespaces=False, selector=False, namespace=False)
def version() -> None:
    """The version of cronsource and its libraries; with --store, whether it is migrated."""
    obj = _obj()
    data: dict[str, Any] = {"version": _version_line()}
    store = obj.store or os.environ.get("CRONSOURCE_STORE")
    if store:
        config = obj.store_config()
        try:
            check_store(config, must_exist=True)
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
    """The entry point: click's usage errors become one `error:` line too, and a reader that
    closes stdout (`| head -1`) ends the output quietly (output.py `tolerate_closed_readers`)."""
    tolerate_closed_readers()
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
    except BrokenPipeError:
        stdout_gone_quietly()
        sys.exit(0)
