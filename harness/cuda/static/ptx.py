"""PTX text: each kernel's instructions, and their counts by opcode, base or class."""

from __future__ import annotations

import os
import re
from collections import Counter

from harness.cuda.static.compiling import compile_ptx, is_ptx, read_source
from harness.cuda.static.names import KernelMap
from harness.cuda.static.opcodes import classify_ptx

__all__ = ["parse_ptx", "ptx_instruction_counts"]

_PTX_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\(")
_PTX_INSN = re.compile(r"^\s*(?:@!?%?\w+\s+)?([a-z][\w.]*)[\s;]")


def parse_ptx(ptx: str) -> dict[str, list[str]]:
    """PTX text -> {kernel name: [instruction opcodes with modifiers ("ld.global.f32") ...]}."""
    kernels: dict[str, list[str]] = {}
    i = 0
    for m in _PTX_ENTRY.finditer(ptx):
        if m.start() < i:
            continue
        body_start = ptx.find("{", m.end())
        depth, j = 0, body_start
        while j < len(ptx):
            depth += {"{": 1, "}": -1}.get(ptx[j], 0)
            if depth == 0:
                break
            j += 1
        body = ptx[body_start + 1 : j]
        ops = []
        for line in body.splitlines():
            line = line.split("//", 1)[0]
            if not line.strip() or line.strip().startswith((".", "$", "{", "}")):
                continue
            im = _PTX_INSN.match(line + " ")
            if im:
                ops.append(im.group(1))
        kernels[m.group(1)] = ops
        i = j
    return kernels


def ptx_instruction_counts(
    ptx_or_source: str | os.PathLike[str],
    arch: str = "sm_75",
    *,
    by: str = "opcode",
) -> KernelMap:
    """Per kernel, a Counter of PTX instructions by full "opcode" ("ld.global.f32"), "base"
    ("ld") or "class" (classify_ptx). CUDA source is compiled with compile_ptx first."""
    if by not in ("class", "base", "opcode"):
        raise ValueError("by must be 'class', 'base' or 'opcode'")
    text, _ = read_source(ptx_or_source)
    if not is_ptx(text):
        text = compile_ptx(ptx_or_source, arch)
    out = KernelMap()
    for name, ops in parse_ptx(text).items():
        if by == "class":
            out[name] = Counter(classify_ptx(o) for o in ops)
        elif by == "base":
            out[name] = Counter(o.split(".", 1)[0] for o in ops)
        else:
            out[name] = Counter(ops)
    return out
