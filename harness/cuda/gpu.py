"""The gpu backend: the same SourceModule surface on a real GPU: pycuda, CuPy or cuda-bindings.

Nothing here imports a CUDA library at import time: the driver is chosen when the first gpu module
is created (in the test process, after xdist has started its workers), so importing harness.cuda
never initialises CUDA. Argument marshalling (`plan_args`) is plain Python, unit-tested without a
GPU; each driver only moves bytes and launches.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import hangs
from harness._lazy import lazy_module
from harness.cuda import sanitizer
from harness.cuda.args import ArrayArg, check_scalar, normalise_dims
from harness.cuda.errors import CudaCompileError, CudaError, LaunchError

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = [
    "ATTRIBUTES",
    "GpuDeviceArray",
    "GpuFunction",
    "GpuModule",
    "available_driver",
    "device_attributes",
    "plan_args",
]

# The device attributes harness.budgets.physics derives the peaks from: CUdevice_attribute /
# cudaDeviceAttr numbers (the same in the driver and runtime APIs).
ATTRIBUTES = {
    "clock_khz": 13,  # CU_DEVICE_ATTRIBUTE_CLOCK_RATE
    "sm_count": 16,  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    "memory_clock_khz": 36,  # CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE
    "memory_bus_bits": 37,  # CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
    "cc_major": 75,  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    "cc_minor": 76,  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
}

_CPU_ONLY = ("schedules", "seed", "timeout", "rtol")


@dataclass(frozen=True)
class Planned:
    kind: str  # "in", "out", "inout", "device", "scalar"
    value: Any  # the numpy array, device array or numpy scalar


def plan_args(kernel: str, args: Sequence[Any]) -> list[Planned]:
    """What each launch argument becomes on the device; errors as on the cpu backend."""
    plan = []
    for i, a in enumerate(args):
        if isinstance(a, ArrayArg):
            kind = {(True, False): "in", (False, True): "out", (True, True): "inout"}
            plan.append(Planned(kind[(a.copy_in, a.copy_out)], a.array))
        elif isinstance(a, GpuDeviceArray):
            plan.append(Planned("device", a))
        else:
            plan.append(Planned("scalar", check_scalar(kernel, i, a)))
    return plan


DRIVERS = ("pycuda", "cupy", "cuda-bindings")  # in order of preference
_MODULE_OF = {"pycuda": "pycuda", "cupy": "cupy", "cuda-bindings": "cuda.bindings"}


def available_driver() -> str | None:
    """The first of DRIVERS that is importable (checked without importing it), else None."""
    for name in DRIVERS:
        try:
            found = importlib.util.find_spec(_MODULE_OF[name]) is not None
        except (ImportError, ValueError):  # "cuda.bindings" when no `cuda` package exists
            found = False
        if found:
            return name
    return None


class _PyCuda:
    name = "pycuda"

    def __init__(self) -> None:
        import pycuda.autoinit  # noqa: F401 - creates the context
        import pycuda.driver as drv
        from pycuda.compiler import SourceModule

        self.drv = drv
        self.SourceModule = SourceModule

    def compile(self, source: str, options: list[str], name: str) -> Any:
        return self.SourceModule(source, options=options, no_extern_c=True)

    def function(self, module: Any, name: str) -> Any:
        return module.get_function(name)

    def alloc(self, a: np.ndarray) -> Any:
        return self.drv.to_device(a) if a.nbytes else self.drv.mem_alloc(1)

    def launch(self, fn: Any, plan: list[Planned], block, grid, shared: int, timed: bool) -> Any:
        wrap = {"in": self.drv.In, "out": self.drv.Out, "inout": self.drv.InOut}
        argv = [
            wrap[p.kind](p.value)
            if p.kind in wrap
            else (p.value.handle if p.kind == "device" else p.value)
            for p in plan
        ]
        return fn(*argv, block=block, grid=grid, shared=shared, time_kernel=timed)

    def get(self, handle: Any, a: np.ndarray) -> None:
        self.drv.memcpy_dtoh(a, handle)

    def attributes(self) -> dict[str, Any]:
        dev = self.drv.Context.get_device()
        out: dict[str, Any] = {"name": dev.name()}
        for key, number in ATTRIBUTES.items():
            out[key] = dev.get_attribute(self.drv.device_attribute(number))
        return out

    def set(self, handle: Any, a: np.ndarray) -> None:
        self.drv.memcpy_htod(handle, a)


class _CuPy:
    name = "cupy"

    def __init__(self) -> None:
        import cupy

        self.cp = cupy

    def compile(self, source: str, options: list[str], name: str) -> Any:
        return self.cp.RawModule(code=source, options=tuple(options))

    def function(self, module: Any, name: str) -> Any:
        return module.get_function(name)

    def alloc(self, a: np.ndarray) -> Any:
        return self.cp.asarray(a)

    def launch(self, fn: Any, plan: list[Planned], block, grid, shared: int, timed: bool) -> Any:
        cp = self.cp
        argv, back = [], []
        for p in plan:
            if p.kind in ("in", "inout"):
                d = cp.asarray(p.value)
            elif p.kind == "out":
                d = cp.zeros(p.value.shape, p.value.dtype)
            elif p.kind == "device":
                d = p.value.handle
            else:
                d = p.value
            if p.kind in ("out", "inout"):
                back.append((p.value, d))
            argv.append(d)
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn(tuple(grid), tuple(block), tuple(argv), shared_mem=shared)
        stop.record()
        stop.synchronize()
        for host, dev in back:
            host[...] = cp.asnumpy(dev)
        return cp.cuda.get_elapsed_time(start, stop) / 1e3 if timed else None

    def get(self, handle: Any, a: np.ndarray) -> None:
        a[...] = self.cp.asnumpy(handle)

    def attributes(self) -> dict[str, Any]:
        rt = self.cp.cuda.runtime
        dev = self.cp.cuda.Device().id
        name = rt.getDeviceProperties(dev).get("name", b"GPU")
        out: dict[str, Any] = {"name": name.decode() if isinstance(name, bytes) else str(name)}
        for key, number in ATTRIBUTES.items():
            out[key] = rt.deviceGetAttribute(number, dev)
        return out

    def set(self, handle: Any, a: np.ndarray) -> None:
        handle.set(a)


_drivers: dict[str, Any] = {}  # mutated, never rebound (harness.sandbox's guard)


def driver() -> Any:
    if "gpu" not in _drivers:
        which = available_driver()
        if which is None:
            raise CudaError(
                "the gpu backend needs pycuda (`pip install -e '.[gpu]'`), CuPy or cuda-python "
                "(`pip install cuda-python`); none is installed (the cpu backend needs none: "
                "--kata-cuda-backend=cpu)"
            )
        if which == "cuda-bindings":
            from harness.cuda.bindings import CudaBindings

            _drivers["gpu"] = CudaBindings()
        else:
            _drivers["gpu"] = _PyCuda() if which == "pycuda" else _CuPy()
    return _drivers["gpu"]


def device_attributes(drv: Any = None) -> dict[str, Any]:
    """The device's name and ATTRIBUTES (clocks, bus width, SMs, compute capability), from the
    gpu backend's driver: CUDA initialises here, so call it where the kernels run (a kata test's
    child), never in the pytest process."""
    return (drv or driver()).attributes()


class GpuDeviceArray:
    """A device array on the GPU: `.get()`, `.set(a)`, `.shape`, `.dtype`, `.nbytes`."""

    def __init__(self, a: np.ndarray, drv: Any = None) -> None:
        self._drv = drv or driver()
        self.shape, self.dtype, self.nbytes = a.shape, a.dtype, a.nbytes
        self.handle = self._drv.alloc(np.ascontiguousarray(a))

    def get(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        self._drv.get(self.handle, out)
        return out

    def set(self, a: np.ndarray) -> None:
        self._drv.set(self.handle, np.ascontiguousarray(a, dtype=self.dtype))


def gpu_to_device(a: np.ndarray) -> GpuDeviceArray:
    return GpuDeviceArray(a)


class GpuModule:
    backend = "gpu"

    def __init__(
        self,
        source: str,
        options: Sequence[str] = (),
        no_extern_c: bool = False,
        *,
        name: str = "kernel.cu",
        include_dirs: Sequence[Path | str] = (),
        drv: Any = None,
    ) -> None:
        self.name = name
        self.source = source
        self.options = list(options)
        self.no_extern_c = no_extern_c
        self.include_dirs = [str(d) for d in include_dirs]
        self._drv = drv or driver()
        text = (
            source if no_extern_c else 'extern "C" {\n#line 1 "' + name + '"\n' + source + "\n}\n"
        )
        opts = [*options, *(f"-I{d}" for d in include_dirs)]
        try:
            self._module = self._drv.compile(text, opts, name)
        except Exception as e:  # pycuda.driver.CompileError, cupy CompileException
            raise CudaCompileError(
                f"{name} does not compile (gpu backend, {self._drv.name}):\n{e}",
                log=str(e),
                command=(),
            ) from None

    def get_function(self, name: str) -> GpuFunction:
        try:
            fn = self._drv.function(self._module, name)
        except Exception as e:
            raise CudaError(f"{self.name} has no __global__ function {name!r}: {e}") from None
        return GpuFunction(self, name, fn)


class GpuFunction:
    def __init__(self, module: GpuModule, name: str, fn: Any) -> None:
        self.module = module
        self.name = name
        self._fn = fn

    def __call__(
        self,
        *args: Any,
        block: Any = None,
        grid: Any = (1, 1),
        shared: int = 0,
        time_kernel: bool = False,
        stream: Any = None,
        **cpu_only: Any,
    ) -> float | None:
        unknown = set(cpu_only) - set(_CPU_ONLY)
        if unknown:
            raise TypeError(f"{self.name}() got unexpected keyword(s) {sorted(unknown)}")
        if cpu_only.get("schedules"):
            raise LaunchError(
                f"{self.name}: schedules= needs the cpu backend; on a GPU use compute-sanitizer "
                "--tool racecheck"
            )
        b, g = normalise_dims(self.name, block, grid)
        plan = plan_args(self.name, args)
        grid2 = g[:2] if g[2] == 1 else g
        if sanitizer.sanitize_tool() is not None:  # --kata-cuda-sanitize: in a subprocess
            seconds = sanitizer.run_sanitized(self.module, self.name, plan, b, grid2, int(shared))
            return seconds if time_kernel else None
        # A kernel that spins on a GPU cannot be stopped from here: the sandbox kills the test
        # process, and the shared slot tells it which kernel, so later tests fail at once.
        with hangs.running(hangs.KERNEL, self._key(), f"kernel {self.name}"):
            return self.module._drv.launch(self._fn, plan, b, grid2, int(shared), time_kernel)

    def _key(self) -> str:
        m = self.module
        text = "\0".join([m.source, *m.options, str(m.no_extern_c)]).encode()
        return f"gpu:{self.name}:{hashlib.sha1(text).hexdigest()}"
