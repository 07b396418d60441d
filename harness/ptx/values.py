"""PTX types as numpy dtypes: immediates, register bits, rounding and flush-to-zero.

Registers hold raw bits (``uint8`` .. ``uint64``, ``bool`` for predicates); an instruction views
them as its own type (``.f32`` -> float32). Directed rounding (``.rz .rm .rp``) of f32 results is
exact: values are carried as an unevaluated float64 sum ``hi + lo`` (an error-free transformation)
and then rounded in the requested direction.
"""

from __future__ import annotations

import struct

import numpy as np

from .ptxtypes import TYPE_BITS, PtxSyntaxError, parse_int

__all__ = [
    "bits_dtype",
    "dtype_of",
    "flush",
    "imm_bits",
    "imm_value",
    "round_to_f32",
    "two_sum",
]

_DTYPES: dict[str, np.dtype] = {
    "pred": np.dtype(np.bool_),
    "b8": np.dtype(np.uint8), "u8": np.dtype(np.uint8), "s8": np.dtype(np.int8),
    "b16": np.dtype(np.uint16), "u16": np.dtype(np.uint16), "s16": np.dtype(np.int16),
    "f16": np.dtype(np.float16),
    "b32": np.dtype(np.uint32), "u32": np.dtype(np.uint32), "s32": np.dtype(np.int32),
    "f32": np.dtype(np.float32),
    "b64": np.dtype(np.uint64), "u64": np.dtype(np.uint64), "s64": np.dtype(np.int64),
    "f64": np.dtype(np.float64),
}  # fmt: skip


def dtype_of(ptype: str) -> np.dtype:
    return _DTYPES[ptype]


def bits_dtype(ptype: str) -> np.dtype:
    """The raw-bits dtype a register of `ptype` is stored as."""
    if ptype == "pred":
        return _DTYPES["pred"]
    return np.dtype(f"u{TYPE_BITS[ptype] // 8}")


def imm_bits(text: str, ptype: str) -> int:
    """Raw bits of an immediate written as `text`, for an operand of type `ptype`."""
    bits = TYPE_BITS[ptype]
    t = text.strip()
    neg = t.startswith("-")
    body = t.lstrip("-")
    if body[:2] in ("0f", "0F"):
        raw = int(body[2:], 16)
        return raw ^ (1 << 31) if neg else raw
    if body[:2] in ("0d", "0D"):
        raw = int(body[2:], 16)
        return raw ^ (1 << 63) if neg else raw
    is_float_literal = "." in body or ("e" in body.lower() and body[:2].lower() not in ("0x", "0b"))
    if ptype[0] == "f":
        value = float(t) if is_float_literal else float(parse_int(t))
        if bits == 32:
            return struct.unpack("<I", struct.pack("<f", value))[0]
        if bits == 64:
            return struct.unpack("<Q", struct.pack("<d", value))[0]
        return int(np.array(value, dtype=np.float16).view(np.uint16))
    if is_float_literal:
        raise PtxSyntaxError(0, f"floating-point literal {text} for a .{ptype} operand")
    if ptype == "pred":
        return 1 if parse_int(t) else 0
    return parse_int(t) & ((1 << bits) - 1)


def imm_value(text: str, ptype: str) -> np.ndarray:
    """A 0-d array of type `ptype` holding the immediate."""
    raw = imm_bits(text, ptype)
    if ptype == "pred":
        return np.array(bool(raw))
    return np.array(raw, dtype=bits_dtype(ptype)).view(dtype_of(ptype))


_F32_MIN_NORMAL = np.float32(2.0**-126)
_F64_MIN_NORMAL = np.float64(2.0**-1022)


def flush(x: np.ndarray) -> np.ndarray:
    """Flush subnormals to sign-preserving zero (the ``.ftz`` modifier)."""
    tiny = _F32_MIN_NORMAL if x.dtype == np.float32 else _F64_MIN_NORMAL
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros_like(x), x), x)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 s, e with s + e == a + b exactly (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def round_to_f32(hi: np.ndarray, lo: np.ndarray | float, mode: str) -> np.ndarray:
    """Round the exact value hi + lo (float64 parts) to float32: rn, rz, rm or rp."""
    hi = np.asarray(hi, dtype=np.float64)
    f = hi.astype(np.float32)
    if mode == "rn":
        # hi alone may sit exactly half-way; lo breaks the tie.
        lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), hi.shape)
        back = f.astype(np.float64)
        up = np.nextafter(f, np.float32(np.inf)).astype(np.float64)
        down = np.nextafter(f, np.float32(-np.inf)).astype(np.float64)
        tie_hi = (hi - back) == (up - back) / 2
        tie_lo = (back - hi) == (back - down) / 2
        f = np.where(tie_hi & (lo > 0), np.nextafter(f, np.float32(np.inf)), f)
        f = np.where(tie_lo & (lo < 0), np.nextafter(f, np.float32(-np.inf)), f)
        return f.astype(np.float32)
    back = f.astype(np.float64)
    # sign of (f - exact) = sign of (back - hi - lo), computed without rounding error first.
    diff = (back - hi) - lo
    above, below = diff > 0, diff < 0
    inf32, ninf32 = np.float32(np.inf), np.float32(-np.inf)
    if mode == "rz":
        f = np.where(above & (back > 0), np.nextafter(f, np.float32(0)), f)
        f = np.where(below & (back < 0), np.nextafter(f, np.float32(0)), f)
        # |exact| just above FLT_MAX rounds to FLT_MAX, not inf, toward zero.
        f = np.where(np.isinf(f) & np.isfinite(hi), np.copysign(np.float32(3.4028235e38), f), f)
    elif mode == "rm":
        f = np.where(above, np.nextafter(f, ninf32), f)
        f = np.where(np.isposinf(f) & np.isfinite(hi), np.float32(3.4028235e38), f)
    elif mode == "rp":
        f = np.where(below, np.nextafter(f, inf32), f)
        f = np.where(np.isneginf(f) & np.isfinite(hi), np.float32(-3.4028235e38), f)
    else:
        raise ValueError(f"unknown rounding mode {mode!r}")
    return f.astype(np.float32)
