"""Semantics of the PTX instructions the interpreter runs: one decoder per opcode family.

A decoder reads the opcode's modifiers and operands once and returns ``exec(state, mask)``, which
computes over all threads and writes only the threads in `mask`. Loads and stores touch memory for
the masked threads only, so a thread turned away by a bounds check never faults.

f32 add/sub/mul/div/sqrt/fma are correctly rounded (fma and the directed modes .rz/.rm/.rp go
through exact float64 arithmetic); ``.approx`` functions (ex2, lg2, sin, cos, rsqrt, tanh, rcp)
are computed in float64 and rounded, so they are *more* accurate than the hardware's (which is
within 2 ulp for ex2/lg2 over the normal range). f64 arithmetic rounds to nearest.
``div.approx.f32`` is what the PTX ISA defines it as, a * (1/b) rounded twice (0 for
2**126 < |b| < 2**128); ``div.full.f32`` (within 2 ulp on hardware) is computed correctly rounded.

What hardware computes differently is an error, not a guess: an ``add``/``sub`` without a
rounding modifier that reads the result of a ``mul`` without one may be contracted by ptxas into
one ``fma`` (PTX ISA, "add": "mul/add sequences with no rounding modifiers may be optimized to
use fused-multiply-add"), so where the fused and the two-rounding results differ for a thread,
the instruction raises :class:`PtxContractionError`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .decoder import Decoder, Exec, State
from .memory import PtxMemoryError
from .parser import TYPE_BITS, Address, Instruction, PtxUnsupportedError, Reg, Symbol, Vector
from .values import dtype_of, flush, round_to_f32, two_sum

__all__ = ["HANDLERS", "PtxContractionError"]

_ROUND = ("rn", "rz", "rm", "rp")
_ROUND_INT = ("rni", "rzi", "rmi", "rpi")
HANDLERS: dict[str, Callable[[Instruction, Decoder], Exec]] = {}


def _handler(*names: str):
    def register(fn):
        for n in names:
            HANDLERS[n] = fn
        return fn

    return register


def _types(inst: Instruction) -> list[str]:
    return [m for m in inst.modifiers if m in TYPE_BITS]


def _one_type(inst: Instruction, dec: Decoder) -> str:
    ts = _types(inst)
    if len(ts) != 1:
        raise dec.error(inst, f"{inst.base} needs exactly one type suffix")
    return ts[0]


def _arity(inst: Instruction, dec: Decoder, n: int) -> None:
    if len(inst.operands) != n:
        raise dec.error(inst, f"{inst.base} takes {n} operands, got {len(inst.operands)}")


def _rounding(inst: Instruction, modes: tuple[str, ...] = _ROUND) -> str | None:
    found = [m for m in inst.modifiers if m in modes]
    return found[0] if found else None


def _f32_post(inst: Instruction, x: np.ndarray) -> np.ndarray:
    if "ftz" in inst.modifiers and x.dtype == np.float32:
        x = flush(x)
    if "sat" in inst.modifiers and x.dtype.kind == "f":
        x = np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)
    return x


def _f_in(inst: Instruction, x: np.ndarray) -> np.ndarray:
    return flush(np.asarray(x)) if "ftz" in inst.modifiers and x.dtype == np.float32 else x


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 p, e with p + e == a * b exactly (Dekker/Veltkamp; no fma in numpy)."""
    p = a * b

    def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = x * 134217729.0  # 2**27 + 1
        hi = c - (c - x)
        return hi, x - hi

    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, np.where(np.isfinite(p), e, 0.0)


class PtxContractionError(Exception):
    """ptxas may fuse a mul and an add without rounding modifiers, and here that changes the
    result. `thread` indexes the grid's threads; the interpreter adds where it happened."""

    def __init__(self, thread: int, message: str) -> None:
        self.thread = thread
        super().__init__(message)


def _fused(a64: np.ndarray, b64: np.ndarray, c64: np.ndarray, t: str, mode: str) -> np.ndarray:
    """a * b + c rounded once (fma) to type t, from float64 inputs."""
    if t == "f32":
        s, e = two_sum(a64 * b64, c64)  # the product of two floats is exact in float64
        return round_to_f32(s, np.where(np.isfinite(s), e, 0.0), mode)
    p, pe = _two_prod(a64, b64)
    s, e = two_sum(p, c64)
    return s + (e + pe)


