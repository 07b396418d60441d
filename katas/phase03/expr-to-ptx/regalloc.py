"""Register allocation (task "regalloc"): map virtual registers onto few physical ones."""

from __future__ import annotations

from harness import todo

from .ir import KINDS, Body, Instr, VReg  # noqa: F401


def allocate(body: Body) -> dict[VReg, str]:
    """Name every virtual register of `body` with a physical register of its kind: KINDS[kind]
    followed by a number from 0 ("%f0", "%r2", "%rd1", "%p0").

    Two virtual registers may share a name only if their live ranges do not overlap. A value
    is live from the instruction that writes it to its last read; an instruction may write
    the register of an operand it reads for the last time. Use as few registers of each kind
    as possible: for straight-line code, a linear scan that frees a register at its last use
    and always reuses the lowest free one is optimal.
    """
    todo("regalloc.allocate")
