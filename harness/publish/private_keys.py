"""No private key in a learner tree: ``kata publish`` refuses one, naming the file.

A product that verifies licenses ships the vendor's public keys; the vendor's signing key must
never ship (phase 11's licensing kata: a signing key in the distributable lets every customer
mint licenses). This scan finds the forms a private key takes on disk:

- PEM: any ``-----BEGIN ... PRIVATE KEY-----`` block with a body (PKCS#8, PKCS#1, SEC 1,
  encrypted PKCS#8, OpenSSH);
- PKCS#8 DER of an Ed25519 key (the 16-byte prefix RFC 8410 gives every one), raw in a binary
  file, or in base64 or hex in a text file; OpenSSH's ``openssh-key-v1`` blob, raw or base64;
- raw Ed25519 seeds: a file of exactly 32 or 64 bytes (libsodium's seed || public key), or whose
  whole text is their hex or base64, when its name says private (``priv``, ``secret``, ``seed``,
  ``signing``, ``.sk``; never a name with ``pub``: 32 bytes of a public key look the same);
- code that builds a private key from a literal: ``from_private_bytes`` called on a bytes,
  hex or base64 literal.

Markers are computed here, never written out, so this file does not match itself.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from pathlib import Path

# RFC 8410: SEQUENCE { INTEGER 0, SEQUENCE { OID 1.3.101.112 }, OCTET STRING { OCTET STRING (32) } }
PKCS8_ED25519 = bytes([0x30, 0x2E, 2, 1, 0, 0x30, 5, 6, 3, 0x2B, 0x65, 0x70, 4, 0x22, 4, 0x20])  # fmt: skip
OPENSSH_MAGIC = "-".join(("openssh-key", "v1")).encode() + bytes(1)  # fmt: skip
_PKCS8_B64 = base64.b64encode(PKCS8_ED25519)[:20].decode()  # 15 whole bytes: stable prefix
_OPENSSH_B64 = base64.b64encode(OPENSSH_MAGIC)[:20].decode()
_PEM = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*" + "PRIVATE" + r" KEY-----\s*(?:[A-Za-z0-9+/=:,\-]+\s*)*?"
    r"[A-Za-z0-9+/]{16,}"
)
_LITERAL_KEY = re.compile(
    r"from_private_bytes\(\s*(?:b?['\"]|bytes\.fromhex\(|bytearray\.fromhex\(|base64\.)"
)
_PRIVATE_NAME = re.compile(r"priv|secret|seed|signing|\.sk$", re.IGNORECASE)
_HEX = re.compile(r"[0-9a-fA-F]{64}(?:[0-9a-fA-F]{64})?")
_B64 = re.compile(r"[A-Za-z0-9+/_-]{43,44}={0,1}|[A-Za-z0-9+/_-]{86,88}={0,2}")
MAX_BYTES = 8 << 20  # larger files are data, not keys; they are not read


@dataclass(frozen=True)
class KeyLeak:
    file: str  # relative to the scanned tree
    what: str

    def __str__(self) -> str:
        return f"{self.file}: {self.what}"


def _raw_seed(name: str, data: bytes) -> str | None:
    if not _PRIVATE_NAME.search(name) or "pub" in name.lower():
        return None
    text = data.strip().decode("ascii", errors="replace")
    if _HEX.fullmatch(text):
        return "the hex of an Ed25519 seed in a file named as a private key"
    if _B64.fullmatch(text):
        return "the base64 of an Ed25519 seed in a file named as a private key"
    if len(data) in (32, 64):
        return f"{len(data)} raw bytes in a file named as a private key (an Ed25519 seed)"
    return None


def private_key_in(name: str, data: bytes) -> str | None:
    """What private key `data` (the bytes of a file called `name`) holds, or None."""
    if PKCS8_ED25519 in data:
        return "a DER PKCS#8 Ed25519 private key"
    if OPENSSH_MAGIC in data:
        return "an OpenSSH private key"
    text = data.decode("utf-8", errors="replace")
    if _PEM.search(text):
        return "a PEM private key"
    if _PKCS8_B64 in text:
        return "a base64 PKCS#8 Ed25519 private key"
    if PKCS8_ED25519.hex() in text.lower():
        return "a hex PKCS#8 Ed25519 private key"
    if _OPENSSH_B64 in text:
        return "a base64 OpenSSH private key"
    if _LITERAL_KEY.search(text):
        return "code that builds a private key from a literal"
    return _raw_seed(name, data)


def find_private_keys(tree: Path) -> list[KeyLeak]:
    """Every file under tree (``.git`` aside) that holds a private key, sorted by path."""
    found = []
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree)
        if ".git" in rel.parts or not p.is_file() or p.is_symlink():
            continue
        try:
            if p.stat().st_size > MAX_BYTES:
                continue
            data = p.read_bytes()
        except OSError:
            continue
        what = private_key_in(p.name, data)
        if what is not None:
            found.append(KeyLeak(rel.as_posix(), what))
    return found
