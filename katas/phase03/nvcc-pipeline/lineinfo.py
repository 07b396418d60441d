"""Task `lineinfo`: map CUDA source lines to the PTX instructions compiled from them.

YOUR FILE. Replace each ``todo(...)``.

`nvcc -ptx -lineinfo` writes debug line directives into the PTX:

    .loc    1 8 9                     // file 1, line 8, column 9: what follows came from there
    .loc    1 14 5, function_name $L__info_string0, inlined_at 1 20 9   // inlined code
    .file   1 "/path/kernels.cu"      // file numbers: listed at the END of the module

Every instruction belongs to the most recent `.loc` before it in the same function. What is an
instruction: a line inside a function body that is not a directive (starts with "."), not a
label ("$L__BB0_2:"), not a brace, not empty; comments ("// ...") are not part of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness import todo

__all__ = ["Instruction", "LineMap", "parse_files", "parse_lineinfo"]


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
    """The `.file` table: number -> base name of the source file ({1: "kernels.cu", ...})."""
    todo("lineinfo.parse_files")


def parse_lineinfo(ptx: str) -> LineMap:
    """Attribute every instruction of every function to its source line (see the module doc).
    Instructions before a function's first `.loc` (and all of them without -lineinfo) are
    left out."""
    todo("lineinfo.parse_lineinfo")
