"""YOUR FILE. Task "activation": offline (air-gapped) activation by challenge and response.

The machine cannot reach the vendor. It shows a challenge (a fresh nonce, its machine parts,
the product, the time); the user carries it to the vendor's portal (USB stick, QR code), which
answers with a signed response (issuer.respond) bound to that nonce and those parts; the user
carries the response back. A response is accepted once, on the machine that asked, in time.
"""

from __future__ import annotations

import math
import secrets
from datetime import datetime
from typing import Any

from . import canonical
from .formats import RESPONSE_FIELDS, ActivationError, KeyEntry, b64encode
from .machine import digest_parts
from .verifier import Refused, open_signed, verify_license

NONCE_BYTES = 32


def _seconds(now: datetime) -> int:
    if type(now) is not datetime or now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"{now!r} is not a timezone-aware datetime")
    return math.floor(now.timestamp())


class Activator:
    """This machine's side. components: its raw components (machine.py); keyring: the vendor's
    public keys; ttl: seconds a challenge stays answerable."""

    def __init__(
        self, components: dict[str, str], product: str, keyring: list[KeyEntry], ttl: int = 900
    ) -> None:
        self.components, self.product, self.keyring, self.ttl = components, product, keyring, ttl
        self.parts = digest_parts(components, product)
        self._pending: dict[str, int] = {}  # nonce -> when its challenge was made

    def challenge(self, now: datetime) -> str:
        """The canonical JSON text {"issued", "machine": parts, "nonce", "product"} with a fresh
        random nonce of 32 bytes (base64url), remembered until answered or stale."""
        nonce = b64encode(secrets.token_bytes(NONCE_BYTES))
        t = _seconds(now)
        self._pending[nonce] = t
        payload = {"issued": t, "machine": self.parts, "nonce": nonce, "product": self.product}
        return canonical.encode(payload).decode("utf-8")

    def complete(self, response: str, now: datetime) -> str:
        """The license the response carries, once its checks pass; ActivationError(reason)
        otherwise, reason one of: the verifier's "format", "encoding", "fields", "unknown-key",
        "signature", "key-retired"; "nonce" (not a pending nonce of this machine: unknown,
        already used, or another machine's), "stale" (answered after ttl), "product",
        "machine" (bound to other parts), "license" (the license inside is refused)."""
        t = _seconds(now)
        try:
            r: dict[str, Any] = open_signed(response, self.keyring, RESPONSE_FIELDS)
        except Refused as e:
            raise ActivationError(e.reason) from None
        nonce = r["nonce"]
        if type(nonce) is not str or nonce not in self._pending:
            raise ActivationError("nonce", "not a pending challenge of this machine")
        asked = self._pending[nonce]
        if t - asked > self.ttl or t < asked:
            del self._pending[nonce]  # a stale nonce never becomes answerable again
            raise ActivationError("stale", f"answered {t - asked} s after the challenge")
        if r["product"] != self.product:
            raise ActivationError("product", f"for {r['product']!r}")
        if r["machine"] != self.parts:
            raise ActivationError("machine", "the response is bound to other machine parts")
        lic = r["license"]
        if type(lic) is not str:
            raise ActivationError("fields", "license is not text")
        verdict = verify_license(lic, self.keyring, self.product, now, self.components)
        if verdict.status == "refused":
            raise ActivationError("license", verdict.reason)
        del self._pending[nonce]  # used once
        return lic
