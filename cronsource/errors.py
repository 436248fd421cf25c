"""The errors the Python API raises, the same from `cronsource.open` (in process) and from
`cronsource.Client` (over HTTP), so code written against one runs against the other.

Every error is a `CronsourceError`; catch the subclass you act on. The HTTP API answers the
same refusals as RFC 9457 problems (docs/http-api.md); the client turns each back into the
error below, carrying the same fields.
"""

from __future__ import annotations


class CronsourceError(Exception):
    """Anything cronsource refused or could not do; `str()` is one line saying why."""


class NotFound(CronsourceError, LookupError):
    """No live CronWorkflow of that namespace and name (or none ever, for its history)."""


class AlreadyExists(CronsourceError):
    """`create(...)` (`apply(..., create_only=True)`) of a live name: `current_version` is its
    version."""

    def __init__(self, message: str, current_version: int | None) -> None:
        super().__init__(message)
        self.current_version = current_version


class Conflict(CronsourceError):
    """The CronWorkflow is not at the version the call expected (`expected_version`):
    `current_version` is the version it is at (None: it does not exist). Re-read it and decide
    again; nothing was changed."""

    def __init__(
        self,
        message: str,
        current_version: int | None = None,
        expected_version: int | None = None,
    ) -> None:
        super().__init__(message)
        self.current_version = current_version
        self.expected_version = expected_version


class Invalid(CronsourceError, ValueError):
    """An argument or a manifest field is wrong: `field` names the first (as the HTTP API
    names it: camelCase, `spec.schedule`), `errors` every one as (field, message)."""

    def __init__(self, field: str, message: str, errors: list[tuple[str, str]] | None = None):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.errors = errors or [(field, message)]


class Unavailable(CronsourceError):
    """The store (or the server) does not answer; the call may be retried."""


class Unauthorized(CronsourceError):
    """The server wants a bearer token, or another one (`Client(token=...)`)."""


class IncompatibleServer(CronsourceError):
    """The server at that address is not a cronsource this client can talk to."""