# --------------------------------------------------------------------------- moves
@_handler("mov")
def _mov(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 2)
    t = _one_type(inst, dec)
    dst, src = inst.operands
    if isinstance(dst, Vector):  # mov.b64 {lo, hi}, %rd: unpack
        parts = len(dst.items)
        pt = f"b{TYPE_BITS[t] // parts}"
        read = dec.reader(inst, src, t)
        writers = [dec.writer(inst, r, pt) for r in dst.items]
        shift = TYPE_BITS[t] // parts

        def unpack(st: State, m: np.ndarray) -> None:
            v = np.asarray(read(st)).view(f"u{TYPE_BITS[t] // 8}").astype(np.uint64)
            for i, w in enumerate(writers):
                w(st, ((v >> np.uint64(i * shift)) & np.uint64((1 << shift) - 1)).astype(dtype_of(pt)), m)  # fmt: skip

        return unpack
    write = dec.writer(inst, dst, t)
    if isinstance(src, Vector):  # mov.b64 %rd, {lo, hi}: pack
        parts = len(src.items)
        pt = f"b{TYPE_BITS[t] // parts}"
        readers = [dec.reader(inst, r, pt) for r in src.items]
        shift = TYPE_BITS[t] // parts

        def pack(st: State, m: np.ndarray) -> None:
            v = np.zeros(st.n, dtype=np.uint64)
            for i, r in enumerate(readers):
                v |= np.asarray(r(st)).astype(np.uint64) << np.uint64(i * shift)
            write(st, v.astype(f"u{TYPE_BITS[t] // 8}").view(dtype_of(t)), m)

        return pack
    read = dec.reader(inst, src, t)
    return lambda st, m: write(st, read(st), m)


# --------------------------------------------------------------------------- arithmetic
def _binary_int(op: str, inst: Instruction, t: str, dec: Decoder) -> Callable:
    dt = dtype_of(t)
    bits = TYPE_BITS[t]
    mods = inst.modifiers
    if op in ("add", "sub"):
        if "sat" in mods:
            lo, hi = np.iinfo(dt).min, np.iinfo(dt).max

            def sat(a, b):
                r = a.astype(np.int64) + (b.astype(np.int64) if op == "add" else -b.astype(np.int64))  # fmt: skip
                return np.clip(r, lo, hi).astype(dt)

            return sat
        return (lambda a, b: a + b) if op == "add" else (lambda a, b: a - b)
    if op == "mul":
        return _mul_int(inst, t, dec)
    if op == "div":
        return lambda a, b: _idiv(np.asarray(a), np.asarray(b), dt)[0]
    if op == "rem":
        return lambda a, b: _idiv(np.asarray(a), np.asarray(b), dt)[1]
    if op == "min":
        return np.minimum
    if op == "max":
        return np.maximum
    raise dec.error(inst, f"{op} on integers of {bits} bits")


