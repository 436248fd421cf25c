"""How `cronsource serve` is configured: address, bearer token, limits and readiness.

Apart from the app so the CLI can check a configuration (a token file, a non-loopback host)
without building a server.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cronsource.adapters.application.documents import MAX_INPUT_BYTES

TOKEN_ENV = "CRONSOURCE_TOKEN"


class ServeError(RuntimeError):
    """The server cannot start as configured (the message says why)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def load_token(token_file: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The bearer token from `token_file` (surrounding whitespace dropped), else from
    $CRONSOURCE_TOKEN; None when neither is given."""
    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise ServeError(f"--token-file {token_file}: {e.strerror}") from None
        if not token:
            raise ServeError(f"--token-file {token_file}: the file is empty")
        return token
    token = (environ if environ is not None else os.environ).get(TOKEN_ENV, "").strip()
    return token or None


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    #: /readyz fails when a projection in `ready_projections` is more events than this behind.
    max_projection_lag: int = 1000
    #: The projections this server's readiness depends on. The read model: the API reads it.
    #: Not the dispatcher, which runs in `cronsource run` and has its own liveness.
    ready_projections: tuple[str, ...] = ("readmodel",)
    #: Largest backfill in one request; a longer range is refused with 422 (split it).
    max_backfill_ticks: int = 10_000
    #: Largest request body (413 beyond): Kubernetes' 3 MiB.
    max_body_bytes: int = MAX_INPUT_BYTES
    #: Seconds a client may take to send its body (408 after).
    body_timeout: float = 30.0
    #: Seconds a write may take before the client is answered 504 (the work, bounded by
    #: the admission limits, may still finish and take effect, as in Kubernetes).
    request_timeout: float = 60.0

    def check(self) -> None:
        """Refuse to serve a non-loopback address without a token."""
        if not self.token and not is_loopback(self.host):
            raise ServeError(
                f"--host {self.host} is not a loopback address: a bearer token is required"
                f" (--token-file FILE or ${TOKEN_ENV})"
            )
