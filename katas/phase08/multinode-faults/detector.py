"""Task "detect": a heartbeat failure detector (alive, suspect, dead), fed with times.

The detector never reads a clock: every call says what time it is (`now`, seconds on one
monotonic clock), so the same detector runs live in a host and replays a recorded trace.
"""

from __future__ import annotations

from harness import todo

from .jobs import ALIVE, DEAD, SUSPECT  # noqa: F401  (the three statuses)


class FailureDetector:
    """Per peer: silence = now - (its last heartbeat, or `start` if none arrived yet).

    status(peer, now) is "dead" once the connection closed (closed()), or once the silence
    reached dead_after: from then on the peer stays dead, whatever arrives later (a peer that
    was declared dead comes back only through a new rendezvous, never by itself). Otherwise
    "suspect" while the silence is at least suspect_after, else "alive". Calls come in time
    order (now never decreases); peers not in `peers` raise ValueError, and so do thresholds
    unless 0 < suspect_after < dead_after (strictly: equal thresholds leave no suspicion)."""

    def __init__(
        self, peers: list[int], start: float, suspect_after: float, dead_after: float
    ) -> None:
        todo("FailureDetector.__init__")

    def heartbeat(self, peer: int, now: float) -> None:
        """A heartbeat from `peer` arrived at `now`."""
        todo("FailureDetector.heartbeat")

    def closed(self, peer: int, now: float) -> None:
        """The connection to `peer` closed or was reset at `now`: the process is gone."""
        todo("FailureDetector.closed")

    def status(self, peer: int, now: float) -> str:
        """ "alive", "suspect" or "dead" (see the class's docstring)."""
        todo("FailureDetector.status")
