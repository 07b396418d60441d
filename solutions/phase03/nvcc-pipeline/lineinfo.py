"""Task `lineinfo`: map CUDA source lines to the PTX instructions compiled from them.

`nvcc -ptx -lineinfo` writes debug line directives into the PTX:

    .loc    1 8 9                     // file 1, line 8, column 9: what follows came from there
    .loc    1 14 5, function_name $L__info_string0, inlined_at 1 20 9   // inlined code
    .file   1 "/path/kernels.cu"      // file numbers, listed at the END of the module

Every instruction belongs to the most recent `.loc` before it in the same function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ["Instruction", "LineMap", "parse_files", "parse_lineinfo"]

_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?P<rest>.*)$")
_INLINED_AT = re.compile(r"inlined_at\s+(\d+)\s+(\d+)\s+(\d+)")
_ENTRY = re.compile(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")
_LABEL = re.compile(r"^\s*[$\w]+:\s*$")


@dataclass(frozen=True)
class Instruction:
    """One PTX instruction and where it came from."""

    ptx_line: int  # 1-based line number in the PTX text
    text: str  # stripped, spaces collapsed: "fma.rn.f32 %f4, %f2, %f1, %f3;"
    function: str  # the .entry/.func it is in, as PTX names it
    file: str  # source file name (base name: "kernels.cu")
    line: int  # source line
    inlined_at: tuple[str, int] | None = None  # (file, line) of the call, for inlined code


@dataclass
class LineMap:
    instructions: list[Instruction]  # every attributed instruction, in PTX order

    def for_line(self, file: str, line: int) -> list[Instruction]:
        """The instructions compiled from `file`:`line` (base name), in PTX order."""
        return [i for i in self.instructions if i.file == file and i.line == line]

    def lines_of(self, function: str) -> list[tuple[str, int]]:
        """The distinct (file, line) a function's instructions come from, in first-seen order."""
        seen = dict.fromkeys((i.file, i.line) for i in self.instructions if i.function == function)
        return list(seen)


def parse_files(ptx: str) -> dict[int, str]:
    """`.file` table: number -> base name of the source file."""
    files = {}
    for line in ptx.splitlines():
        if m := _FILE.match(line):
            files[int(m.group(1))] = PurePosixPath(m.group(2)).name
    return files


def parse_lineinfo(ptx: str) -> LineMap:
    """Attribute every instruction of every function to its source line (see the module doc).
    Instructions before a function's first `.loc` (and all of them without -lineinfo) are
    left out."""
    files = parse_files(ptx)  # read first: the table comes after its uses
    out: list[Instruction] = []
    function: str | None = None
    pending: str | None = None
    loc: tuple[str, int, tuple[str, int] | None] | None = None
    depth = 0
    for number, raw in enumerate(ptx.splitlines(), start=1):
        code = raw.split("//", 1)[0].strip()
        if depth == 0:
            if m := _ENTRY.search(code):
                pending = m.group(1)  # its body may open lines later, after the parameters
            if "{" in code:
                function, pending, loc = pending, None, None  # .section { ... } has no code
            depth += code.count("{") - code.count("}")
            continue
        if m := _LOC.match(code):
            at = _INLINED_AT.search(m.group("rest"))
            caller = (files.get(int(at.group(1)), at.group(1)), int(at.group(2))) if at else None
            loc = (files.get(int(m.group(1)), m.group(1)), int(m.group(2)), caller)
            continue
        depth += code.count("{") - code.count("}")
        if depth == 0:
            function = None
        if not _is_instruction(code) or function is None or loc is None:
            continue
        out.append(Instruction(number, " ".join(code.split()), function, loc[0], loc[1], loc[2]))
    return LineMap(out)


def _is_instruction(code: str) -> bool:
    return (
        bool(code)
        and code not in ("{", "}")
        and not code.startswith(".")
        and not (_LABEL.match(code))
    )
