"""Task `resources`: per-kernel resource usage from `ptxas -v`, and readable kernel names.

YOUR FILE. Replace each ``todo(...)``.

ptxas reports each entry function (kernel) in three lines:

    ptxas info    : Compiling entry function '_Z9block_sumPKfPfi' for 'sm_75'
    ptxas info    : Function properties for _Z9block_sumPKfPfi
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 372 bytes cmem[0]

Fields that are zero may be left out ("smem" only appears when the kernel has shared memory).
Device functions that were not inlined get a "Function properties" block of their own with no
"Compiling entry function" line before it: they are not kernels (README.md shows one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness import todo
from harness.toolchain import find_tool  # noqa: F401  (find_tool("c++filt") for demangle)

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


def parse_ptxas(text: str) -> dict[str, KernelResources]:
    """Every kernel of a `ptxas -v` report, keyed by the name ptxas prints."""
    todo("resources.parse_ptxas")


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled name -> C++ signature ("_Z9block_sumPKfPfi" -> "block_sum(float const*, float*,
    int)"), with one c++filt run for all of them (it reads names on stdin, one per line).
    Names that are not mangled (extern "C" kernels: not starting with "_Z") map to themselves."""
    todo("resources.demangle")


def kernel_name(signature: str) -> str:
    """`void stencil::blur<3, float>(float const*, float*, int)` -> `stencil::blur<3, float>`.

    Drop the return type (template kernels have one in their signature) and the parameter list;
    keep namespaces and template arguments. Unmangled names come back unchanged."""
    todo("resources.kernel_name")
