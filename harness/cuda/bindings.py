"""The gpu backend's third driver: NVIDIA's cuda-python (`cuda.bindings`: NVRTC + the driver API).

Chosen when neither pycuda nor CuPy is importable (harness.cuda.gpu.available_driver). Like the
other drivers it only compiles, moves bytes and launches; argument planning and errors about
arguments are harness.cuda.gpu's. The two modules (`cuda.bindings.driver`, `cuda.bindings.nvrtc`)
can be passed in, so the unit tests run it against fakes without a GPU.

Every cuda-python call returns a tuple whose first item is the status; `_ok` turns a failed one
into a CudaError naming the call and the error (CUDA_ERROR_ILLEGAL_ADDRESS, ...).
"""

from __future__ import annotations

from typing import Any

from harness._lazy import lazy_module
from harness.cuda.errors import CudaError, KernelError

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = ["CudaBindings"]

_ATTRIBUTES = {  # harness.cuda.gpu.ATTRIBUTES's keys, by CUdevice_attribute name
    "clock_khz": "CLOCK_RATE",
    "sm_count": "MULTIPROCESSOR_COUNT",
    "memory_clock_khz": "MEMORY_CLOCK_RATE",
    "memory_bus_bits": "GLOBAL_MEMORY_BUS_WIDTH",
    "cc_major": "COMPUTE_CAPABILITY_MAJOR",
    "cc_minor": "COMPUTE_CAPABILITY_MINOR",
}


def _buffer(size: int) -> bytes:
    # cuda-python fills a bytes object in place; a fresh one (CPython shares 0- and 1-byte ones).
    return b" " * max(2, size)


class _Fn:
    """A loaded kernel: the CUfunction and its name (for error messages)."""

    def __init__(self, handle: Any, name: str) -> None:
        self.handle = handle
        self.name = name


