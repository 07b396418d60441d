"""A SIMT warp: lanes that share one program counter, an active mask and a reconvergence stack.

Reference implementation. The learner's katas/phase01/simt/simt.py has the same API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .isa import Instr, Program, StepLimitExceeded, as_program, execute, fresh_registers, successors

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
    """
    program = as_program(program)
    exit_pc = len(program)
    preds: dict[int, list[int]] = {pc: [] for pc in range(exit_pc + 1)}
    for pc in range(exit_pc):
        for s in successors(program, pc):
            preds[s].append(pc)

    # Only pcs that can reach the exit have post-dominators: walk the edges backwards from it.
    live = {exit_pc}
    work = [exit_pc]
    while work:
        for p in preds[work.pop()]:
            if p not in live:
                live.add(p)
                work.append(p)

    # Iterative dataflow: pdom(n) = {n} | intersection of pdom(s) over successors s.
    # Start from "everything" and shrink until nothing changes.
    pdom = {pc: set(live) for pc in live}
    pdom[exit_pc] = {exit_pc}
    order = sorted(live - {exit_pc}, reverse=True)  # roughly exit-first: converges sooner
    changed = True
    while changed:
        changed = False
        for pc in order:
            new = set.intersection(*(pdom[s] for s in successors(program, pc) if s in live))
            new.add(pc)
            if new != pdom[pc]:
                pdom[pc], changed = new, True

    # The post-dominators of n form a chain up to the exit; the nearest has one fewer of its own.
    ipdom: dict[int, int] = {}
    for pc in order:
        strict = pdom[pc] - {pc}
        ipdom[pc] = next(d for d in strict if len(pdom[d]) == len(strict))
    return dict(sorted(ipdom.items()))


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
        return sum(self.program[issue.pc].cost for issue in self.trace)

    @property
    def simd_efficiency(self) -> float:
        """Active lane-slots / issued lane-slots, in (0, 1]; 1.0 when nothing was issued (task 5)."""
        if not self.trace:
            return 1.0
        active = sum(issue.mask.bit_count() for issue in self.trace)
        return active / (len(self.trace) * self.width)


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
        """Issue one instruction for the lanes on top of the stack, and return that issue."""
        if self.done:
            raise RuntimeError("the warp has exited: nothing left to issue")
        top = self.stack.pop()
        issue = Issue(top.pc, top.mask)
        self.trace.append(issue)

        # One instruction, every active lane; each lane decides where it goes next.
        where: dict[int, int] = {}
        for lane in lanes(top.mask):
            nxt = execute(self.program, top.pc, self.registers[lane], lane)
            where[nxt] = where.get(nxt, 0) | 1 << lane

        if len(where) == 1:  # uniform: the whole group moves on together
            (nxt,) = where
            self.stack.append(top._replace(pc=nxt))
        else:  # divergent branch: both sides run, one after the other, then meet at rpc
            self.divergences += 1
            rpc = top.rpc  # each side runs on to where the whole group ends: no join
            if rpc != top.rpc:
                # Everyone waits at rpc. (When rpc is already top's own rpc, the entry below
                # is waiting there for these lanes, so a second one would be dead weight: this
                # keeps the stack shallow in loops whose lanes leave one iteration at a time.)
                self.stack.append(top._replace(pc=rpc))
            taken, fall = self.program[top.pc].target, top.pc + 1
            for pc in (taken, fall):  # pushed last runs first: the fall-through path
                if pc != rpc:  # lanes already at rpc just wait in the entry below
                    self.stack.append(StackEntry(pc, rpc, where[pc]))

        # Lanes that reached their reconvergence pc rejoin the entry below.
        while self.stack and self.stack[-1].pc == self.stack[-1].rpc:
            self.stack.pop()
        return issue

    def run(self, max_steps: int = 10_000) -> Result:
        """Step until every lane has exited, and return the Result.

        At most `max_steps` instructions are issued in all (counting any issued by earlier
        step() calls); if the warp is still running then, raise StepLimitExceeded (task 4).
        """
        while not self.done:
            if len(self.trace) >= max_steps:
                top = self.stack[-1]
                raise StepLimitExceeded(
                    f"issued {max_steps} instructions and lanes {lanes(top.mask)} are still "
                    f"running at pc {top.pc}: does the program loop forever?"
                )
            self.step()
        return Result(
            program=self.program,
            width=self.width,
            registers=[dict(r) for r in self.registers],
            trace=list(self.trace),
            divergences=self.divergences,
        )
