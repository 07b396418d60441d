"""GIVEN: Python's view of your crate (through lib.rs's C ABI). Do not edit.

    lib = Lib(cffi_lib)
    comps = lib.collect(root)                   # [("machine-id", "4c4c..."), ("mac", "..."), ...]
    fp = lib.fingerprint(b"vendor-salt", comps)  # [("machine-id", <32 bytes>), ...]
    lib.compare(enrolled, fp)                    # Score(matched=.., mismatched=.., accepted=..)
    lib.verdict(enrolled, fp)                    # "same", "clone", ...

A `todo!()` reached in fingerprint.rs raises KataTodo (the task shows as not started); another
panic raises RustPanic with its message and line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import NativeFault, todo

OK, BAD_INPUT, TODO, PANIC = 0, 2, -2, -3
KINDS = ("machine-id", "dmi-uuid", "board-serial", "product-name", "cpu", "mac", "disk", "gpu")
VERDICTS = (
    "same",
    "reinstalled",
    "part-replaced",
    "hidden-hardware",
    "clone",
    "too-thin",
    "different",
)


class RustPanic(NativeFault, AssertionError):
    """fingerprint.rs panicked (an unwrap, an index out of range, an overflow ...): the test
    fails with the panic's message and line, and no gate is tripped (harness.NativeFault)."""


@dataclass(frozen=True)
class Score:
    matched: int
    mismatched: int
    accepted: bool


def _lines(items: Sequence[tuple[str, bytes | str]]) -> bytes:
    out = []
    for kind, value in items:
        raw = value.encode() if isinstance(value, str) else bytes(value)
        out.append(f"{kind}\t{raw.hex()}\n")
    return "".join(out).encode()


def _parse(blob: bytes) -> list[tuple[str, bytes]]:
    pairs = []
    for line in blob.decode().splitlines():
        kind, _, value = line.partition("\t")
        pairs.append((kind, bytes.fromhex(value)))
    return pairs


class Lib:
    """The crate's functions with Python values in and out."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.ffi = lib.ffi

    def _check(self, code: int, what: str) -> None:
        if code == OK:
            return
        msg = self.ffi.string(self.lib.kata_last_error()).decode(errors="replace")
        if code == TODO:
            todo(f"fingerprint.rs: {what} ({msg})")
        if code == BAD_INPUT:
            raise ValueError(f"{what}: {msg}")
        raise RustPanic(f"fingerprint.rs panicked in {what}: {msg}")

    def _call_buf(self, what: str, fn: Any, *args: Any) -> bytes:
        out = self.ffi.new("uint8_t **")
        n = self.ffi.new("size_t *")
        self._check(fn(*args, out, n), what)
        try:
            return bytes(self.ffi.buffer(out[0], n[0])) if n[0] else b""
        finally:
            self.lib.kata_free(out[0], n[0])

    def collect(self, root: Path | str) -> list[tuple[str, str]]:
        """collect(root): the components as (kind, value) pairs, in the order yours returns."""
        blob = self._call_buf("collect", self.lib.kata_collect, str(root).encode())
        return [(k, v.decode()) for k, v in _parse(blob)]

    def encode(self, fields: Sequence[bytes]) -> bytes:
        """encode(fields): the canonical encoding of a list of byte strings."""
        keep = [self.ffi.from_buffer("uint8_t[]", bytes(f) + b"\0") for f in fields]
        ptrs = self.ffi.new("const uint8_t *[]", max(1, len(keep)))
        lens = self.ffi.new("size_t[]", max(1, len(keep)))
        for i, (buf, f) in enumerate(zip(keep, fields, strict=False)):
            ptrs[i] = buf
            lens[i] = len(f)
        return self._call_buf("encode", self.lib.kata_encode, ptrs, lens, len(fields))

    def digests(self, salt: bytes, comps: Sequence[tuple[str, str]]) -> list[tuple[str, bytes]]:
        """[(kind, digest(salt, component))] for each component, in order."""
        return _parse(
            self._call_buf("digest", self.lib.kata_digests, salt, len(salt), _lines(comps))
        )

    def fingerprint(self, salt: bytes, comps: Sequence[tuple[str, str]]) -> list[tuple[str, bytes]]:
        """fingerprint(salt, components): its entries (kind, digest), in the order yours returns."""
        return _parse(
            self._call_buf("fingerprint", self.lib.kata_fingerprint, salt, len(salt), _lines(comps))
        )

    def to_bytes(self, entries: Sequence[tuple[str, bytes]]) -> bytes:
        """to_bytes(fingerprint): its canonical encoding."""
        return self._call_buf("to_bytes", self.lib.kata_to_bytes, _lines(entries))

    def compare(
        self, enrolled: Sequence[tuple[str, bytes]], current: Sequence[tuple[str, bytes]]
    ) -> Score:
        """compare(enrolled, current): matched and mismatched weight, and the decision."""
        out = self.ffi.new("uint32_t[3]")
        self._check(self.lib.kata_compare(_lines(enrolled), _lines(current), out), "compare")
        return Score(int(out[0]), int(out[1]), bool(out[2]))

    def verdict(
        self, enrolled: Sequence[tuple[str, bytes]], current: Sequence[tuple[str, bytes]]
    ) -> str:
        """verdict(enrolled, current): one of VERDICTS."""
        out = self.ffi.new("int32_t *")
        self._check(self.lib.kata_verdict(_lines(enrolled), _lines(current), out), "verdict")
        return VERDICTS[out[0]]

    def hmac_sha256(self, key: bytes, data: bytes) -> bytes:
        """The given sha256.rs's HMAC-SHA-256 (so you can check your digests against it)."""
        out = self.ffi.new("uint8_t[32]")
        self._check(self.lib.kata_hmac_sha256(key, len(key), data, len(data), out), "hmac_sha256")
        return bytes(out)
