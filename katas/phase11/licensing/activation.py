"""YOUR FILE. Task "activation": offline (air-gapped) activation by challenge and response.

The machine cannot reach the vendor. It shows a challenge (a fresh nonce, its machine parts,
the product, the time); the user carries it to the vendor's portal (USB stick, QR code), which
answers with a signed response (issuer.respond) bound to that nonce and those parts; the user
carries the response back. A response is accepted once, on the machine that asked, in time.
"""

from __future__ import annotations

import secrets  # noqa: F401  (you will need them)
from datetime import datetime

from harness import todo

from . import canonical  # noqa: F401
from .formats import RESPONSE_FIELDS, ActivationError, KeyEntry, b64encode, unpack  # noqa: F401
from .machine import digest_parts  # noqa: F401
from .verifier import verify_license  # noqa: F401

NONCE_BYTES = 32


class Activator:
    """This machine's side. components: its raw components (machine.py); keyring: the vendor's
    public keys; ttl: seconds a challenge stays answerable."""

    def __init__(
        self, components: dict[str, str], product: str, keyring: list[KeyEntry], ttl: int = 900
    ) -> None:
        todo("Activator.__init__")

    def challenge(self, now: datetime) -> str:
        """The canonical JSON text {"issued", "machine": parts, "nonce", "product"} with a fresh
        random nonce of 32 bytes (base64url), remembered until answered or stale."""
        todo("Activator.challenge")

    def complete(self, response: str, now: datetime) -> str:
        """The license the response carries, once its checks pass; ActivationError(reason)
        otherwise, reason one of: the verifier's "format", "encoding", "fields", "unknown-key",
        "signature", "key-retired"; "nonce" (not a pending nonce of this machine: unknown,
        already used, or another machine's), "stale" (answered after ttl), "product",
        "machine" (bound to other parts), "license" (the license inside is refused)."""
        todo("Activator.complete")
