"""Task `resources`: per-kernel resource usage from `ptxas -v`, and readable kernel names.

ptxas reports each entry function (kernel) in three lines:

    ptxas info    : Compiling entry function '_Z9block_sumPKfPfi' for 'sm_75'
    ptxas info    : Function properties for _Z9block_sumPKfPfi
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 372 bytes cmem[0]

Device functions that were not inlined get a "Function properties" block of their own with no
"Compiling entry function" line before it: they are not kernels.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from harness.toolchain import find_tool

__all__ = ["KernelResources", "demangle", "kernel_name", "parse_ptxas"]


@dataclass(frozen=True)
class KernelResources:
    name: str  # as ptxas prints it: mangled, unless the kernel is extern "C"
    arch: str  # "sm_75"
    registers: int = 0
    stack_frame: int = 0  # bytes per thread of local memory: local arrays and spills
    spill_stores: int = 0  # bytes
    spill_loads: int = 0  # bytes
    shared_bytes: int = 0  # static shared memory ("smem")
    const_bytes: int = 0  # constant bank 0 ("cmem[0]": kernel parameters and more)
    barriers: int = 0


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame")
_SPILL_STORES = re.compile(r"(\d+) bytes spill stores")
_SPILL_LOADS = re.compile(r"(\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas(text: str) -> dict[str, KernelResources]:
    """Every kernel of a `ptxas -v` report, keyed by the name ptxas prints."""
    found: dict[str, dict] = {}
    current: str | None = None  # the kernel whose report the next lines belong to
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
            found[current] = {"name": current, "arch": m.group(2)}
        elif m := _PROPERTIES.search(line):
            # A device function's block must not overwrite the kernel reported before it.
            current = m.group(1) if m.group(1) in found else None
        elif current is not None:
            fields = found[current]
            for key, pattern in (
                ("stack_frame", _STACK),
                ("spill_stores", _SPILL_STORES),
                ("spill_loads", _SPILL_LOADS),
                ("registers", _REGISTERS),
                ("barriers", _BARRIERS),
                ("shared_bytes", _SMEM),
                ("const_bytes", _CMEM),
            ):
                if m := pattern.search(line):
                    fields[key] = int(m.group(1))
            if _REGISTERS.search(line):
                current = None  # "Used N registers" ends a kernel's report
    return {name: KernelResources(**fields) for name, fields in found.items()}


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled name -> C++ signature, with one c++filt (or cu++filt) run for all of them.
    Names that are not mangled (extern "C" kernels) map to themselves."""
    names = list(dict.fromkeys(names))
    mangled = [n for n in names if n.startswith("_Z")]
    out = {n: n for n in names}
    if not mangled:
        return out
    tool = find_tool("cu++filt") or find_tool("c++filt")
    if tool is None:
        raise RuntimeError("demangling needs c++filt: `apt-get install -y binutils`")
    proc = subprocess.run(
        [str(tool)], input="\n".join(mangled) + "\n", capture_output=True, text=True, check=True
    )
    out.update(zip(mangled, proc.stdout.splitlines(), strict=True))
    return out


def kernel_name(signature: str) -> str:
    """`void stencil::blur<3, float>(float const*, float*, int)` -> `stencil::blur<3, float>`.

    Drops the return type and the parameter list, minding brackets: template arguments may hold
    spaces, commas and parentheses (`blur<(short)3>`). Unmangled names come back unchanged."""
    depth, start, end = 0, 0, len(signature)
    for i, ch in enumerate(signature):
        if ch == "(" and depth == 0:
            end = i  # the parameter list starts at the first top-level "("
            break
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == " " and depth == 0:
            start = i + 1  # a top-level space ends the return type
    return signature[start:end].strip()
