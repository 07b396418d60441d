"""YOUR FILE. Task "issue": the vendor's tool, which signs licenses, revocation lists and
activation responses.

The signing key is the vendor's secret: it is read at run time from a path (the `key_path`
argument, else the file named by $KATA_LICENSE_KEY), a PEM PKCS#8 Ed25519 private key, and
never stored in this kata's tree (`kata publish` refuses a learner tree holding a private key).
"""

from __future__ import annotations

import math
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from . import canonical
from .formats import CHALLENGE_FIELDS, pack
from .machine import valid_binding

KEY_ENV = "KATA_LICENSE_KEY"
TERMS = ("expiry", "features", "grace", "id", "issued", "licensee", "machine", "not_before", "product", "seats")  # fmt: skip


def load_signing_key(key_path: str | os.PathLike[str] | None = None) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file at key_path, else at $KATA_LICENSE_KEY;
    ValueError when neither is set or the file holds no Ed25519 private key."""
    where = key_path if key_path is not None else os.environ.get(KEY_ENV)
    if not where:
        raise ValueError(f"no signing key: pass key_path or set ${KEY_ENV} to a PEM file")
    key = serialization.load_pem_private_key(Path(where).read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{where}: not an Ed25519 private key")
    return key


def unix_seconds(when: datetime) -> int:
    """Whole Unix seconds of an aware datetime (floor); ValueError for a naive one."""
    if type(when) is not datetime or when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"{when!r} is not a timezone-aware datetime")
    return math.floor(when.timestamp())


def sign_payload(payload: dict[str, Any], key: Ed25519PrivateKey) -> str:
    """One KATA SIGNED block: the canonical bytes of payload and their signature."""
    data = canonical.encode(payload)
    return pack(data, key.sign(data))


def _license_payload(terms: dict[str, Any], kid: str) -> dict[str, Any]:
    if set(terms) != set(TERMS):
        raise ValueError(f"terms must have exactly {sorted(TERMS)}; got {sorted(terms)}")
    seats, grace, features = terms["seats"], terms["grace"], terms["features"]
    if type(seats) is not int or seats < 1:
        raise ValueError(f"seats must be an int >= 1, got {seats!r}")
    if type(grace) is not timedelta or grace < timedelta(0) or grace % timedelta(seconds=1):
        raise ValueError(f"grace must be a timedelta of whole seconds >= 0, got {grace!r}")
    if not all(type(f) is str for f in features) or len(set(features)) != len(features):
        raise ValueError(f"features must be distinct strings, got {features!r}")
    for name in ("id", "licensee", "product"):
        if type(terms[name]) is not str or not terms[name]:
            raise ValueError(f"{name} must be a non-empty string, got {terms[name]!r}")
    if terms["machine"] is not None and not valid_binding(terms["machine"]):
        raise ValueError(f"machine must be None or a binding, got {terms['machine']!r}")
    payload = {
        "expiry": unix_seconds(terms["expiry"]),
        "features": sorted(features),
        "grace": int(grace.total_seconds()),
        "id": terms["id"],
        "issued": unix_seconds(terms["issued"]),
        "kid": kid,
        "licensee": terms["licensee"],
        "machine": terms["machine"],
        "not_before": unix_seconds(terms["not_before"]),
        "product": terms["product"],
        "seats": seats,
    }
    if payload["expiry"] <= payload["not_before"]:
        raise ValueError("expiry must come after not_before")
    return payload


def issue_license(terms: dict[str, Any], kid: str, key_path: str | None = None) -> str:
    """A signed license. terms: "id", "product", "licensee" (str), "features" (distinct str,
    any order: the payload sorts them), "seats" (int >= 1), "issued", "not_before", "expiry"
    (aware datetimes), "grace" (timedelta, whole seconds), "machine" (None or a binding
    {"k": k, "parts": digests}); kid names the signing key. ValueError for anything else."""
    payload = _license_payload(terms, kid)
    return sign_payload(payload, load_signing_key(key_path))


def issue_revocations(
    revoked: list[str], serial: int, issued: datetime, kid: str, key_path: str | None = None
) -> str:
    """A signed revocation list: {"issued", "kid", "revoked": sorted distinct ids, "serial"}.
    serial is an int >= 1 that grows with every list the vendor publishes."""
    if type(serial) is not int or serial < 1:
        raise ValueError(f"serial must be an int >= 1, got {serial!r}")
    if not all(type(r) is str for r in revoked):
        raise ValueError("revoked holds license ids (strings)")
    payload = {
        "issued": unix_seconds(issued),
        "kid": kid,
        "revoked": sorted(set(revoked)),
        "serial": serial,
    }
    return sign_payload(payload, load_signing_key(key_path))


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
    ch = canonical.decode(challenge.encode("utf-8"))
    if type(ch) is not dict or set(ch) != set(CHALLENGE_FIELDS):
        raise ValueError("not an activation challenge")
    if ch["product"] != terms.get("product"):
        raise ValueError(f"the challenge is for {ch['product']!r}, not {terms.get('product')!r}")
    binding = {"k": k, "parts": ch["machine"]}
    key = load_signing_key(key_path)
    lic = sign_payload(_license_payload({**terms, "machine": binding}, kid), key)
    payload = {
        "issued": unix_seconds(now),
        "kid": kid,
        "license": lic,
        "machine": ch["machine"],
        "nonce": ch["nonce"],
        "product": ch["product"],
    }
    return sign_payload(payload, key)
