"""A SIMT warp: lanes that share one program counter, an active mask and a reconvergence stack.

YOUR FILE. Replace each ``todo(...)`` with an implementation; the tests say which task needs
what (``pytest katas/phase01/simt``). Everything not marked with a task is given: the mask
helpers, the records, and ``Warp.__init__`` (read it first — it sets up the stack you drive).

isa.py (given) defines what one instruction does to one lane: ``execute(program, pc, regs,
lane)`` updates that lane's registers and returns its next pc. Your job is *when* lanes run:
all active lanes of a warp execute the same pc together, and lanes that disagree about the
next pc take turns until they meet again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from harness import todo

from .isa import (
    Instr,
    Program,
    StepLimitExceeded,
    as_program,
    execute,  # noqa: F401  (one instruction for one lane: task 1)
    fresh_registers,
    successors,  # noqa: F401  (the edges of the control-flow graph: task 3)
)

__all__ = [
    "Issue",
    "Result",
    "StackEntry",
    "StepLimitExceeded",
    "Warp",
    "full_mask",
    "immediate_post_dominators",
    "lanes",
]


# --------------------------------------------------------------------------- masks (given)
def full_mask(width: int) -> int:
    """The mask with lanes 0..width-1 active: bit i is lane i."""
    return (1 << width) - 1


def lanes(mask: int) -> list[int]:
    """The lane ids whose bits are set in `mask`, lowest first."""
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


class Issue(NamedTuple):
    """One warp instruction issued: the pc, and the lanes that executed it."""

    pc: int
    mask: int

    def __repr__(self) -> str:  # masks in hex: 0x55 reads as "the even lanes", 85 does not
        return f"Issue(pc={self.pc}, mask={self.mask:#x})"


class StackEntry(NamedTuple):
    """A group of lanes at `pc` that will rejoin their siblings at `rpc` (reconvergence pc)."""

    pc: int
    rpc: int
    mask: int

    def __repr__(self) -> str:
        return f"StackEntry(pc={self.pc}, rpc={self.rpc}, mask={self.mask:#x})"


# --------------------------------------------------------------------------- task 3: ipdoms
def immediate_post_dominators(program: str | Sequence[Instr]) -> dict[int, int]:
    """Map each pc that can reach the exit to its immediate post-dominator.

    `d` post-dominates `n` when every path from `n` to the exit (pc ``len(program)``) passes
    through `d`. The *immediate* one is the nearest: it is post-dominated by all the others.
    pcs from which the exit cannot be reached (inside an endless loop) are left out.

    ``successors(program, pc)`` (from isa.py) gives the edges of the control-flow graph.
    """
    program = as_program(program)
    todo("immediate_post_dominators: compute post-dominator sets, then pick the nearest")


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Result:
    """What a finished warp leaves behind."""

    program: Program
    width: int
    registers: list[dict[str, int]]  # registers[lane]["r3"]
    trace: list[Issue]  # every instruction issued, in order
    divergences: int  # conditional branches whose active lanes split

    @property
    def issued(self) -> int:
        return len(self.trace)

    @property
    def cycles(self) -> int:
        """Every issue costs its instruction's cycles, however few lanes are active (task 5)."""
        todo("Result.cycles: add up the cost of every issued instruction")

    @property
    def simd_efficiency(self) -> float:
        """Active lane-slots / issued lane-slots, in (0, 1]; 1.0 when nothing was issued (task 5)."""
        todo("Result.simd_efficiency: active lanes over (issues x width)")


# --------------------------------------------------------------------------- the warp
class Warp:
    """`width` lanes running `program` in lockstep; divergent lanes take turns via a stack.

    ``reconverge`` maps a branch pc to the pc where its lanes meet again (what the compiler
    tells the hardware; NVIDIA's SSY/BSSY instructions). Left out, it is computed with
    `immediate_post_dominators` the first time a branch diverges. A branch missing from the map
    reconverges at the exit.
    """

    def __init__(
        self,
        program: str | Sequence[Instr],
        width: int = 32,
        *,
        init: Sequence[Mapping[str, int]] | None = None,
        reconverge: Mapping[int, int] | None = None,
    ) -> None:
        self.program: Program = as_program(program)
        if width < 1:
            raise ValueError(f"width must be at least 1, got {width}")
        if init is not None and len(init) != width:
            raise ValueError(f"init has {len(init)} entries; need one per lane ({width})")
        self.width = width
        self.registers = [fresh_registers(init[lane] if init else None) for lane in range(width)]
        # The bottom entry: every lane, at pc 0, meeting again only at the exit.
        # The top of the stack (self.stack[-1]) is the group that issues next.
        # (An empty program has already exited.)
        self.stack = [StackEntry(0, self.exit_pc, full_mask(width))] if self.program else []
        self.trace: list[Issue] = []
        self.divergences = 0
        self._reconverge = dict(reconverge) if reconverge is not None else None

    @property
    def exit_pc(self) -> int:
        return len(self.program)

    @property
    def done(self) -> bool:
        return not self.stack

    def reconvergence_pc(self, branch_pc: int) -> int:
        """Where the lanes that split at `branch_pc` meet again."""
        if self._reconverge is None:
            self._reconverge = immediate_post_dominators(self.program)
        return self._reconverge.get(branch_pc, self.exit_pc)

    def step(self) -> Issue:
        """Issue one instruction for the lanes on top of the stack, and return that issue.

        Task 1: execute ``program[top.pc]`` for every lane in ``top.mask``, move the group to the
        next pc, and record the issue in ``self.trace``.
        Task 2: when the lanes disagree about the next pc, split them (see README.md).
        Always: before returning, pop every entry that reached its ``rpc``, so the top of the
        stack is what issues next.
        """
        todo("Warp.step: issue program[top.pc] for the lanes in top.mask")

    def run(self, max_steps: int = 10_000) -> Result:
        """Step until every lane has exited, and return the Result.

        At most `max_steps` instructions are issued in all (counting any issued by earlier
        step() calls); if the warp is still running then, raise StepLimitExceeded (task 4).
        """
        todo("Warp.run: step until done, then build a Result")
