"""CUDA for katas: one pycuda-like API, a cpu backend (fibers) and a gpu backend. See docs/cuda.md.

    from harness.cuda import SourceModule, In, Out
    mod = SourceModule(open("vadd.cu").read(), name="vadd.cu")          # cpu backend
    mod.get_function("vadd")(In(a), In(b), Out(c), np.int32(n), block=(256, 1, 1), grid=(4, 1))

Importing this package never initialises CUDA; the gpu backend imports pycuda/cupy only when a
gpu module is created.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.cuda.args import In, InOut, Out
from harness.cuda.errors import (
    BarrierDeadlock,
    CudaCompileError,
    CudaError,
    KernelCrash,
    KernelError,
    KernelTimeout,
    LaunchError,
    OutOfBounds,
    RaceDetected,
    SanitizerError,
    SanitizerRefused,
)

__all__ = [
    "BACKENDS",
    "BarrierDeadlock",
    "CudaCompileError",
    "CudaError",
    "In",
    "InOut",
    "KernelCrash",
    "KernelError",
    "KernelTimeout",
    "LaunchError",
    "Out",
    "OutOfBounds",
    "RaceDetected",
    "SanitizerError",
    "SanitizerRefused",
    "SourceModule",
    "check_races",
    "empty",
    "to_device",
    "zeros",
]

BACKENDS = ("cpu", "gpu")


def SourceModule(  # noqa: N802 - pycuda's name
    source: str,
    options: Sequence[str] = (),
    no_extern_c: bool = False,
    *,
    backend: str = "cpu",
    name: str = "kernel.cu",
    include_dirs: Sequence[Path | str] = (),
    **kw: Any,
) -> Any:
    """Compile `source` for `backend` ("cpu" or "gpu"); `.get_function(name)` gives a kernel."""
    if backend == "cpu":
        from harness.cuda.cpu.backend import CpuModule

        return CpuModule(source, options, no_extern_c, name=name, include_dirs=include_dirs, **kw)
    if backend == "gpu":
        from harness.cuda.gpu import GpuModule

        return GpuModule(source, options, no_extern_c, name=name, include_dirs=include_dirs)
    raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")


def to_device(a: Any, backend: str = "cpu") -> Any:
    """A device array holding a copy of numpy array `a`."""
    import numpy as np

    a = np.ascontiguousarray(a)
    if backend == "gpu":
        from harness.cuda.gpu import gpu_to_device

        return gpu_to_device(a)
    from harness.cuda.cpu.backend import CpuDeviceArray

    return CpuDeviceArray.from_array(a)


def zeros(shape: Any, dtype: Any = "float32", backend: str = "cpu") -> Any:
    import numpy as np

    return to_device(np.zeros(shape, dtype), backend)


def empty(shape: Any, dtype: Any = "float32", backend: str = "cpu") -> Any:
    return zeros(shape, dtype, backend)  # zeroed anyway: reproducible on the cpu backend


def check_races(f: Any, *args: Any, **kw: Any) -> None:
    """Run cpu kernel `f` under several thread schedules; RaceDetected when outputs differ."""
    if not hasattr(f, "check_races"):
        raise CudaError(
            f"race checks need the cpu backend (got {type(f).__name__}); on a GPU use "
            "compute-sanitizer --tool racecheck"
        )
    f.check_races(*args, **kw)