def _idiv(a: np.ndarray, b: np.ndarray, dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """C division: quotient truncated toward zero, remainder with the sign of the dividend.
    Division by zero gives all-ones (as the hardware does) and a remainder of `a`."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=dt), np.asarray(b, dtype=dt))
    zero = b == 0
    bb = np.where(zero, dt.type(1), b)
    if dt.kind == "u":
        q, r = a // bb, a % bb
    else:
        r = np.fmod(a, bb)
        q = (a - r) // bb
    ones = np.array(-1).astype(np.int64).astype(dt) if dt.kind == "i" else np.iinfo(dt).max
    return np.where(zero, ones, q).astype(dt), np.where(zero, a, r).astype(dt)


def _mul_int(inst: Instruction, t: str, dec: Decoder) -> Callable:
    dt = dtype_of(t)
    bits = TYPE_BITS[t]
    mods = inst.modifiers
    if "wide" in mods:
        wide = np.dtype(f"{dt.kind}{bits // 4}")
        return lambda a, b: np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
    if "hi" in mods:
        if bits <= 32:
            wide = np.dtype(f"{dt.kind}{bits // 4}")
            return lambda a, b: (
                (np.asarray(a).astype(wide) * np.asarray(b).astype(wide)) >> wide.type(bits)
            ).astype(dt)

        def hi64(a, b):
            a, b = np.broadcast_arrays(np.atleast_1d(a), np.atleast_1d(b))
            prod = a.astype(object) * b.astype(object)
            return np.array([(int(x) >> 64) & ((1 << 64) - 1) for x in prod.ravel()], dtype=np.uint64).reshape(prod.shape).view(dt)  # fmt: skip

        return hi64
    return lambda a, b: a * b  # .lo: wraps


def _wide_type(t: str) -> str:
    return f"{t[0]}{TYPE_BITS[t] * 2}"


def _float_binary(op: str, inst: Instruction, t: str, dec: Decoder) -> Callable:
    mode = _rounding(inst) or "rn"
    f32 = t == "f32"
    if op in ("min", "max"):
        return np.fmin if op == "min" else np.fmax
    if op == "div":
        if f32 and "approx" in inst.modifiers:
            return _approx_div
        if f32 and mode != "rn" and "full" not in inst.modifiers:
            return lambda a, b: _directed_div(a, b, mode)
        return lambda a, b: a / b
    if op in ("add", "sub", "mul"):
        if not f32 or mode == "rn":
            return {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]

        def directed(a, b):
            a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
            if op == "mul":
                return round_to_f32(a64 * b64, 0.0, mode)  # exact in float64
            s, e = two_sum(a64, b64 if op == "add" else -b64)
            return round_to_f32(s, e, mode)

        return directed
    raise dec.error(inst, f"{op} on floating point")


def _approx_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """div.approx.f32 as the PTX ISA defines it: a * (1/b), and 0 (NaN for an infinite a) when
    2**126 < |b| < 2**128, where 1/b would be subnormal."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    q = a * (np.float32(1) / b)
    huge = (np.abs(b) > np.float32(2.0**126)) & np.isfinite(b)
    return np.where(huge, np.where(np.isinf(a), np.float32(np.nan), np.float32(0) * a), q)


def _directed_div(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    q = a64 / b64
    p, e = _two_prod(q, b64)  # residual a - q*b, exactly: its sign says where q sits
    resid = (a64 - p) - e
    return round_to_f32(q, np.where(b64 != 0, resid / b64, 0.0), mode)


@_handler("add", "sub", "mul", "div", "rem", "min", "max")
def _binary(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 3)
    t = _one_type(inst, dec)
    op = inst.base
    d, a, b = inst.operands
    ra, rb = dec.reader(inst, a, t), dec.reader(inst, b, t)
    if t[0] == "f":
        fn = _float_binary(op, inst, t, dec)
        write = dec.writer(inst, d, t)
        dt = dtype_of(t)
        contractible = _rounding(inst) is None and "sat" not in inst.modifiers
        if contractible and op == "mul" and t in ("f32", "f64"):
            return _recording_mul(inst, fn, ra, rb, write, d.name, dt)
        if contractible and op in ("add", "sub") and t in ("f32", "f64"):
            return _checked_add(inst, fn, ra, rb, write, dt)

        def arith(st: State, m: np.ndarray) -> None:
            a, b = _f_in(inst, ra(st)), _f_in(inst, rb(st))
            write(st, _f32_post(inst, np.asarray(fn(a, b), dtype=dt)), m)

        return arith
    if t == "pred" or t[0] == "b":
        raise dec.error(inst, f"{op} needs a .u/.s/.f type, not .{t}")
    fn = _binary_int(op, inst, t, dec)
    out_t = _wide_type(t) if "wide" in inst.modifiers else t
    write = dec.writer(inst, d, out_t)
    return lambda st, m: write(st, fn(ra(st), rb(st)), m)


def _recording_mul(inst, fn, ra, rb, write, dst: str, dt) -> Exec:
    """A mul without a rounding modifier: remember its factors, for an add that reads it."""

    def mul(st: State, m: np.ndarray) -> None:
        a, b = _f_in(inst, ra(st)), _f_in(inst, rb(st))
        write(st, _f32_post(inst, np.asarray(fn(a, b), dtype=dt)), m)  # drops an older record
        st.products[dst] = (np.asarray(a, np.float64), np.asarray(b, np.float64), m.copy(), inst)

    return mul


def _checked_add(inst, fn, ra, rb, write, dt) -> Exec:
    """An add/sub without a rounding modifier: if an operand is an unrounded mul's result,
    ptxas may fuse the two; where that would change a thread's result, raise."""
    d, x, y = inst.operands
    names = [op.name if isinstance(op, Reg) else None for op in (x, y)]
    t = "f32" if dt == np.float32 else "f64"

    def add(st: State, m: np.ndarray) -> None:
        a, b = _f_in(inst, ra(st)), _f_in(inst, rb(st))
        result = _f32_post(inst, np.asarray(fn(a, b), dtype=dt))
        for k, name in enumerate(names):
            rec = st.products.get(name) if name is not None else None
            if rec is not None:
                _check_fused(inst, t, k, rec, np.asarray(b if k == 0 else a, np.float64), result, m)
        write(st, result, m)

    return add


def _check_fused(inst, t, k, rec, other, result, m) -> None:
    """Operand k of `inst` is p = a * b (from `rec`); compare the fused result with `result`."""
    fa, fb, where, mul = rec
    threads = m & where
    if not threads.any():
        return
    if inst.base == "add":
        fused = _fused(fa, fb, other, t, "rn")
    elif k == 0:  # p - c
        fused = _fused(fa, fb, -other, t, "rn")
    else:  # c - p
        fused = _fused(-fa, fb, other, t, "rn")
    fused = _f32_post(inst, np.asarray(fused).astype(result.dtype))
    differ = threads & (fused != result) & ~(np.isnan(fused) & np.isnan(result))
    if differ.any():
        i = int(np.flatnonzero(differ)[0])
        raise PtxContractionError(
            i,
            f"ptxas may contract the {mul.opcode} on line {mul.line} ({mul.text}) and this "
            f"{inst.opcode} into one fma, which rounds once: here that gives {fused[i]!r} "
            f"instead of {result[i]!r} (a = {fa[i]!r}, b = {fb[i]!r}). Hardware may compute "
            f"either: write mul.rn.{t} and {inst.base}.rn.{t} to round after each step (IEEE "
            f"arithmetic, as C computes a * b + c without contraction), or fma.rn.{t} to round once",
        )


@_handler("mad", "fma")
def _mad(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 4)
    t = _one_type(inst, dec)
    d, a, b, c = inst.operands
    if t[0] == "f":
        ra, rb, rc = (dec.reader(inst, x, t) for x in (a, b, c))
        write = dec.writer(inst, d, t)
        mode = _rounding(inst) or "rn"

        def fma(st: State, m: np.ndarray) -> None:
            a64 = np.asarray(_f_in(inst, ra(st)), np.float64)
            b64 = np.asarray(_f_in(inst, rb(st)), np.float64)
            c64 = np.asarray(_f_in(inst, rc(st)), np.float64)
            r = _fused(a64, b64, c64, t, mode)
            write(st, _f32_post(inst, r.astype(dtype_of(t))), m)

        return fma
    if inst.base == "fma":
        raise dec.error(inst, "fma is floating point; integers use mad.lo/.hi/.wide")
    mul = _mul_int(inst, t, dec)
    out_t = _wide_type(t) if "wide" in inst.modifiers else t
    ra, rb = dec.reader(inst, a, t), dec.reader(inst, b, t)
    rc = dec.reader(inst, c, out_t)
    write = dec.writer(inst, d, out_t)
    return lambda st, m: write(st, mul(ra(st), rb(st)) + rc(st), m)


@_handler("neg", "abs", "not", "cnot", "popc", "clz")
def _unary(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 2)
    t = _one_type(inst, dec)
    d, a = inst.operands
    ra = dec.reader(inst, a, t)
    op = inst.base
    if op in ("popc", "clz"):
        write = dec.writer(inst, d, "u32")
        bits = TYPE_BITS[t]
        if op == "popc":
            return lambda st, m: write(st, np.bitwise_count(ra(st)).astype(np.uint32), m)

        def clz(st: State, m: np.ndarray) -> None:
            v = np.asarray(ra(st)).astype(np.uint64)
            n = np.zeros(v.shape, dtype=np.uint32)
            for k in (32, 16, 8, 4, 2, 1):
                if k >= bits:
                    continue
                top = v >> np.uint64(bits - k) == 0
                n = np.where(top, n + k, n)
                v = np.where(top, v << np.uint64(k), v) & np.uint64((1 << bits) - 1)
            n = np.where(v >> np.uint64(bits - 1) == 0, n + 1, n)
            write(st, n.astype(np.uint32), m)

        return clz
    write = dec.writer(inst, d, t)
    if op == "neg":
        if t[0] == "b" or t == "pred":
            raise dec.error(inst, f"neg needs a .s/.f type, not .{t}")
        return lambda st, m: write(st, _f32_post(inst, -np.asarray(_f_in(inst, ra(st)))) if t[0] == "f" else -ra(st), m)  # fmt: skip
    if op == "abs":
        return lambda st, m: write(st, _f32_post(inst, np.abs(_f_in(inst, ra(st)))) if t[0] == "f" else np.abs(ra(st)), m)  # fmt: skip
    if op == "not":
        return lambda st, m: write(st, np.logical_not(ra(st)) if t == "pred" else ~ra(st), m)
    return lambda st, m: write(st, (ra(st) == 0).astype(dtype_of(t)), m)  # cnot


@_handler("and", "or", "xor")
def _logic(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 3)
    t = _one_type(inst, dec)
    if t[0] not in "bp":
        raise dec.error(inst, f"{inst.base} takes a .b or .pred type, not .{t}")
    d, a, b = inst.operands
    ra, rb = dec.reader(inst, a, t), dec.reader(inst, b, t)
    write = dec.writer(inst, d, t)
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[inst.base]
    return lambda st, m: write(st, fn(ra(st), rb(st)), m)


@_handler("shl", "shr")
def _shift(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 3)
    t = _one_type(inst, dec)
    d, a, b = inst.operands
    ra, rb = dec.reader(inst, a, t), dec.reader(inst, b, "u32")
    write = dec.writer(inst, d, t)
    bits = TYPE_BITS[t]
    dt = dtype_of(t)
    left = inst.base == "shl"
    arith = t[0] == "s" and not left

    def shift(st: State, m: np.ndarray) -> None:
        a_, n = np.asarray(ra(st)), np.asarray(rb(st)).astype(np.int64)
        big = n >= bits
        k = np.where(big, bits - 1 if arith else 0, n).astype(dt)
        r = (a_ << k) if left else (a_ >> k)
        if not arith:
            r = np.where(big, dt.type(0), r)
        write(st, r.astype(dt), m)

    return shift


# --------------------------------------------------------------------------- compare and select
_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
    "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}  # fmt: skip
_UNSIGNED_CMP = ("lo", "ls", "hi", "hs")
_BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _compare(cmp: str, t: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    if t[0] == "f":
        if cmp == "num":
            return lambda a, b: ~(np.isnan(a) | np.isnan(b))
        if cmp == "nan":
            return lambda a, b: np.isnan(a) | np.isnan(b)
        if cmp.endswith("u") and cmp[:-1] in _CMP:
            base = _CMP[cmp[:-1]]
            return lambda a, b: base(a, b) | np.isnan(a) | np.isnan(b)
        if cmp == "ne":  # ordered: false when either is NaN
            return lambda a, b: (a != b) & ~(np.isnan(a) | np.isnan(b))
        return _CMP[cmp]
    if cmp in _UNSIGNED_CMP:
        unsigned = np.dtype(f"u{TYPE_BITS[t] // 8}")
        base = _CMP[cmp]
        return lambda a, b: base(np.asarray(a).view(unsigned), np.asarray(b).view(unsigned))
    return _CMP[cmp]


@_handler("setp")
def _setp(inst: Instruction, dec: Decoder) -> Exec:
    t = _one_type(inst, dec)
    mods = [m for m in inst.modifiers if m not in TYPE_BITS and m != "ftz"]
    cmp = mods[0] if mods else ""
    boolop = mods[1] if len(mods) > 1 else None
    floats = t[0] == "f"
    valid = set(_CMP) | ({"equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"} if floats else set())  # fmt: skip
    if cmp not in valid or (cmp in _UNSIGNED_CMP and floats):
        raise dec.error(inst, f"setp needs a comparison for .{t} ({', '.join(sorted(valid))})")
    if boolop is not None and boolop not in _BOOL:
        raise dec.error(inst, f"setp combines with .and, .or or .xor, not .{boolop}")
    want = 4 if boolop else 3
    _arity(inst, dec, want)
    dst, a, b = inst.operands[:3]
    ra, rb = dec.reader(inst, a, t), dec.reader(inst, b, t)
    rc = dec.reader(inst, inst.operands[3], "pred") if boolop else None
    fn = _compare(cmp, t)
    if hasattr(dst, "p"):
        wp, wq = dec.writer(inst, dst.p, "pred"), dec.writer(inst, dst.q, "pred")
    else:
        wp, wq = dec.writer(inst, dst, "pred"), None

    def setp(st: State, m: np.ndarray) -> None:
        x, y = _f_in(inst, np.asarray(ra(st))), _f_in(inst, np.asarray(rb(st)))
        r = np.asarray(fn(x, y), dtype=np.bool_)
        nr = ~r
        if rc is not None:
            c = np.asarray(rc(st), dtype=np.bool_)
            r, nr = _BOOL[boolop](r, c), _BOOL[boolop](nr, c)
        wp(st, np.broadcast_to(r, (st.n,)), m)
        if wq is not None:
            wq(st, np.broadcast_to(nr, (st.n,)), m)

    return setp


@_handler("selp")
def _selp(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 4)
    t = _one_type(inst, dec)
    d, a, b, c = inst.operands
    ra, rb, rc = dec.reader(inst, a, t), dec.reader(inst, b, t), dec.reader(inst, c, "pred")
    write = dec.writer(inst, d, t)
    dt = dtype_of(t)
    return lambda st, m: write(st, np.where(rc(st), ra(st), rb(st)).astype(dt), m)


# --------------------------------------------------------------------------- conversions
@_handler("cvt")
def _cvt(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 2)
    ts = _types(inst)
    if len(ts) != 2:
        raise dec.error(inst, "cvt needs a destination and a source type: cvt.rn.f32.s32")
    dt_name, st_name = ts
    if "f16" in ts:
        raise PtxUnsupportedError(f"line {inst.line}: f16 conversions")
    d, a = inst.operands
    read = dec.reader(inst, a, st_name, relaxed=True)
    write = dec.writer(inst, d, dt_name, relaxed=True)
    dst = dtype_of(dt_name)
    src_float, dst_float = st_name[0] == "f", dt_name[0] == "f"
    irnd = _rounding(inst, _ROUND_INT)
    frnd = _rounding(inst)
    sat = "sat" in inst.modifiers
    if src_float and dst_float:
        if TYPE_BITS[dt_name] < TYPE_BITS[st_name] and frnd is None:
            raise dec.error(inst, "narrowing float conversion needs a rounding mode (.rn ...)")
        if TYPE_BITS[dt_name] == TYPE_BITS[st_name] and frnd is not None:
            raise dec.error(inst, "same-size float cvt rounds to an integer: use .rni/.rzi/.rmi/.rpi")  # fmt: skip

        def f2f(st: State, m: np.ndarray) -> None:
            x = _f_in(inst, np.asarray(read(st)))
            if irnd is not None:
                x = _round_integral(x, irnd)
            if dst == np.float32 and x.dtype == np.float64:
                r = round_to_f32(x, 0.0, frnd or "rn")
            else:
                r = x.astype(dst)
            write(st, _f32_post(inst, r), m)

        return f2f
    if src_float:
        if irnd is None:
            raise dec.error(inst, "float-to-integer cvt needs .rni, .rzi, .rmi or .rpi")
        info = np.iinfo(dst)

        def f2i(st: State, m: np.ndarray) -> None:
            x = _round_integral(np.asarray(_f_in(inst, np.asarray(read(st))), np.float64), irnd)
            hi_ok = x < float(info.max)  # float(2**63 - 1) == 2**63: compare strictly
            r = np.where(np.isnan(x), 0, np.clip(x, info.min, info.max))
            out = np.where(hi_ok, r, 0).astype(dst)
            out = np.where(hi_ok | np.isnan(x), out, info.max).astype(dst)
            write(st, out, m)

        return f2i
    if dst_float:
        if frnd is None:
            raise dec.error(inst, "integer-to-float cvt needs a rounding mode (.rn, .rz, .rm, .rp)")

        def i2f(st: State, m: np.ndarray) -> None:
            x = np.asarray(read(st))
            hi = x.astype(np.float64)
            if dst == np.float64:
                write(st, hi, m)
                return
            if x.dtype.itemsize == 8:  # float64 is not exact for 64-bit integers
                lo = np.where(
                    np.abs(hi) < 2.0**63,
                    (x - np.clip(hi, -(2.0**63), 2.0**63 - 1024).astype(x.dtype)).astype(
                        np.float64
                    ),
                    0.0,  # fmt: skip
                )
            else:
                lo = 0.0
            write(st, _f32_post(inst, round_to_f32(hi, lo, frnd)), m)

        return i2f

    # integer -> integer: truncate or extend (by the source's signedness); .sat clamps.
    def i2i(st: State, m: np.ndarray) -> None:
        x = np.asarray(read(st))
        if sat:
            info = np.iinfo(dst)
            big = x.astype(np.float64)
            x = np.where(big > info.max, info.max, np.where(big < info.min, info.min, x))
            x = x.astype(object).astype(dst) if x.dtype == object else x
        write(st, x.astype(dst), m)

    return i2i


def _round_integral(x: np.ndarray, mode: str) -> np.ndarray:
    return {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[mode](x)


@_handler("cvta")
def _cvta(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 2)
    mods = inst.modifiers
    if "global" not in mods:
        raise PtxUnsupportedError(f"line {inst.line}: only global addresses: {inst.text}")
    t = _one_type(inst, dec)
    d, a = inst.operands
    read, write = dec.reader(inst, a, t), dec.writer(inst, d, t)
    return lambda st, m: write(st, read(st), m)  # generic == global in this machine


# --------------------------------------------------------------------------- special functions
_MUFU: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ex2": np.exp2,
    "lg2": np.log2,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "rcp": lambda x: 1.0 / x,
}


@_handler(*_MUFU)
def _mufu(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 2)
    t = _one_type(inst, dec)
    if t[0] != "f":
        raise dec.error(inst, f"{inst.base} is a floating-point instruction")
    op = inst.base
    mode = _rounding(inst)
    exact = op in ("sqrt", "rcp") and mode is not None
    if not exact and "approx" not in inst.modifiers:
        raise dec.error(inst, f"{inst.base}.{t} needs .approx or a rounding mode")
    d, a = inst.operands
    read, write = dec.reader(inst, a, t), dec.writer(inst, d, t)
    fn = _MUFU[op]
    dt = dtype_of(t)

    def mufu(st: State, m: np.ndarray) -> None:
        x = _f_in(inst, np.asarray(read(st)))
        if exact and (mode == "rn" or t == "f64"):
            r = fn(x).astype(dt)  # IEEE sqrt and division are correctly rounded
        else:
            r = fn(x.astype(np.float64)).astype(dt)
        write(st, _f32_post(inst, r), m)

    return mufu


# --------------------------------------------------------------------------- memory
def _space(inst: Instruction, dec: Decoder) -> str:
    spaces = [m for m in inst.modifiers if m in ("param", "global", "const", "local", "shared")]
    if not spaces:
        raise PtxUnsupportedError(
            f"line {inst.line}: generic {inst.base} (give a state space: .global, .param ...)"
        )
    if spaces[0] in ("local", "shared"):
        raise PtxUnsupportedError(f"line {inst.line}: .{spaces[0]} memory: {inst.text}")
    return spaces[0]


def _vector_width(inst: Instruction) -> int:
    for m in inst.modifiers:
        if m in ("v2", "v4", "v8"):
            return int(m[1:])
    return 1


def _address_fn(inst: Instruction, dec: Decoder, op: object, space: str) -> Callable:
    if not isinstance(op, Address):
        raise dec.error(inst, f"{inst.base} needs an address operand [..]")
    if space == "param":
        if not isinstance(op.base, Symbol) or op.base.name not in dec.params:
            raise dec.error(inst, f"ld.param reads a kernel parameter by name: [{getattr(op.base, 'name', '')}]")  # fmt: skip
        p = dec.params[op.base.name]
        off = p.offset + op.offset
        return lambda st: off
    if isinstance(op.base, Symbol):
        if op.base.name not in dec.module.variables:
            raise dec.error(inst, f"{op.base.name} is not a .global or .const variable")
        name, off = op.base.name, op.offset
        return lambda st: np.full(st.n, st.symbols[name] + off, dtype=np.uint64)
    if op.base is None:
        off = op.offset
        return lambda st: np.full(st.n, off, dtype=np.uint64)
    base = dec.reader(inst, op.base, "u64")
    off = np.uint64(op.offset & ((1 << 64) - 1))
    return lambda st: np.broadcast_to(base(st), (st.n,)) + off


@_handler("ld", "ldu")
def _ld(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 2)
    space = _space(inst, dec)
    t = _one_type(inst, dec)
    dtype = dtype_of(t)
    width = _vector_width(inst)
    d, a = inst.operands
    regs = list(d.items) if isinstance(d, Vector) else [d]
    if len(regs) != width:
        raise dec.error(inst, f"{'.v' + str(width) if width > 1 else 'a scalar load'} needs {width} destination registers")  # fmt: skip
    writers = [dec.writer(inst, r, t, relaxed=True) for r in regs]
    addr = _address_fn(inst, dec, a, space)
    size = dtype.itemsize
    if space == "param":

        def ld_param(st: State, m: np.ndarray) -> None:
            off = addr(st)
            for i, w in enumerate(writers):
                raw = st.params[off + i * size : off + (i + 1) * size]
                if raw.size != size:
                    raise dec.error(inst, "read past the end of the parameters")
                w(st, np.full(st.n, raw.view(dtype)[0]), m)

        return ld_param

    def ld(st: State, m: np.ndarray) -> None:
        idx = np.flatnonzero(m)
        base = np.asarray(addr(st))[idx]
        if width > 1 and (base % np.uint64(size * width) != 0).any():
            k = int(np.flatnonzero(base % np.uint64(size * width) != 0)[0])
            raise PtxMemoryError(f"misaligned .v{width} access at {int(base[k]):#x}", k)
        for i, w in enumerate(writers):
            vals = st.mem.load(base + np.uint64(i * size), dtype, f"{space} load")
            full = np.zeros(st.n, dtype=dtype)
            full[idx] = vals
            w(st, full, m)

    return ld


@_handler("st")
def _st(inst: Instruction, dec: Decoder) -> Exec:
    _arity(inst, dec, 2)
    space = _space(inst, dec)
    if space != "global":
        raise dec.error(inst, f"stores go to .global memory, not .{space}")
    t = _one_type(inst, dec)
    dtype = dtype_of(t)
    width = _vector_width(inst)
    a, v = inst.operands
    items = list(v.items) if isinstance(v, Vector) else [v]
    if len(items) != width:
        raise dec.error(inst, f"a .v{width} store needs {width} values")
    readers = [dec.reader(inst, x, t, relaxed=isinstance(x, Reg)) for x in items]
    addr = _address_fn(inst, dec, a, space)
    size = dtype.itemsize

    def st_(st: State, m: np.ndarray) -> None:
        idx = np.flatnonzero(m)
        base = np.asarray(addr(st))[idx]
        for i, r in enumerate(readers):
            vals = np.broadcast_to(np.asarray(r(st), dtype=dtype), (st.n,))[idx]
            st.mem.store(base + np.uint64(i * size), np.ascontiguousarray(vals), "global store")

    return st_
