"""A PTX-subset interpreter: run the kernels nvcc (or a kata's compiler) emits, on numpy arrays.

    from harness.ptx import run_kernel
    out = np.zeros(n, np.float32)
    run_kernel(ptx_text, "saxpy", [a, b, out, np.int32(n)], grid=(n + 127) // 128, block=128)

Arrays passed as arguments are global-memory buffers (bounds-checked, copied back in place);
scalars fill the kernel's `.param` slots. See :mod:`harness.ptx.ops` for the instructions and
their precision, and :mod:`harness.ptx.interp` for how threads are scheduled.
"""

from __future__ import annotations

from .interp import (
    LaunchStats,
    LoadedModule,
    PtxFloatError,
    PtxRuntimeError,
    check_ieee_division,
    load_module,
    run_kernel,
)
from .memory import PtxMemoryError
from .ops import HANDLERS
from .parser import (
    Instruction,
    Kernel,
    Module,
    PtxError,
    PtxSyntaxError,
    PtxUnsupportedError,
    parse_module,
)

SUPPORTED_OPCODES: tuple[str, ...] = tuple(sorted({*HANDLERS, "bra", "ret", "exit", "trap"}))

__all__ = [
    "SUPPORTED_OPCODES",
    "check_ieee_division",
    "Instruction",
    "Kernel",
    "LaunchStats",
    "LoadedModule",
    "Module",
    "PtxError",
    "PtxFloatError",
    "PtxMemoryError",
    "PtxRuntimeError",
    "PtxSyntaxError",
    "PtxUnsupportedError",
    "load_module",
    "parse_module",
    "run_kernel",
]
