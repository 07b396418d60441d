"""What the language's operations compute, on Python scalars: the oracle for constant folding.

Given code. f32 values are Python floats that are exactly float32 values; i32 values are Python
ints in [-2**31, 2**31). Each function returns the value the PTX instruction named in README.md
computes (``add.rn.f32``, ``div.s32``, ``ex2.approx.f32`` ...), so a folded constant equals what
the kernel would have computed at run time.
"""

from __future__ import annotations

import math

import numpy as np

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def f32(x: float) -> float:
    """Round to float32 (nearest even), as a Python float."""
    with np.errstate(all="ignore"):
        return float(np.float32(x))


def wrap_i32(x: int) -> int:
    """Two's-complement wrap-around to 32 bits."""
    return (x + 2**31) % 2**32 - 2**31


def binary(op: str, typ: str, a: float | int, b: float | int) -> float | int | bool:
    """`a op b` for operands of type `typ` ("f32" or "i32"); comparisons give bools.

    Raises ZeroDivisionError for i32 `/` and `%` by zero: that is undefined, never fold it.
    """
    if op in ("<", "<=", ">", ">=", "==", "!="):
        if typ == "f32" and (math.isnan(a) or math.isnan(b)):
            return op == "!="  # IEEE: every ordered comparison with NaN is false, != is true
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]
    if typ == "f32":
        x, y = np.float32(a), np.float32(b)
        with np.errstate(all="ignore"):
            if op == "+":
                return float(x + y)
            if op == "-":
                return float(x - y)
            if op == "*":
                return float(x * y)
            if op == "/":
                return float(x / y)  # IEEE division: inf/nan for zero divisors
        raise ValueError(f"'{op}' is not an f32 operation")
    if op == "+":
        return wrap_i32(a + b)
    if op == "-":
        return wrap_i32(a - b)
    if op == "*":
        return wrap_i32(a * b)
    if op in ("/", "%"):
        if b == 0:
            raise ZeroDivisionError(f"i32 {op} by zero is undefined")
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # toward zero, as C
        return wrap_i32(q) if op == "/" else wrap_i32(a - q * b)
    raise ValueError(f"'{op}' is not an i32 operation")


def negate(typ: str, a: float | int) -> float | int:
    return -a if typ == "f32" else wrap_i32(-a)


def _approx(fn, x: float) -> float:
    with np.errstate(all="ignore"):
        return float(np.float32(fn(np.float64(x))))


def call(func: str, typ: str, args: list[float | int]) -> float | int:
    """A built-in function; `typ` is the type of its (first) argument."""
    with np.errstate(all="ignore"):
        if func == "sqrt":
            return float(np.sqrt(np.float32(args[0])))  # sqrt.rn.f32: correctly rounded
        if func == "rsqrt":
            return _approx(lambda v: 1.0 / np.sqrt(v), args[0])
        if func == "exp2":
            return _approx(np.exp2, args[0])
        if func == "log2":
            return _approx(np.log2, args[0])
        if func == "sin":
            return _approx(np.sin, args[0])
        if func == "cos":
            return _approx(np.cos, args[0])
    if func == "abs":
        return abs(args[0]) if typ == "f32" else wrap_i32(abs(args[0]))
    if func in ("min", "max"):
        a, b = args
        if typ == "f32" and (math.isnan(a) or math.isnan(b)):
            return b if math.isnan(a) else a  # min.f32/max.f32 return the non-NaN operand
        # PTX defines min as (a < b) ? a : b: on a tie (+0.0 and -0.0) the second operand wins.
        if func == "min":
            return a if a < b else b
        return a if a > b else b
    if func == "f32":
        return f32(args[0])  # cvt.rn.f32.s32
    if func == "i32":
        x = args[0]
        if math.isnan(x):
            return 0  # cvt.rzi.s32.f32 saturates; NaN gives 0
        if x >= 2**31:
            return _I32_MAX
        if x <= -(2**31):
            return _I32_MIN
        return int(x)
    raise ValueError(f"unknown function {func!r}")
