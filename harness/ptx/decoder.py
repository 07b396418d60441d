"""The machine state of a PTX launch and the decoder that turns instructions into closures over it.

Its own module because both sides need it: :mod:`.ops` (the instruction semantics) writes its
closures against :class:`State` and :class:`Decoder`, and :mod:`.interp` (scheduling, launching)
runs them; neither imports the other for these types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .memory import GlobalMemory
from .parser import (
    TYPE_BITS,
    Imm,
    Instruction,
    Kernel,
    Module,
    Neg,
    PtxSyntaxError,
    PtxUnsupportedError,
    Reg,
    Symbol,
    is_special,
)
from .values import bits_dtype, dtype_of, imm_value

__all__ = ["Decoder", "Exec", "Reader", "State", "Writer"]


# --------------------------------------------------------------------------- machine state
class State:
    def __init__(self, kernel: Kernel, n: int, mem: GlobalMemory, params: np.ndarray) -> None:
        self.n = n
        self.mem = mem
        self.params = params  # the parameter buffer, bytes
        self.regs: dict[str, np.ndarray] = {
            name: np.zeros(n, dtype=bits_dtype(t)) for name, t in kernel.registers.items()
        }
        self.special: dict[str, np.ndarray] = {}
        self.symbols: dict[str, int] = {}
        # register -> (a, b, mask, mul) for a register that holds an unrounded mul's a * b
        # (ops checks an add that reads it: ptxas may fuse the two into an fma)
        self.products: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, Instruction]] = {}


# --------------------------------------------------------------------------- decoding
Reader = Callable[[State], np.ndarray]
Writer = Callable[[State, np.ndarray, np.ndarray], None]
Exec = Callable[[State, np.ndarray], None]


class Decoder:
    """Turns each instruction into a closure over pre-parsed operands (done once per kernel)."""

    def __init__(self, kernel: Kernel, module: Module) -> None:
        self.kernel = kernel
        self.module = module
        self.params = {p.name: p for p in kernel.params}

    def error(self, inst: Instruction, message: str) -> PtxSyntaxError:
        return PtxSyntaxError(inst.line, f"{message}: {inst.text}")

    def reg_type(self, inst: Instruction, name: str) -> str:
        if is_special(name):
            return "u32"
        if name not in self.kernel.registers:
            raise self.error(inst, f"{name} is not declared (add it to a .reg declaration)")
        return self.kernel.registers[name]

    def check(self, inst: Instruction, name: str, rtype: str, ptype: str, relaxed: bool) -> None:
        """PTX operand type rules: .bN registers fit any N-bit type, .uN/.sN fit each other."""
        if (rtype == "pred") != (ptype == "pred"):
            raise self.error(inst, f"{name} is .{rtype}, the instruction wants .{ptype}")
        if rtype == "pred":
            return
        rb, pb = TYPE_BITS[rtype], TYPE_BITS[ptype]
        rk, pk = rtype[0], ptype[0]
        if rb == pb:
            if rk == "b" or pk == "b" or rk == pk or (rk in "us" and pk in "us"):
                return
        elif relaxed and not (rk == "f" and pk == "f") and (rb > pb or pk != "f"):
            return
        raise self.error(inst, f"{name} is .{rtype}, the instruction wants .{ptype}")

    def reader(self, inst: Instruction, op: Any, ptype: str, relaxed: bool = False) -> Reader:
        if isinstance(op, Imm):
            try:
                const = imm_value(op.text, ptype)
            except (PtxSyntaxError, ValueError) as e:
                raise self.error(inst, f"bad immediate {op.text} for .{ptype}: {e}") from None
            return lambda st: const
        if isinstance(op, Neg):
            inner = self.reader(inst, op.reg, "pred")
            return lambda st: ~inner(st)
        if isinstance(op, Symbol):
            if op.name in self.module.variables and ptype in ("u64", "b64", "s64"):
                name = op.name
                return lambda st: np.array(st.symbols[name], dtype=np.uint64).view(dtype_of(ptype))
            raise self.error(inst, f"{op.name} cannot be used as a value here")
        if not isinstance(op, Reg):
            raise self.error(inst, f"expected a register or immediate, got {op!r}")
        name = op.name
        rtype = self.reg_type(inst, name)
        if is_special(name):
            if name not in _SPECIAL_OK:
                raise PtxUnsupportedError(f"line {inst.line}: special register {name}")
            return _convert_reader(lambda st: st.special[name], "u32", ptype)
        self.check(inst, name, rtype, ptype, relaxed)
        return _convert_reader(lambda st: st.regs[name], rtype, ptype)

    def writer(self, inst: Instruction, op: Any, ptype: str, relaxed: bool = False) -> Writer:
        if not isinstance(op, Reg) or is_special(op.name):
            raise self.error(inst, f"the destination must be a register, got {op!r}")
        name = op.name
        rtype = self.reg_type(inst, name)
        self.check(inst, name, rtype, ptype, relaxed)
        to_bits = _to_bits(ptype, rtype)

        def write(st: State, values: np.ndarray, mask: np.ndarray) -> None:
            np.copyto(st.regs[name], to_bits(values), where=mask)
            if st.products:
                st.products.pop(name, None)  # no longer a product a later add may fuse with

        return write

    def label(self, inst: Instruction, op: Any) -> int:
        if not isinstance(op, Symbol) or op.name not in self.kernel.labels:
            raise self.error(inst, f"branch target {getattr(op, 'name', op)!r} is not a label")
        return self.kernel.labels[op.name]


_SPECIAL_OK = {
    *(f"%{r}.{a}" for r in ("tid", "ntid", "ctaid", "nctaid") for a in "xyz"),
    "%laneid", "%warpid", "%nwarpid", "%warpsize", "%smid",
}  # fmt: skip


def _convert_reader(get: Callable[[State], np.ndarray], rtype: str, ptype: str) -> Reader:
    if rtype == "pred" or ptype == "pred":
        return get
    target = dtype_of(ptype)
    rb, pb = TYPE_BITS[rtype], TYPE_BITS[ptype]
    if rb == pb:
        return lambda st: get(st).view(target)
    if rb > pb:
        narrow = bits_dtype(ptype)
        return lambda st: get(st).astype(narrow).view(target)
    if ptype[0] == "s":
        signed = np.dtype(f"i{rb // 8}")
        return lambda st: get(st).view(signed).astype(target)
    return lambda st: get(st).astype(target)


def _to_bits(ptype: str, rtype: str) -> Callable[[np.ndarray], np.ndarray]:
    if rtype == "pred":
        return lambda v: np.asarray(v, dtype=np.bool_)
    src = dtype_of(ptype)
    rb, pb = TYPE_BITS[rtype], TYPE_BITS[ptype]
    reg_bits = bits_dtype(rtype)
    if rb == pb:
        return lambda v: np.asarray(v, dtype=src).view(reg_bits)
    if rb < pb:
        return lambda v: np.asarray(v, dtype=src).view(bits_dtype(ptype)).astype(reg_bits)
    if ptype[0] == "s":
        wide = np.dtype(f"i{rb // 8}")
        return lambda v: np.asarray(v, dtype=src).astype(wide).view(reg_bits)
    return lambda v: np.asarray(v, dtype=src).view(bits_dtype(ptype)).astype(reg_bits)
