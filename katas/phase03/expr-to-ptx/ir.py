"""The instruction list between instruction selection and register allocation.

Given code. ``codegen.lower`` turns a checked Program into a list of :class:`Instr` and
:class:`Label` over *virtual* registers (VReg: as many as you like, each written exactly once);
``regalloc.allocate`` maps them onto few physical registers; ``codegen.emit`` prints the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# Register kinds: the PTX type a register is declared with, and the prefix of its physical names.
KINDS = {"pred": "%p", "b32": "%r", "f32": "%f", "b64": "%rd"}


class VReg(NamedTuple):
    kind: str  # a key of KINDS
    index: int

    def __str__(self) -> str:
        return f"%v{self.kind}_{self.index}"


class Mem(NamedTuple):
    """An address operand ``[base+offset]``: base is a VReg or a parameter name."""

    base: VReg | str
    offset: int = 0


Operand = VReg | Mem | str  # str: written as is (an immediate "0f3F800000", "%tid.x", a label)


@dataclass(frozen=True)
class Instr:
    opcode: str  # "add.rn.f32"
    dst: VReg | None = None
    srcs: tuple[Operand, ...] = ()
    guard: VReg | None = None  # "@%p bra ..." when set
    negate_guard: bool = False

    def uses(self) -> list[VReg]:
        """The virtual registers this instruction reads (the guard included), in order."""
        out = [self.guard] if self.guard is not None else []
        for s in self.srcs:
            if isinstance(s, VReg):
                out.append(s)
            elif isinstance(s, Mem) and isinstance(s.base, VReg):
                out.append(s.base)
        return out


@dataclass(frozen=True)
class Label:
    name: str  # "$done"


Body = list[Instr | Label]


def render_operand(op: Operand, names: dict[VReg, str]) -> str:
    if isinstance(op, VReg):
        return names[op]
    if isinstance(op, Mem):
        base = names[op.base] if isinstance(op.base, VReg) else op.base
        return f"[{base}+{op.offset}]" if op.offset else f"[{base}]"
    return op


def render(instr: Instr | Label, names: dict[VReg, str]) -> str:
    """One line of PTX: ``\\tadd.rn.f32 %f2, %f0, %f1;`` or ``$done:``."""
    if isinstance(instr, Label):
        return f"{instr.name}:"
    ops = ([instr.dst] if instr.dst is not None else []) + list(instr.srcs)
    text = instr.opcode
    if ops:
        text += " " + ", ".join(render_operand(o, names) for o in ops)
    if instr.guard is not None:
        text = f"@{'!' if instr.negate_guard else ''}{names[instr.guard]} {text}"
    return f"\t{text};"
