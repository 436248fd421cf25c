"""`serve`: the HTTP API, metrics, health checks and the status page over one store."""

from __future__ import annotations

import click

from cronsource.adapters.entrypoints.cli.context import _obj, fail, global_options
from cronsource.adapters.entrypoints.cli.registry import cli
from cronsource.adapters.entrypoints.cli.store import retain_option, retain_refused
from cronsource.adapters.infrastructure.store.check import StoreUnavailable, check_store


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
@global_options(output=False, all_namespaces=False, selector=False, namespace=False)
def serve(host: str, port: int, token_file: str | None, retain: str | None, verbose: bool) -> None:
    """HTTP API, metrics, health checks and the status page (docs/http-api.md)."""
    from cronsource.adapters.entrypoints.http import ServeError
    from cronsource.adapters.entrypoints.http import serve as serve_http

    obj = _obj()
    retain_for = retain_option(retain)
    config = obj.store_config()
    try:
        check_store(config)
    except StoreUnavailable as e:
        fail(str(e))
    if retain_for is not None:
        # As `run --retain` checks it: a window shorter than a deadline is refused here too.
        with obj.operations() as ops:
            refused = retain_refused(ops, retain_for, str(retain))
        if refused:
            fail(refused)
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
