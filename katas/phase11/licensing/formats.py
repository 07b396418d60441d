"""GIVEN (read it, do not edit it): the wire formats and the types every file of the kata shares.

A signed document (a license, a revocation list, an activation response) travels as text:

    -----BEGIN KATA SIGNED-----
    <base64url of the payload bytes, no padding>.<base64url of the 64-byte Ed25519 signature>
    -----END KATA SIGNED-----

`pack` and `unpack` only frame bytes: they decide nothing about trust. The payload bytes are
the canonical JSON of canonical.py (yours), and the signature covers exactly those bytes.
Times in payloads are integers, Unix seconds (UTC); times passed to functions are
timezone-aware `datetime`s (a naive one is refused with ValueError).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

BEGIN = "-----BEGIN KATA SIGNED-----"
END = "-----END KATA SIGNED-----"
SIGNATURE_BYTES = 64  # Ed25519: R (32 bytes) || S (32 bytes)
PUBLIC_KEY_BYTES = 32

# The fields of a license payload, exactly these (README "The license").
LICENSE_FIELDS = (
    "expiry",  # int: Unix seconds; valid while now < expiry
    "features",  # list of str: sorted, no duplicates
    "grace",  # int >= 0: seconds after expiry during which the license still works, with a warning
    "id",  # str: the license's serial, what a revocation list names
    "issued",  # int: when the vendor signed it
    "kid",  # str: the id of the key that signed it (a KeyEntry.kid)
    "licensee",  # str (NFC)
    "machine",  # null (floating) or {"k": int, "parts": {component: hex digest}} (machine.py)
    "not_before",  # int: valid from
    "product",  # str
    "seats",  # int >= 1
)
REVOCATION_FIELDS = ("issued", "kid", "revoked", "serial")  # revoked: sorted license ids
CHALLENGE_FIELDS = ("issued", "machine", "nonce", "product")
RESPONSE_FIELDS = ("issued", "kid", "license", "machine", "nonce", "product")

# Why verify_license refused (Verdict.reason), one word each (README "Verification order").
REASONS = (
    "format",  # not a KATA SIGNED block (unpack failed)
    "encoding",  # the payload bytes are not canonical JSON (canonical.decode refused them)
    "fields",  # not exactly LICENSE_FIELDS, or a field of the wrong type or range
    "unknown-key",  # kid names no key of the keyring
    "signature",  # the signature does not verify over the payload bytes with kid's key
    "key-retired",  # kid's key was revoked, or the license was issued outside the key's window
    "product",  # a license for another product
    "revocations",  # the revocation list is missing, forged, malformed, or older than one seen
    "revoked",  # the license id is on the revocation list
    "machine",  # bound to another machine
    "rollback",  # the clock is earlier than a time already seen (ClockGuard) or than `issued`
    "not-yet-valid",  # now < not_before
    "expired",  # now >= expiry + grace
)
STATUSES = ("valid", "grace", "refused")


class FormatError(ValueError):
    """The text is not one KATA SIGNED block of base64url payload and a 64-byte signature."""


class ClockRollback(Exception):
    """The clock reads earlier than a time this machine already saw (beyond the tolerance)."""


class StateTampered(Exception):
    """The persisted clock state does not carry a valid MAC under this machine's key."""


class ActivationError(Exception):
    """An activation response was refused; `reason` is one word (README "Activation")."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class KeyEntry:
    """One vendor public key of the keyring the product ships (never a private key).

    A license signed with this key is trusted when not_before <= license.issued and (not_after
    is None or license.issued < not_after), and the key is not revoked (a compromised key: every
    document it signed is refused)."""

    kid: str
    public_key: bytes  # 32 raw bytes (Ed25519PublicKey.public_bytes_raw())
    not_before: int  # Unix seconds
    not_after: int | None = None  # retirement; None: the current key
    revoked: bool = False


@dataclass(frozen=True)
class Verdict:
    """What verify_license decided. status "valid": every feature works; "grace": past expiry but
    within the grace period (features still work, warn the user: grace_left seconds remain);
    "refused": reason says why (one of REASONS) and features is empty."""

    status: str
    reason: str = ""
    features: list[str] = field(default_factory=list)
    grace_left: int = 0
    license_id: str = ""


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text) or len(text) % 4 == 1:
        raise FormatError(f"not base64url: {text[:40]!r}")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as e:
        raise FormatError(f"not base64url: {e}") from None
    if _b64e(data) != text:  # unused low bits set in the last character: another spelling
        raise FormatError(f"not canonical base64url: {text[-8:]!r}")
    return data


def b64encode(data: bytes) -> str:
    """base64url without padding (RFC 4648 section 5), as every document of the kata uses."""
    return _b64e(data)


def b64decode(text: str) -> bytes:
    """The inverse of b64encode; FormatError on anything else."""
    return _b64d(text)


def pack(payload: bytes, signature: bytes) -> str:
    """Frame payload bytes and their signature as one KATA SIGNED block."""
    if len(signature) != SIGNATURE_BYTES:
        raise FormatError(f"an Ed25519 signature is {SIGNATURE_BYTES} bytes, got {len(signature)}")
    return f"{BEGIN}\n{_b64e(payload)}.{_b64e(signature)}\n{END}\n"


def unpack(text: str) -> tuple[bytes, bytes]:
    """(payload bytes, signature) of one KATA SIGNED block; FormatError otherwise. The bytes
    are exactly what was packed: verify the signature over them, never over a re-encoding.
    Only the text `pack` writes is accepted (one text per document: no other line ends, no
    blank space around it, no other base64 spelling), so a document has one text."""
    if not isinstance(text, str):
        raise FormatError(f"a signed document is text, got {type(text).__name__}")
    lines = text.split("\n")
    if len(lines) != 4 or lines[0] != BEGIN or lines[2] != END or lines[3] != "":
        raise FormatError("not one KATA SIGNED block as pack writes it")
    if lines[1].count(".") != 1:
        raise FormatError("not one KATA SIGNED block as pack writes it")
    body, sig = lines[1].split(".")
    payload, signature = _b64d(body), _b64d(sig)
    if len(signature) != SIGNATURE_BYTES:
        raise FormatError(f"the signature is {len(signature)} bytes, not {SIGNATURE_BYTES}")
    return payload, signature
