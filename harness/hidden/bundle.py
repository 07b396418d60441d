"""The hidden-test bundle: a kata set's tests, encrypted and authenticated with AES-256-GCM.

File layout::

    GPUKATAS-HIDDEN 1\\n            magic line
    {"format": 1, ...}\\n           header: one line of JSON, readable without the key
    nonce (12 bytes) || ciphertext || GCM tag (16 bytes)

The header says which katas the bundle holds and how many hidden test functions each has (what
a run without the key reports), the key's fingerprint (to tell a wrong key from a tampered
file) and the SHA-256 of the learner tree's hash manifest. It is the GCM's associated data, so
changing any byte of the file makes decryption fail. The payload is zlib-compressed JSON:
``{"katas": {"katas/phase01/simt": {"public": {rel: source}, "hidden": {rel: source}}}}`` with
paths relative to the kata directory (public tests) and to its ``solutions/`` mirror (hidden).
Nothing here touches the disk but the bundle file itself.
"""

from __future__ import annotations

import ast
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import atomic
from .._lazy import lazy_module
from .keys import Key

# Imported when a bundle is sealed or opened; reading a header (a run without the key) needs neither.
aead = lazy_module("cryptography.hazmat.primitives.ciphers.aead")
crypto_errors = lazy_module("cryptography.exceptions")

MAGIC = b"GPUKATAS-HIDDEN 1\n"
FORMAT = 1
NONCE_BYTES = 12
MAX_HEADER = 1 << 20


class BundleError(Exception):
    """A bundle that cannot be used: bad format, wrong key, or modified after publishing."""


@dataclass
class KataTests:
    """One kata's canonical tests: sources keyed by path (relative to the kata / its mirror)."""

    path: str  # the kata directory relative to the repository root, e.g. "katas/phase01/simt"
    kata_id: str
    public: dict[str, str] = field(default_factory=dict)
    hidden: dict[str, str] = field(default_factory=dict)

    @property
    def hidden_tests(self) -> int:
        return sum(count_tests(src) for rel, src in self.hidden.items() if is_test_file(rel))

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.kata_id,
            "path": self.path,
            "hidden_tests": self.hidden_tests,
            "hidden_files": len(self.hidden),
            "public_files": len(self.public),
        }


@dataclass
class Header:
    katas: list[dict[str, Any]]
    key_id: str
    integrity_sha256: str = ""  # of grading/integrity.json, "" when there is none

    def to_line(self) -> bytes:
        d = {"format": FORMAT, "cipher": "AES-256-GCM", "key_id": self.key_id,
             "integrity_sha256": self.integrity_sha256, "katas": self.katas}  # fmt: skip
        return json.dumps(d, sort_keys=True, separators=(",", ":")).encode() + b"\n"

    def hidden_count(self, kata_path: str) -> int | None:
        for k in self.katas:
            if k.get("path") == kata_path:
                return int(k.get("hidden_tests", 0))
        return None


def is_test_file(rel: str) -> bool:
    name = Path(rel).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def count_tests(source: str) -> int:
    """Test functions in a module, the way pytest finds them by default (`test*` functions and
    methods of `Test*` classes); parametrized cases count once."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0
    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    n = 0
    for node in tree.body:
        if isinstance(node, funcs) and node.name.startswith("test"):
            n += 1
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            n += sum(isinstance(b, funcs) and b.name.startswith("test") for b in node.body)
    return n


# --------------------------------------------------------------------------- writing
def pack(katas: list[KataTests], key: Key, integrity_sha256: str = "") -> bytes:
    header = Header([k.summary() for k in katas], key.fingerprint, integrity_sha256).to_line()
    payload = {"katas": {k.path: {"id": k.kata_id, "public": k.public, "hidden": k.hidden}
                         for k in katas}}  # fmt: skip
    plain = zlib.compress(json.dumps(payload, sort_keys=True).encode(), 9)
    nonce = os.urandom(NONCE_BYTES)  # random per bundle: a key may seal many bundles
    sealed = aead.AESGCM(key.secret).encrypt(nonce, plain, MAGIC + header)
    return MAGIC + header + nonce + sealed


def write_bundle(path: Path, katas: list[KataTests], key: Key, integrity_sha256: str = "") -> None:
    atomic.write_bytes(path, pack(katas, key, integrity_sha256))


# --------------------------------------------------------------------------- reading
def _split(data: bytes, where: str) -> tuple[bytes, Header, bytes]:
    if not data.startswith(MAGIC):
        raise BundleError(f"{where}: not a gpu-katas hidden-test bundle (it does not start "
                          f"with {MAGIC.strip().decode()!r})")  # fmt: skip
    end = data.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER)
    if end < 0:
        raise BundleError(f"{where}: the bundle's header line is missing or cut short")
    line = data[len(MAGIC) : end + 1]
    try:
        d = json.loads(line)
        if d.get("format") != FORMAT:
            raise BundleError(
                f"{where}: bundle format {d.get('format')!r}, this harness reads {FORMAT}"
            )
        header = Header(list(d["katas"]), str(d["key_id"]), str(d.get("integrity_sha256", "")))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise BundleError(f"{where}: the bundle's header is not valid ({e})") from None
    return MAGIC + line, header, data[end + 1 :]


def read_header(path: Path) -> Header:
    """The plaintext header (no key needed; not authenticated until the bundle is opened)."""
    return _split(_read(path), str(path))[1]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise BundleError(
            f"{path}: cannot read the hidden-test bundle: {e.strerror or e}"
        ) from None


def unpack(data: bytes, key: Key, where: str = "bundle") -> tuple[Header, list[KataTests]]:
    aad, header, body = _split(data, where)
    if header.key_id != key.fingerprint:
        raise BundleError(
            f"{where}: wrong key: the bundle was sealed with key {header.key_id}, but "
            f"{key.origin} is key {key.fingerprint}"
        )
    if len(body) < NONCE_BYTES + 16:
        raise BundleError(f"{where}: the bundle is cut short ({len(body)} bytes after the header)")
    try:
        plain = aead.AESGCM(key.secret).decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], aad)
    except crypto_errors.InvalidTag:
        raise BundleError(
            f"{where}: the bundle failed authentication: it was modified after it was "
            "published (or is corrupt); fetch it again or ask your instructor"
        ) from None
    try:
        payload = json.loads(zlib.decompress(plain))
        katas = [
            KataTests(path, str(k["id"]), dict(k["public"]), dict(k["hidden"]))
            for path, k in sorted(payload["katas"].items())
        ]
    except (ValueError, KeyError, TypeError, zlib.error) as e:  # authentic but malformed: a bug
        raise BundleError(f"{where}: the bundle's contents are malformed ({e})") from None
    return header, katas


def open_bundle(path: Path, key: Key) -> tuple[Header, list[KataTests]]:
    return unpack(_read(path), key, str(path))
