"""The runtime's tuning constants, in one place (the scheduler, the projection step and the
dispatch thread all read them)."""

from __future__ import annotations

from datetime import timedelta

#: Decisions saved per transaction. Large enough that a burst of 10,000 is 20 transactions,
#: small enough that one conflict costs at most this many single re-decisions.
BATCH = 500
#: Seconds a projection or the run watcher may take per turn before yielding to the
#: scheduler (and to SIGTERM); a backlog is worked off over several turns.
TURN_BUDGET = 1.0
#: How far ahead the scheduler loads the aggregates about to be due, so that at the instant it
#: decides on copies in memory instead of reading 10,000 streams from the store.
WARM_AHEAD = timedelta(seconds=60)
#: Aggregates warmed per turn at most, so warming never holds up a turn for long.
WARM_LIMIT = 5000
#: How close the next due instant must be for the scheduler to decide it in advance (see
#: `prepare_once`), and how many CronWorkflows it decides in advance at most.
PREPARE_AHEAD = timedelta(seconds=5)
PREPARE_LIMIT = 20_000
#: A decision made in advance for instant T is committed only until T + this; later, it is
#: dropped and decided again at the time it is actually made.
PREPARED_MAX_DELAY = timedelta(seconds=1)
#: How often a running replica logs its heartbeat (fires, shards, projection lag).
REPORT_SECONDS = 30.0
#: How often the loop asks which store it is talking to (adapters/runtime/storeidentity.py): one
#: short query, so that after a failover the cached copies ahead of the promoted log go within a
#: second instead of every save on them being refused.
IDENTITY_SECONDS = 1.0
#: Seconds the scheduler waits, after start-up or a change of store, for the runs the log lost
#: to be recovered before it decides anything (adapters/runtime/recovery.py): a failover's
#: recovery takes one list of the Workflows once the read model is at the head of the log.
RECOVERY_WAIT = 10.0
#: Seconds after SIGTERM within which `run` has exited, whatever it waits for. The step in
#: flight normally ends within a few seconds even with the store down (a pooled connection is
#: waited for 3 s at most), but a query on a connection to a server that hangs (its processes
#: stopped, a machine or network that drops packets) waits with no client-side limit. Past
#: this, the process exits at once with EXIT_STOP_OVERDUE, as a crash would: nothing is lost
#: (a fire is committed before its Workflow exists, every position moves after its work), and
#: its shards are freed when its session ends or its lease lapses. Below Kubernetes' default
#: grace period of 30 s, and the 10 s of issue 27.
STOP_GRACE_SECONDS = 8.0
#: Seconds a stopping replica spends snapshotting the copies it holds (`snapshot_at_stop`):
#: well inside STOP_GRACE_SECONDS with the step in flight, and enough for about 20,000
#: CronWorkflows; the rest keep their tails, which the next start replays as after a crash.
STOP_SNAPSHOT_SECONDS = 3.0
#: Snapshots written per transaction at stop.
STOP_SNAPSHOT_BATCH = 1000
#: `run`'s exit status when it had to leave without finishing (see STOP_GRACE_SECONDS).
EXIT_STOP_OVERDUE = 1
