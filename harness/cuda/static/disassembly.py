"""SASS: `cuobjdump --dump-sass` of a cubin, parsed into instructions and counted by class."""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.cuda.static.compiling import compile_cubin
from harness.cuda.static.names import KernelMap
from harness.cuda.static.opcodes import classify_sass
from harness.toolchain import require_tool

__all__ = ["SassInstruction", "parse_sass", "sass", "sass_instruction_counts"]


@dataclass(frozen=True)
class SassInstruction:
    address: int
    opcode: str  # "LDG.E.SYS"
    operands: str  # "R0, [R2.64]"
    predicate: str = ""  # "@P0", "@!PT"

    @property
    def base(self) -> str:
        """The opcode without modifiers: "LDG"."""
        return self.opcode.split(".", 1)[0]

    @property
    def kind(self) -> str:
        return classify_sass(self.opcode)


_SASS_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
_SASS_INSN = re.compile(
    r"^\s*/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?P<pred>@!?U?P\w+\s+)?(?P<op>[A-Z][A-Z0-9_.]*)"
    r"(?P<args>[^;]*);"
)


def sass(cubin_or_source: str | os.PathLike[str] | bytes, arch: str = "sm_75") -> str:
    """`cuobjdump --dump-sass` of a cubin (path or bytes); a CUDA source is compiled first."""
    exe = require_tool("cuobjdump")
    if isinstance(cubin_or_source, bytes):
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
            fh.write(cubin_or_source)
            fh.flush()
            return _run_cuobjdump(exe, Path(fh.name))
    p = Path(os.fspath(cubin_or_source)) if not _looks_like_text(cubin_or_source) else None
    if p is not None and p.suffix in (".cubin", ".o", ".fatbin") and p.is_file():
        return _run_cuobjdump(exe, p)
    return _run_cuobjdump(exe, compile_cubin(cubin_or_source, arch))


def _looks_like_text(value: str | os.PathLike[str]) -> bool:
    return isinstance(value, str) and ("\n" in value or "__global__" in value)


def _run_cuobjdump(exe: Path, path: Path) -> str:
    proc = subprocess.run(
        [str(exe), "--dump-sass", str(path)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump failed on {path.name}: {proc.stderr.strip()}")
    return proc.stdout


def parse_sass(text: str) -> KernelMap:
    """cuobjdump SASS text -> KernelMap[kernel -> list[SassInstruction]]."""
    kernels = KernelMap()
    current: list[SassInstruction] | None = None
    for line in text.splitlines():
        m = _SASS_FUNC.match(line)
        if m:
            current = kernels.setdefault(m.group(1), [])
            continue
        m = _SASS_INSN.match(line)
        if m and current is not None:
            current.append(
                SassInstruction(
                    address=int(m.group("addr"), 16),
                    opcode=m.group("op"),
                    operands=m.group("args").strip(),
                    predicate=(m.group("pred") or "").strip(),
                )
            )
    return kernels


def sass_instruction_counts(
    cubin_or_source: str | os.PathLike[str] | bytes,
    arch: str = "sm_75",
    *,
    by: str = "class",
) -> KernelMap:
    """Per kernel, a Counter of SASS instructions by "class" (classify_sass), "base" opcode
    ("LDG") or full "opcode" ("LDG.E.SYS"). Padding NOPs after EXIT are not counted."""
    if by not in ("class", "base", "opcode"):
        raise ValueError("by must be 'class', 'base' or 'opcode'")
    text = cubin_or_source
    if not (isinstance(text, str) and "Function :" in text):
        text = sass(cubin_or_source, arch)
    out = KernelMap()
    for name, insns in parse_sass(text).items():
        out[name] = _count(_trim_padding(insns), by)
    return out


def _trim_padding(insns: list[SassInstruction]) -> list[SassInstruction]:
    # The assembler pads each function with `BRA self` + NOPs to an alignment boundary.
    end = len(insns)
    while end and insns[end - 1].base == "NOP":
        end -= 1
    if end >= 2 and insns[end - 1].base == "BRA" and insns[end - 2].base == "EXIT":
        end -= 1
    return insns[:end]


def _count(insns: Iterable[SassInstruction], by: str) -> Counter[str]:
    if by == "class":
        return Counter(i.kind for i in insns)
    if by == "base":
        return Counter(i.base for i in insns)
    return Counter(i.opcode for i in insns)
