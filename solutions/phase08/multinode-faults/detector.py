"""Task "detect": a heartbeat failure detector (alive, suspect, dead), fed with times.

The detector never reads a clock: every call says what time it is (`now`, seconds on one
monotonic clock), so the same detector runs live in a host and replays a recorded trace.
"""

from __future__ import annotations

from .jobs import ALIVE, DEAD, SUSPECT


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
        if not 0 < suspect_after < dead_after:
            raise ValueError(
                f"need 0 < suspect_after < dead_after, got {suspect_after} and {dead_after}"
            )
        self.suspect_after, self.dead_after = float(suspect_after), float(dead_after)
        self.last = {int(p): float(start) for p in peers}
        self.died: dict[int, float] = {}

    def _peer(self, peer: int) -> int:
        if peer not in self.last:
            raise ValueError(f"unknown peer {peer}")
        return peer

    def _settle(self, peer: int, now: float) -> None:
        if peer not in self.died and now - self.last[peer] >= self.dead_after:
            self.died[peer] = self.last[peer] + self.dead_after

    def heartbeat(self, peer: int, now: float) -> None:
        """A heartbeat from `peer` arrived at `now`."""
        peer = self._peer(peer)
        self._settle(peer, now)
        if peer not in self.died:
            self.last[peer] = max(self.last[peer], float(now))

    def closed(self, peer: int, now: float) -> None:
        """The connection to `peer` closed or was reset at `now`: the process is gone."""
        peer = self._peer(peer)
        self._settle(peer, now)
        self.died.setdefault(peer, float(now))

    def status(self, peer: int, now: float) -> str:
        peer = self._peer(peer)
        self._settle(peer, now)
        if peer in self.died:
            return DEAD
        return SUSPECT if now - self.last[peer] >= self.suspect_after else ALIVE
