"""Fixtures of the licensing tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it.

The tests are their own vendor: `vendor` makes fresh Ed25519 keys in every run (nothing fixed
that a submission could learn) and signs with `cryptography` directly, never with issuer.py."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

T0 = 1_800_000_000  # 2027-01-15T08:00:00Z: the public tests' "now"


@pytest.fixture(scope="module")
def formats(kata: Any) -> Any:
    """formats.py (given): pack/unpack, KeyEntry, Verdict, the errors, the field lists."""
    return kata.module("formats")


@pytest.fixture(scope="module")
def machine(kata: Any) -> Any:
    """machine.py (given): digest_parts and the k-of-n matcher."""
    return kata.module("machine")


@pytest.fixture(scope="module")
def canonical(kata: Any) -> Any:
    """canonical.py (yours): task canonical."""
    return kata.module("canonical")


@pytest.fixture(scope="module")
def issuer(kata: Any) -> Any:
    """issuer.py (yours): task issue."""
    return kata.module("issuer")


@pytest.fixture(scope="module")
def verifier(kata: Any) -> Any:
    """verifier.py (yours): tasks verify and seats."""
    return kata.module("verifier")


@pytest.fixture(scope="module")
def clockguard(kata: Any) -> Any:
    """clockguard.py (yours): task clock."""
    return kata.module("clockguard")


@pytest.fixture(scope="module")
def activation(kata: Any) -> Any:
    """activation.py (yours): task activation."""
    return kata.module("activation")


def at(t: int, hours: float = 0.0) -> datetime:
    """Unix second t as an aware datetime in the zone UTC+hours (the same instant)."""
    return datetime.fromtimestamp(t, timezone(timedelta(hours=hours)))


def ascii_json(payload: Any) -> bytes:
    """The canonical bytes of the public tests' payloads. They hold ASCII strings, ints, lists
    and objects only, where json.dumps with these options happens to agree with canonical JSON;
    it is not a canonical encoder (README "Canonical JSON": floats, key order, NFC)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class Vendor:
    """The tests' vendor: Ed25519 keys made now, a keyring of their public halves, signing with
    cryptography. kid -> private key lives here only (and in PEM files under a tmp_path)."""

    def __init__(self, formats: Any) -> None:
        self.formats = formats
        self.private: dict[str, Ed25519PrivateKey] = {}
        self.entries: dict[str, Any] = {}

    def new_key(
        self, kid: str, not_before: int, not_after: int | None = None, revoked: bool = False
    ) -> Ed25519PrivateKey:
        key = Ed25519PrivateKey.generate()
        self.private[kid] = key
        raw = key.public_key().public_bytes_raw()
        self.entries[kid] = self.formats.KeyEntry(kid, raw, not_before, not_after, revoked)
        return key

    def keyring(self, order: list[str] | None = None) -> list[Any]:
        return [self.entries[k] for k in (order or list(self.entries))]

    def sign(self, data: bytes, kid: str, key: Ed25519PrivateKey | None = None) -> str:
        """A KATA SIGNED block of data, signed by kid's key (or `key`, e.g. a forger's)."""
        return self.formats.pack(data, (key or self.private[kid]).sign(data))

    def pem(self, kid: str, directory: Path) -> Path:
        """kid's private key as a PEM PKCS#8 file in directory (a tmp_path, outside the kata)."""
        path = directory / f"{kid}.pem"
        path.write_bytes(
            self.private[kid].private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return path


@pytest.fixture
def vendor(formats: Any) -> Vendor:
    """A fresh vendor with no keys yet (vendor.new_key(kid, not_before, ...))."""
    return Vendor(formats)


@pytest.fixture(scope="module")
def helpers() -> Any:
    """at(t, hours) and ascii_json(payload) for tests that cannot import this module."""
    return type("Helpers", (), {"at": staticmethod(at), "ascii_json": staticmethod(ascii_json)})
