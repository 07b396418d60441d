"""Register allocation for straight-line code: linear scan over live ranges (reference)."""

from __future__ import annotations

from .ir import KINDS, Body, Instr, VReg


def allocate(body: Body) -> dict[VReg, str]:
    """Map every virtual register to a physical one ("%f0", "%r3" ...). Two registers share a
    name only if their live ranges do not overlap; the count per kind is the fewest possible."""
    last: dict[VReg, int] = {}
    for i, instr in enumerate(body):
        if isinstance(instr, Instr):
            for v in instr.uses():
                last[v] = i
    free: dict[str, list[int]] = {k: [] for k in KINDS}
    used: dict[str, int] = dict.fromkeys(KINDS, 0)
    names: dict[VReg, str] = {}
    index: dict[VReg, int] = {}

    def take(kind: str) -> int:
        if free[kind]:
            free[kind].sort()
            return free[kind].pop(0)
        used[kind] += 1
        return used[kind] - 1

    for i, instr in enumerate(body):
        if not isinstance(instr, Instr):
            continue
        for v in dict.fromkeys(instr.uses()):
            if last.get(v) == i and v in index:  # its last read: the register is free again
                free[v.kind].append(index[v])
        if instr.dst is not None:
            k = take(instr.dst.kind)
            index[instr.dst] = k
            names[instr.dst] = f"{KINDS[instr.dst.kind]}{k}"
            if instr.dst not in last or last[instr.dst] <= i:  # never read: free at once
                free[instr.dst.kind].append(k)
    return names
