"""The gpu backend's cuda-bindings driver (NVRTC + driver API) against a fake cuda-python.

The fake keeps "device memory" in a dict and runs a vector add on the host when launched, reading
the kernelParams array the way the driver would: an array of pointers to one cell per parameter.
"""

from __future__ import annotations

import ctypes
import enum
import importlib.util

import numpy as np
import pytest

import harness.cuda as hc
from harness.cuda import bindings, gpu


class Status(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    NVRTC_ERROR_COMPILATION = 6


class FakeDriver:
    """cuda.bindings.driver, as far as harness.cuda uses it."""

    class CUdevice_attribute:  # noqa: N801 - cuda-python's name
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = "major"
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = "minor"
        CU_DEVICE_ATTRIBUTE_CLOCK_RATE = "clock"
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = "sms"
        CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = "memclock"
        CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = "bus"

    # An H200's answers (kHz, bits, counts).
    ATTRIBUTES = {"major": 9, "minor": 0, "clock": 1_980_000, "sms": 132,
                  "memclock": 3_201_000, "bus": 6144}  # fmt: skip

    def __init__(self) -> None:
        self.mem: dict[int, bytearray] = {}
        self.next = 0x7000_0000
        self.calls: list[str] = []
        self.loaded: list[bytes] = []
        self.launches: list[tuple] = []

    def _log(self, name: str, *values):
        self.calls.append(name)
        return (Status.CUDA_SUCCESS, *values)

    def cuInit(self, flags):  # noqa: N802 - the driver API's names
        return self._log("cuInit")

    def cuDeviceGet(self, i):  # noqa: N802
        return self._log("cuDeviceGet", 0)

    def cuDevicePrimaryCtxRetain(self, dev):  # noqa: N802
        return self._log("cuDevicePrimaryCtxRetain", "ctx")

    def cuCtxSetCurrent(self, ctx):  # noqa: N802
        return self._log("cuCtxSetCurrent")

    def cuDeviceGetAttribute(self, attr, dev):  # noqa: N802
        return self._log("cuDeviceGetAttribute", self.ATTRIBUTES[attr])

    def cuDeviceGetName(self, length, dev):  # noqa: N802
        return self._log("cuDeviceGetName", b"NVIDIA H200".ljust(length, b"\0"))

    def cuGetErrorName(self, status):  # noqa: N802
        return (Status.CUDA_SUCCESS, Status(status).name.encode())

    def cuModuleLoadData(self, image):  # noqa: N802
        self.loaded.append(image)
        return self._log("cuModuleLoadData", "module")

    def cuModuleGetFunction(self, module, name):  # noqa: N802
        if name != b"vadd":
            return (Status.CUDA_ERROR_NOT_FOUND,)
        return self._log("cuModuleGetFunction", "vadd-fn")

    def cuMemAlloc(self, n):  # noqa: N802
        ptr = self.next
        self.next += (n + 255) // 256 * 256
        self.mem[ptr] = bytearray(n)
        return self._log("cuMemAlloc", ptr)

    def cuMemFree(self, ptr):  # noqa: N802
        del self.mem[int(ptr)]
        return self._log("cuMemFree")

    def cuMemsetD8(self, ptr, value, n):  # noqa: N802
        self.mem[ptr][:n] = bytes([value]) * n
        return self._log("cuMemsetD8")

    def cuMemcpyHtoD(self, dst, src, n):  # noqa: N802
        self.mem[dst][:n] = ctypes.string_at(src, n)
        return self._log("cuMemcpyHtoD")

    def cuMemcpyDtoH(self, dst, src, n):  # noqa: N802
        ctypes.memmove(dst, bytes(self.mem[src][:n]), n)
        return self._log("cuMemcpyDtoH")

    def cuEventCreate(self, flags):  # noqa: N802
        return self._log("cuEventCreate", f"event{len(self.calls)}")

    def cuEventRecord(self, event, stream):  # noqa: N802
        return self._log("cuEventRecord")

    def cuEventSynchronize(self, event):  # noqa: N802
        if self.launches and self.launches[-1][-1] > len(self.mem[self.launches[-1][1][0]]) // 4:
            return (Status.CUDA_ERROR_ILLEGAL_ADDRESS,)  # n past the buffers: a faulting kernel
        return self._log("cuEventSynchronize")

    def cuEventElapsedTime(self, start, stop):  # noqa: N802
        return self._log("cuEventElapsedTime", 1.5)  # milliseconds, as CUDA reports them

    def cuEventDestroy(self, event):  # noqa: N802
        return self._log("cuEventDestroy")

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):  # noqa: N802
        cells = (ctypes.c_uint64 * 4).from_address(params)  # vadd(a, b, c, n)
        a, b, c = (ctypes.c_uint64.from_address(cells[i]).value for i in range(3))
        n = ctypes.c_int32.from_address(cells[3]).value
        self.launches.append((f, (a, b, c), (gx, gy, gz), (bx, by, bz), shared, n))
        if n <= len(self.mem[a]) // 4:
            x = np.frombuffer(self.mem[a], np.float32)[:n]
            y = np.frombuffer(self.mem[b], np.float32)[:n]
            np.frombuffer(self.mem[c], np.float32)[:n] = x + y
        return self._log("cuLaunchKernel")


