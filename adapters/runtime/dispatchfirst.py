"""While the dispatcher creates a burst's Workflows, the projector replica's other work waits.

The dispatcher, the read model's projection and the status writes share one Python process
(one interpreter lock) and, on a cluster, one API server. Whatever else runs during a burst
takes its share from the creations: at 10,000 fires the read model's projection was a fifth
of the process's time while the Workflows were being created, and the status patches a sixth
of the API server's requests. A Workflow is what a user waits for; a status view or a
`.status` a few seconds later is not. So the others wait, bounded both ways: a dispatcher that
stops moving (an API that fails every create) no longer holds them back, and one that keeps
moving but never catches up holds them back at most so long.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass
class DispatchFirst:
    """Whether some work waits for the dispatcher now; one per kind of work that waits.

    `moved_within`: a dispatcher whose position has not moved for this long no longer holds
    the work back. `at_most`: the longest one wait lasts while it keeps moving; the work then
    runs once, and a new wait may start. `from_backlog`: a wait starts only with at least this
    many events still to dispatch (a burst, not the fire or two of a quiet minute, whose
    status would otherwise lag behind every Workflow); once started it lasts until the
    dispatcher has caught up.
    """

    moved_within: timedelta
    at_most: timedelta
    from_backlog: int = 1
    #: The dispatcher's position when last seen to move, and when.
    _moved: tuple[int, datetime] | None = field(default=None, init=False)
    #: When the current wait started; None while nothing waits.
    _since: datetime | None = field(default=None, init=False)

    @property
    def waiting(self) -> bool:
        """Whether the last answer was to wait (no look at the positions)."""
        return self._since is not None

    def waits(self, dispatched: int, target: int, now: datetime) -> bool:
        """Whether the work waits this turn for a dispatcher at `dispatched` that must reach
        `target` (the log's head, or the position the waiting work would show)."""
        if dispatched >= target:
            self._moved = self._since = None
            return False
        if self._since is None and target - dispatched < self.from_backlog:
            return False
        if self._moved is None or self._moved[0] != dispatched:
            self._moved = (dispatched, now)
        self._since = self._since or now
        if now - self._moved[1] < self.moved_within and now - self._since < self.at_most:
            return True
        self._since = None  # the work runs now; a new wait starts from here
        return False