class CudaBindings:
    name = "cuda-bindings"

    def __init__(self, driver: Any = None, nvrtc: Any = None) -> None:
        if driver is None or nvrtc is None:
            from cuda.bindings import driver as real_driver
            from cuda.bindings import nvrtc as real_nvrtc

            driver = driver or real_driver
            nvrtc = nvrtc or real_nvrtc
        self.cu = driver
        self.nvrtc = nvrtc
        cu = driver
        self._ok(cu.cuInit(0), "cuInit")
        dev = self._ok(cu.cuDeviceGet(0), "cuDeviceGet")
        self.ctx = self._ok(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        self._ok(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        attr = cu.CUdevice_attribute
        major = self._ok(
            cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
            "cuDeviceGetAttribute",
        )
        minor = self._ok(
            cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
            "cuDeviceGetAttribute",
        )
        self.arch = f"sm_{major}{minor}"  # a real architecture: NVRTC then emits a cubin
        self.dev = dev

    # ------------------------------------------------------------------ status handling
    def _ok(self, result: Any, call: str, kernel: str | None = None) -> Any:
        status, *values = result if isinstance(result, tuple) else (result,)
        if int(status) != 0:  # CUDA_SUCCESS and NVRTC_SUCCESS are both 0
            text = self._error_name(status)
            if kernel is not None:
                raise KernelError(f"kernel {kernel}: {call} failed: {text}", kernel=kernel)
            raise CudaError(f"cuda-bindings: {call} failed: {text}")
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)

    def _error_name(self, status: Any) -> str:
        try:
            err, name = self.cu.cuGetErrorName(status)
            if int(err) == 0:
                return name.decode() if isinstance(name, bytes) else str(name)
        except Exception:  # an NVRTC status, or a driver that cannot name it
            pass
        return getattr(status, "name", None) or str(status)

    def attributes(self) -> dict[str, Any]:
        """The device's name and clocks, bus width, SMs, compute capability (the keys of
        harness.cuda.gpu.ATTRIBUTES), for harness.budgets.physics."""
        cu = self.cu
        raw = self._ok(cu.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        name = raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw)
        out: dict[str, Any] = {"name": name}
        attr = cu.CUdevice_attribute
        for key, which in _ATTRIBUTES.items():
            value = cu.cuDeviceGetAttribute(getattr(attr, f"CU_DEVICE_ATTRIBUTE_{which}"), self.dev)
            out[key] = self._ok(value, "cuDeviceGetAttribute")
        return out

    # ------------------------------------------------------------------ compile and load
    def compile(self, source: str, options: list[str], name: str) -> Any:
        nv = self.nvrtc
        prog = self._ok(nv.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "create")
        opts = list(options)
        if not any(o.startswith(("-arch", "--gpu-architecture")) for o in opts):
            opts.append(f"--gpu-architecture={self.arch}")
        try:
            (status,) = nv.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
            if int(status) != 0:
                size = self._ok(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
                log = _buffer(size)
                self._ok(nv.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
                # The caller wraps this into CudaCompileError with the file name.
                raise RuntimeError(log.rstrip(b"\0 ").decode(errors="replace"))
            size = self._ok(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            cubin = _buffer(size)
            self._ok(nv.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        finally:
            nv.nvrtcDestroyProgram(prog)
        return self._ok(self.cu.cuModuleLoadData(cubin), "cuModuleLoadData")

    def function(self, module: Any, name: str) -> _Fn:
        handle = self._ok(self.cu.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")
        return _Fn(handle, name)

    # ------------------------------------------------------------------ memory
    def _malloc(self, nbytes: int) -> Any:
        return self._ok(self.cu.cuMemAlloc(max(1, nbytes)), "cuMemAlloc")

    def alloc(self, a: np.ndarray) -> Any:
        ptr = self._malloc(a.nbytes)
        self.set(ptr, a)
        return ptr

    def set(self, handle: Any, a: np.ndarray) -> None:
        if a.nbytes:
            self._ok(self.cu.cuMemcpyHtoD(handle, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")

    def get(self, handle: Any, a: np.ndarray) -> None:
        if a.nbytes:
            self._ok(self.cu.cuMemcpyDtoH(a.ctypes.data, handle, a.nbytes), "cuMemcpyDtoH")

    # ------------------------------------------------------------------ launch
    def launch(self, fn: _Fn, plan: list[Any], block, grid, shared: int, timed: bool) -> Any:
        cu = self.cu
        holders: list[np.ndarray] = []  # one cell per parameter; kernelParams points at them
        temps: list[Any] = []
        back: list[tuple[np.ndarray, Any]] = []
        try:
            for p in plan:
                if p.kind in ("in", "out", "inout"):
                    d = self._malloc(p.value.nbytes)
                    temps.append(d)
                    if p.kind == "out":  # zeroed, as on the other backends: reproducible
                        self._ok(cu.cuMemsetD8(d, 0, max(1, p.value.nbytes)), "cuMemsetD8")
                    else:
                        self.set(d, p.value)
                    if p.kind != "in":
                        back.append((p.value, d))
                    holders.append(np.array([int(d)], np.uint64))
                elif p.kind == "device":
                    holders.append(np.array([int(p.value.handle)], np.uint64))
                else:  # a numpy scalar: its own dtype is the parameter's C type
                    holders.append(np.array([p.value]))
            params = np.array([h.ctypes.data for h in holders] or [0], np.uint64)
            g = (*grid, 1, 1)[:3]
            start = self._ok(cu.cuEventCreate(0), "cuEventCreate")
            stop = self._ok(cu.cuEventCreate(0), "cuEventCreate")
            try:
                self._ok(cu.cuEventRecord(start, 0), "cuEventRecord")
                self._ok(
                    cu.cuLaunchKernel(fn.handle, *g, *block, shared, 0, params.ctypes.data, 0),
                    "cuLaunchKernel",
                    fn.name,
                )
                self._ok(cu.cuEventRecord(stop, 0), "cuEventRecord")
                # A fault in the kernel (CUDA_ERROR_ILLEGAL_ADDRESS, ...) is reported here.
                self._ok(cu.cuEventSynchronize(stop), "the kernel", fn.name)
                ms = self._ok(cu.cuEventElapsedTime(start, stop), "cuEventElapsedTime")
            finally:
                cu.cuEventDestroy(start)
                cu.cuEventDestroy(stop)
            for host, dev in back:
                self.get(dev, host)
            return float(ms) / 1e3 if timed else None
        finally:
            for d in temps:
                cu.cuMemFree(d)