class FakeNvrtc:
    def __init__(self) -> None:
        self.programs: list[tuple[bytes, bytes, list[bytes]]] = []
        self.destroyed = 0

    def nvrtcCreateProgram(self, src, name, n, headers, names):  # noqa: N802
        self.programs.append((src, name, []))
        return (Status.CUDA_SUCCESS, len(self.programs) - 1)

    def nvrtcCompileProgram(self, prog, n, opts):  # noqa: N802
        self.programs[prog][2].extend(opts)
        ok = b"syntax error" not in self.programs[prog][0]
        return (Status.CUDA_SUCCESS if ok else Status.NVRTC_ERROR_COMPILATION,)

    def _log(self, prog) -> bytes:
        return b'v.cu(3): error: expected a ";"\n\x00'

    def nvrtcGetProgramLogSize(self, prog):  # noqa: N802
        return (Status.CUDA_SUCCESS, len(self._log(prog)))

    def nvrtcGetProgramLog(self, prog, buf):  # noqa: N802
        ctypes.memmove(buf, self._log(prog), len(buf))  # fills the caller's bytes, as NVRTC does
        return (Status.CUDA_SUCCESS,)

    def nvrtcGetCUBINSize(self, prog):  # noqa: N802
        return (Status.CUDA_SUCCESS, 8)

    def nvrtcGetCUBIN(self, prog, buf):  # noqa: N802
        ctypes.memmove(buf, b"\x7fELFcubn", 8)
        return (Status.CUDA_SUCCESS,)

    def nvrtcDestroyProgram(self, prog):  # noqa: N802
        self.destroyed += 1
        return (Status.CUDA_SUCCESS,)


@pytest.fixture
def fake() -> tuple[FakeDriver, FakeNvrtc, bindings.CudaBindings]:
    cu, nv = FakeDriver(), FakeNvrtc()
    return cu, nv, bindings.CudaBindings(cu, nv)


def test_compiles_with_nvrtc_for_the_device_architecture(fake) -> None:
    cu, nv, drv = fake
    assert cu.calls[:4] == ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent"]
    mod = gpu.GpuModule("__global__ void vadd() {}", ["-DX=1"], name="v.cu", drv=drv)
    src, name, opts = nv.programs[0]
    assert name == b"v.cu" and src.startswith(b'extern "C" {\n#line 1 "v.cu"')
    assert opts == [b"-DX=1", b"--gpu-architecture=sm_90"]
    assert cu.loaded == [b"\x7fELFcubn"] and nv.destroyed == 1
    gpu.GpuModule("__global__ void vadd() {}", ["-arch=sm_80"], name="v.cu", drv=drv)
    assert nv.programs[1][2] == [b"-arch=sm_80"]  # the caller's architecture wins
    assert mod.get_function("vadd").name == "vadd"
    with pytest.raises(hc.CudaError, match=r"no __global__ function 'nope'"):
        mod.get_function("nope")


