"""YOUR FILE. Task "issue": the vendor's tool, which signs licenses, revocation lists and
activation responses.

The signing key is the vendor's secret: it is read at run time from a path (the `key_path`
argument, else the file named by $KATA_LICENSE_KEY), a PEM PKCS#8 Ed25519 private key, and
never stored in this kata's tree (`kata publish` refuses a learner tree holding a private key).
"""

from __future__ import annotations

import math  # noqa: F401  (you will need them)
import os
from datetime import datetime, timedelta  # noqa: F401
from pathlib import Path  # noqa: F401
from typing import Any

from cryptography.hazmat.primitives import serialization  # noqa: F401
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness import todo

from . import canonical  # noqa: F401
from .formats import CHALLENGE_FIELDS, pack  # noqa: F401
from .machine import valid_binding  # noqa: F401

KEY_ENV = "KATA_LICENSE_KEY"
TERMS = ("expiry", "features", "grace", "id", "issued", "licensee", "machine", "not_before", "product", "seats")  # fmt: skip


def load_signing_key(key_path: str | os.PathLike[str] | None = None) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file at key_path, else at $KATA_LICENSE_KEY;
    ValueError when neither is set or the file holds no Ed25519 private key."""
    todo("load_signing_key")


def unix_seconds(when: datetime) -> int:
    """Whole Unix seconds of an aware datetime (floor); ValueError for a naive one."""
    todo("unix_seconds")


def sign_payload(payload: dict[str, Any], key: Ed25519PrivateKey) -> str:
    """One KATA SIGNED block: the canonical bytes of payload and their signature."""
    todo("sign_payload")


def issue_license(terms: dict[str, Any], kid: str, key_path: str | None = None) -> str:
    """A signed license. terms: "id", "product", "licensee" (str), "features" (distinct str,
    any order: the payload sorts them), "seats" (int >= 1), "issued", "not_before", "expiry"
    (aware datetimes), "grace" (timedelta, whole seconds), "machine" (None or a binding
    {"k": k, "parts": digests}); kid names the signing key. ValueError for anything else."""
    todo("issue_license")


def issue_revocations(
    revoked: list[str], serial: int, issued: datetime, kid: str, key_path: str | None = None
) -> str:
    """A signed revocation list: {"issued", "kid", "revoked": sorted distinct ids, "serial"}.
    serial is an int >= 1 that grows with every list the vendor publishes."""
    todo("issue_revocations")


def respond(
    challenge: str,
    terms: dict[str, Any],
    k: int,
    kid: str,
    now: datetime,
    key_path: str | None = None,
) -> str:
    """The vendor's answer to an offline activation challenge (activation.py): a signed
    response {"issued": now, "kid", "license", "machine", "nonce", "product"} carrying a license
    bound to the challenge's machine parts with threshold k. terms as issue_license's without
    "machine" (and its "product" must be the challenge's). ValueError for a challenge that is
    not canonical JSON of exactly CHALLENGE_FIELDS, or for terms of another product."""
    todo("respond")
