"""YOUR FILE. Task "clock": clock-rollback detection with a tamper-evident high-water mark.

An expiry date is only as good as the clock: set it back a year and a one-month license runs
for ever. So the client keeps the latest time it has seen (the high-water mark) in a state
file, and refuses a clock earlier than it by more than a tolerance. The file is on the
customer's disk, so it carries an HMAC-SHA256 under a key of this machine: a file edited,
truncated, or written under another key is StateTampered, never trusted.
"""

from __future__ import annotations

import hashlib  # noqa: F401  (you will need them)
import hmac  # noqa: F401
import os
from datetime import datetime

from harness import todo

from . import canonical  # noqa: F401
from .formats import ClockRollback, StateTampered  # noqa: F401


class ClockGuard:
    """The persisted high-water mark of one machine (path: its state file; mac_key: a secret of
    this machine, e.g. derived from a sealed store; tolerance: seconds the clock may read behind
    the mark, for NTP corrections). Every method reads the file afresh: another process (or a
    restart) sees what this one wrote, and an edit between two calls is caught."""

    def __init__(self, path: str | os.PathLike[str], mac_key: bytes, tolerance: int = 300) -> None:
        """ValueError for a mac_key of fewer than 16 bytes or a tolerance that is not an int >= 0."""
        todo("ClockGuard.__init__")

    def observe(self, now: datetime) -> int:
        """Check now against the mark and raise the mark to now; returns the mark. ClockRollback
        when now is more than tolerance seconds before it; StateTampered for a bad file."""
        todo("ClockGuard.observe")

    def high_water(self) -> int:
        """The mark (0 before the first observation)."""
        todo("ClockGuard.high_water")

    def serial(self) -> int:
        """The highest revocation-list serial recorded (0: none yet)."""
        todo("ClockGuard.serial")

    def record_serial(self, serial: int) -> None:
        """Remember a revocation list's serial (the highest one wins)."""
        todo("ClockGuard.record_serial")
