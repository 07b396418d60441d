"""YOUR FILE. Tasks "verify" (verify_license) and "seats" (SeatPool): the client side.

The product ships this file and the vendor's PUBLIC keys (a keyring of formats.KeyEntry), never
a private key. README "Verification order" says which refusal wins when several apply.
"""

from __future__ import annotations

from datetime import datetime

from cryptography.exceptions import InvalidSignature  # noqa: F401  (you will need them)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey  # noqa: F401

from harness import todo

from . import canonical  # noqa: F401
from .clockguard import ClockGuard
from .formats import LICENSE_FIELDS, REVOCATION_FIELDS, KeyEntry, Verdict, unpack  # noqa: F401
from .machine import digest_parts, matches, valid_binding  # noqa: F401

DEFAULT_TOLERANCE = 300  # seconds a clock may read behind a time already seen (NTP steps, drift)


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
    todo("verify_license")


class SeatPool:
    """A floating license's seats, as a license server (FlexLM's lmgrd, RLM) keeps them: at most
    `seats` holders at once; a checkout is a lease of `lease` seconds, renewed by the holder
    checking out again (its heartbeat); a lease not renewed in time frees its seat."""

    def __init__(self, seats: int, lease: int) -> None:
        """ValueError unless seats and lease (seconds) are ints >= 1."""
        todo("SeatPool.__init__")

    def checkout(self, holder: str, now: datetime) -> bool:
        """Take (or renew) a seat for holder; False when every seat is held by a live lease."""
        todo("SeatPool.checkout")

    def release(self, holder: str) -> None:
        """Give holder's seat back (nothing happens when it holds none)."""
        todo("SeatPool.release")

    def holders(self, now: datetime) -> list[str]:
        """The holders of live leases at now, sorted."""
        todo("SeatPool.holders")
