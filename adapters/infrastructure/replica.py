"""A replica's identity: the name its metrics, log lines, leases and decisions carry.

On Kubernetes that is the pod's name, given by the downward API as `POD_NAME` (deploy/ and the
Helm chart set it from `metadata.name`); `CRONSOURCE_REPLICA` names it anywhere else, and wins
over `POD_NAME` when both are set. Without either it is `<host name>:<pid>`, which tells apart
two replicas on one host. `run` computes it once at start and hands it down (the lease row,
the scheduler's `decidedBy`, the log filter); nothing reads it from a global.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The variables that name a replica, strongest first.
VARIABLES = ("CRONSOURCE_REPLICA", "POD_NAME")
#: A Kubernetes object name is at most 253 characters; an identity longer than that is a
#: mistake, and would bloat every metric series and event that carries it.
MAX_LENGTH = 253


class BadReplicaName(ValueError):
    """An identity given in the environment that cannot be used."""


def replica_identity(environ: Mapping[str, str], hostname: str, pid: int) -> str:
    """The identity of this replica: the first of VARIABLES set to a non-blank value, else
    `hostname:pid`. Raises BadReplicaName (naming the variable and value) for a value with
    control characters or longer than MAX_LENGTH."""
    for var in VARIABLES:
        value = environ.get(var, "").strip()
        if not value:
            continue
        if len(value) > MAX_LENGTH:
            raise BadReplicaName(
                f"{var}: {value[:40]!r}... is {len(value)} characters; at most {MAX_LENGTH}"
            )
        if any(not c.isprintable() for c in value):
            raise BadReplicaName(f"{var}: {value!r} has control characters")
        return value
    return f"{hostname or 'localhost'}:{pid}"
