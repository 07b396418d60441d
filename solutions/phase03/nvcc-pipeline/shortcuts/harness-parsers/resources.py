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
from collections.abc import Iterable
from dataclasses import dataclass

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
    """Every kernel ptxas -v reports in `text`: the harness already parses these logs."""
    from harness.cuda import static

    return {
        name: KernelResources(
            name=name,
            arch=r.arch,
            registers=r.registers,
            stack_frame=r.stack_bytes,
            spill_stores=r.spill_stores,
            spill_loads=r.spill_loads,
            shared_bytes=r.shared_bytes,
            const_bytes=r.const_bytes,
            barriers=r.barriers,
        )  # fmt: skip
        for name, r in static.parse_ptxas_verbose(text).items()
    }


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled name -> C++ signature, from the harness's demangler."""
    from harness.cuda import static

    return static.demangle(names)


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
