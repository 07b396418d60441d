"""YOUR FILE. Task "clock": clock-rollback detection with a tamper-evident high-water mark.

An expiry date is only as good as the clock: set it back a year and a one-month license runs
for ever. So the client keeps the latest time it has seen (the high-water mark) in a state
file, and refuses a clock earlier than it by more than a tolerance. The file is on the
customer's disk, so it carries an HMAC-SHA256 under a key of this machine: a file edited,
truncated, or written under another key is StateTampered, never trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from datetime import datetime
from pathlib import Path

from . import canonical
from .formats import ClockRollback, StateTampered


def _seconds(now: datetime) -> int:
    if type(now) is not datetime or now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"{now!r} is not a timezone-aware datetime")
    return math.floor(now.timestamp())


class ClockGuard:
    """The persisted high-water mark of one machine (path: its state file; mac_key: a secret of
    this machine, e.g. derived from a sealed store; tolerance: seconds the clock may read behind
    the mark, for NTP corrections). Every method reads the file afresh: another process (or a
    restart) sees what this one wrote, and an edit between two calls is caught."""

    def __init__(self, path: str | os.PathLike[str], mac_key: bytes, tolerance: int = 300) -> None:
        """ValueError for a mac_key of fewer than 16 bytes or a tolerance that is not an int >= 0."""
        if type(mac_key) is not bytes or len(mac_key) < 16:
            raise ValueError("mac_key must be at least 16 bytes")
        if type(tolerance) is not int or tolerance < 0:
            raise ValueError("tolerance must be an int >= 0")
        self.path, self.mac_key, self.tolerance = Path(path), mac_key, tolerance

    def _mac(self, body: bytes) -> str:
        return hmac.new(self.mac_key, b"kata-clockguard-v1\0" + body, hashlib.sha256).hexdigest()

    def _load(self) -> dict[str, int]:
        if not self.path.exists():
            return {"high_water": 0, "serial": 0}  # first run: the license's `issued` is the floor
        raw = self.path.read_bytes()
        body, sep, mac = raw.rpartition(b"\n")
        if not sep or not hmac.compare_digest(mac, self._mac(body).encode()):
            raise StateTampered(f"{self.path}: the MAC does not match")
        try:
            state = canonical.decode(body)
        except ValueError:
            raise StateTampered(f"{self.path}: not a state") from None
        if type(state) is not dict or set(state) != {"high_water", "serial"}:
            raise StateTampered(f"{self.path}: not a state")
        return state

    def _save(self, state: dict[str, int]) -> None:
        body = canonical.encode(state)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(body + b"\n" + self._mac(body).encode())
        os.replace(tmp, self.path)  # atomic: a crash leaves the old state or the new one

    def observe(self, now: datetime) -> int:
        """Check now against the mark and raise the mark to now; returns the mark. ClockRollback
        when now is more than tolerance seconds before it; StateTampered for a bad file."""
        t = _seconds(now)
        state = self._load()
        if t < state["high_water"] - self.tolerance:
            raise ClockRollback(f"the clock reads {t}, before {state['high_water']} already seen")
        if t > state["high_water"]:
            state["high_water"] = t
            self._save(state)
        return state["high_water"]

    def high_water(self) -> int:
        """The mark (0 before the first observation)."""
        return self._load()["high_water"]

    def serial(self) -> int:
        """The highest revocation-list serial recorded (0: none yet)."""
        return self._load()["serial"]

    def record_serial(self, serial: int) -> None:
        """Remember a revocation list's serial (the highest one wins)."""
        state = self._load()
        if serial > state["serial"]:
            state["serial"] = serial
            self._save(state)
