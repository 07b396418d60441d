"""YOUR FILE. Tasks "verify" (verify_license) and "seats" (SeatPool): the client side.

The product ships this file and the vendor's PUBLIC keys (a keyring of formats.KeyEntry), never
a private key. README "Verification order" says which refusal wins when several apply.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import canonical
from .clockguard import ClockGuard
from .formats import (
    LICENSE_FIELDS,
    REVOCATION_FIELDS,
    ClockRollback,
    FormatError,
    KeyEntry,
    StateTampered,
    Verdict,
    unpack,
)
from .machine import digest_parts, matches, valid_binding

DEFAULT_TOLERANCE = 300  # seconds a clock may read behind a time already seen (NTP steps, drift)


class Refused(Exception):
    """Internal: verification stops with this reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def seconds(now: datetime) -> int:
    """Whole Unix seconds of an aware datetime; ValueError for a naive one (its zone is unknown)."""
    if type(now) is not datetime or now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"{now!r} is not a timezone-aware datetime")
    return math.floor(now.timestamp())


def find_key(keyring: list[KeyEntry], kid: Any) -> KeyEntry:
    """The keyring's entry named kid (never a position: keyrings grow and get reordered)."""
    found = [e for e in keyring if e.kid == kid]
    if len(found) != 1:
        raise Refused("unknown-key")
    return found[0]


def open_signed(text: str, keyring: list[KeyEntry], fields: tuple[str, ...]) -> dict[str, Any]:
    """The payload of a signed document, after checking, in order: the frame ("format"), the
    canonical encoding ("encoding"), the exact field names ("fields"), kid ("unknown-key"), the
    signature over exactly the payload bytes ("signature"), the key's window ("key-retired")."""
    try:
        data, signature = unpack(text)
    except FormatError:
        raise Refused("format") from None
    try:
        payload = canonical.decode(data)
    except ValueError:
        raise Refused("encoding") from None
    if type(payload) is not dict or set(payload) != set(fields):
        raise Refused("fields")
    if type(payload["issued"]) is not int or type(payload["kid"]) is not str:
        raise Refused("fields")
    entry = find_key(keyring, payload["kid"])
    try:
        Ed25519PublicKey.from_public_bytes(entry.public_key).verify(signature, data)
    except InvalidSignature:
        raise Refused("signature") from None
    issued = payload["issued"]
    if entry.revoked or issued < entry.not_before:
        raise Refused("key-retired")
    if entry.not_after is not None and issued >= entry.not_after:
        raise Refused("key-retired")
    return payload


def _check_license_fields(p: dict[str, Any]) -> None:
    ints = ("expiry", "grace", "issued", "not_before", "seats")
    if not all(type(p[name]) is int for name in ints):
        raise Refused("fields")
    if p["grace"] < 0 or p["seats"] < 1 or p["expiry"] <= p["not_before"]:
        raise Refused("fields")
    strs = ("id", "kid", "licensee", "product")
    if not all(type(p[name]) is str and p[name] for name in strs):
        raise Refused("fields")
    features = p["features"]
    if type(features) is not list or not all(type(f) is str for f in features):
        raise Refused("fields")
    if features != sorted(set(features)):
        raise Refused("fields")
    if p["machine"] is not None and not valid_binding(p["machine"]):
        raise Refused("fields")


def _revocations(text: str | None, keyring: list[KeyEntry], guard: ClockGuard | None) -> list[str]:
    seen = guard.serial() if guard is not None else 0
    if text is None:
        if seen > 0:
            raise Refused("revocations")  # a list was seen before: deleting it un-revokes nothing
        return []
    try:
        crl = open_signed(text, keyring, REVOCATION_FIELDS)
    except Refused:
        raise Refused("revocations") from None
    serial, revoked = crl["serial"], crl["revoked"]
    if type(serial) is not int or serial < 1 or type(revoked) is not list:
        raise Refused("revocations")
    if not all(type(r) is str for r in revoked):
        raise Refused("revocations")
    if serial < seen:
        raise Refused("revocations")  # an older list replayed
    if guard is not None:
        guard.record_serial(serial)
    return revoked


def _verify(
    text: str,
    keyring: list[KeyEntry],
    product: str,
    now: int,
    components: dict[str, str] | None,
    revocations: str | None,
    guard: ClockGuard | None,
) -> Verdict:
    p = open_signed(text, keyring, LICENSE_FIELDS)
    _check_license_fields(p)
    if p["product"] != product:
        raise Refused("product")
    if p["id"] in _revocations(revocations, keyring, guard):
        raise Refused("revoked")
    if p["machine"] is not None:
        if components is None or not matches(p["machine"], digest_parts(components, p["product"])):
            raise Refused("machine")
    tolerance = guard.tolerance if guard is not None else DEFAULT_TOLERANCE
    if now < p["issued"] - tolerance:
        raise Refused("rollback")  # signed after "now": the clock was set back
    if now < p["not_before"]:
        raise Refused("not-yet-valid")
    features = list(p["features"])
    if now < p["expiry"]:
        return Verdict("valid", features=features, license_id=p["id"])
    end = p["expiry"] + p["grace"]  # grace counts from expiry, once
    if now < end:
        return Verdict("grace", features=features, grace_left=end - now, license_id=p["id"])
    raise Refused("expired")


def verify_license(
    text: str,
    keyring: list[KeyEntry],
    product: str,
    now: datetime,
    components: dict[str, str] | None = None,
    *,
    revocations: str | None = None,
    guard: ClockGuard | None = None,
) -> Verdict:
    """Decide whether the license `text` lets this machine run now (README "Verification
    order"): for `product`, a Verdict with status "valid", "grace" (with grace_left) or
    "refused" (with one of formats.REASONS). components: this machine's raw components (machine.py), None where the
    product runs unbound. revocations: the vendor's signed revocation list, if any. guard: this
    machine's ClockGuard, which sees `now` first. ValueError for a naive `now`."""
    t = seconds(now)
    try:
        if guard is not None:
            try:
                guard.observe(now)
            except (ClockRollback, StateTampered):
                raise Refused("rollback") from None
        return _verify(text, keyring, product, t, components, revocations, guard)
    except Refused as r:
        return Verdict("refused", reason=r.reason)


class SeatPool:
    """A floating license's seats, as a license server (FlexLM's lmgrd, RLM) keeps them: at most
    `seats` holders at once; a checkout is a lease of `lease` seconds, renewed by the holder
    checking out again (its heartbeat); a lease not renewed in time frees its seat."""

    def __init__(self, seats: int, lease: int) -> None:
        if type(seats) is not int or seats < 1 or type(lease) is not int or lease < 1:
            raise ValueError("seats and lease are ints >= 1")
        self.seats, self.lease = seats, lease
        self._until: dict[str, int] = {}  # holder -> end of its lease (Unix seconds)

    def _expire(self, t: int) -> None:
        for holder in [h for h, end in self._until.items() if end <= t]:
            del self._until[holder]

    def checkout(self, holder: str, now: datetime) -> bool:
        """Take (or renew) a seat for holder; False when every seat is held by a live lease."""
        t = seconds(now)
        self._expire(t)
        if holder not in self._until and len(self._until) >= self.seats:
            return False
        self._until[holder] = t + self.lease
        return True

    def release(self, holder: str) -> None:
        """Give holder's seat back (nothing happens when it holds none)."""
        self._until.pop(holder, None)

    def holders(self, now: datetime) -> list[str]:
        """The holders of live leases at now, sorted."""
        t = seconds(now)
        return sorted(h for h, end in self._until.items() if end > t)