def test_a_compile_error_carries_nvrtcs_log(fake) -> None:
    _, nv, drv = fake
    with pytest.raises(hc.CudaCompileError, match=r"gpu backend, cuda-bindings\):\nv.cu\(3\)"):
        gpu.GpuModule("syntax error", name="v.cu", drv=drv)
    assert nv.destroyed == 1  # the program is released on failure too


def test_launch_marshals_parameters_times_with_events_and_frees(fake) -> None:
    cu, _, drv = fake
    f = gpu.GpuModule("__global__ void vadd() {}", name="v.cu", drv=drv).get_function("vadd")
    a = np.arange(8, dtype=np.float32)
    d = gpu.GpuDeviceArray(np.full(8, 10, np.float32), drv)
    c = np.full(8, -1, np.float32)
    seconds = f(hc.In(a), d, hc.Out(c), np.int32(8), block=(4, 1, 1), grid=(2, 1), time_kernel=True)
    np.testing.assert_array_equal(c, a + 10)
    assert seconds == pytest.approx(1.5e-3)
    fn, (pa, pb, pc), grid, block, shared, n = cu.launches[0]
    assert fn == "vadd-fn" and pb == d.handle and grid == (2, 1, 1) and block == (4, 1, 1)
    assert n == 8 and shared == 0
    assert list(cu.mem) == [d.handle]  # the In/Out copies are freed, the device array is kept
    np.testing.assert_array_equal(d.get(), np.full(8, 10, np.float32))
    assert f(hc.In(a), d, hc.Out(c), np.int32(8), block=(4, 1, 1)) is None


def test_a_faulting_kernel_is_a_kernel_error_naming_it(fake) -> None:
    cu, _, drv = fake
    f = gpu.GpuModule("__global__ void vadd() {}", name="v.cu", drv=drv).get_function("vadd")
    a = np.ones(4, np.float32)
    with pytest.raises(hc.KernelError, match=r"kernel vadd: .*CUDA_ERROR_ILLEGAL_ADDRESS") as e:
        f(hc.In(a), hc.In(a), hc.Out(a.copy()), np.int32(1000), block=(4, 1, 1))
    assert e.value.kernel == "vadd"
    assert cu.mem == {}  # freed on the error path as well


def test_chosen_when_pycuda_and_cupy_are_missing(monkeypatch) -> None:
    present = {"cuda.bindings"}
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: object() if name in present else None
    )
    assert gpu.available_driver() == "cuda-bindings"
    present.add("cupy")
    assert gpu.available_driver() == "cupy"
    present.clear()
    assert gpu.available_driver() is None
    present.add("cuda.bindings")
    made = []
    real = bindings.CudaBindings
    monkeypatch.setattr(gpu, "_drivers", {})
    monkeypatch.setattr(
        bindings, "CudaBindings", lambda: made.append(1) or real(FakeDriver(), FakeNvrtc())
    )
    assert gpu.driver().name == "cuda-bindings" and made == [1]


def test_device_attributes_give_the_devices_peak() -> None:
    """harness.physics derives the peak from what the driver reports (issue 22)."""
    from harness import physics
    from harness.cuda.gpu import device_attributes

    attrs = device_attributes(bindings.CudaBindings(FakeDriver(), FakeNvrtc()))
    assert attrs == {"name": "NVIDIA H200", "clock_khz": 1_980_000, "sm_count": 132,
                     "memory_clock_khz": 3_201_000, "memory_bus_bits": 6144, "cc_major": 9,
                     "cc_minor": 0}  # fmt: skip
    peak = physics.gpu_peak(attrs)
    assert peak is not None and peak.device == "this H200"
    assert round(peak.bytes_per_s / 1e12, 2) == 4.92 and round(peak.flops_per_s / 1e12, 1) == 66.9
