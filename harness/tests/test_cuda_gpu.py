"""The gpu backend without a GPU: import guard, argument marshalling through a fake driver.

On a machine with the gpu tier, test_cuda_cpu.py's acceptance kernels also run on the real gpu
backend (its `backend` fixture); here they skip with the probe's reason.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import harness.cuda as hc
from harness.cuda import gpu


class FakeDriver:
    """Records what the gpu backend asks of pycuda/CuPy; "runs" a vector add on the host."""

    name = "fake"

    def __init__(self) -> None:
        self.launches: list[tuple] = []
        self.compiled: list[tuple[str, list[str]]] = []

    def compile(self, source: str, options: list[str], name: str) -> str:
        if "syntax error" in source:
            raise RuntimeError("kernel.cu(1): error: expected a declaration")
        self.compiled.append((source, options))
        return "module"

    def function(self, module: str, name: str) -> str:
        if name != "vadd":
            raise KeyError(name)
        return name

    def alloc(self, a: np.ndarray) -> np.ndarray:
        return a.copy()

    def get(self, handle: np.ndarray, a: np.ndarray) -> None:
        a[...] = handle

    def set(self, handle: np.ndarray, a: np.ndarray) -> None:
        handle[...] = a

    def launch(self, fn, plan, block, grid, shared, timed):
        self.launches.append((fn, [p.kind for p in plan], block, grid, shared))
        a, b, c = (p.value if p.kind != "device" else p.value.handle for p in plan[:3])
        c[...] = a + b
        return 0.25 if timed else None


def test_importing_harness_cuda_never_imports_a_cuda_library() -> None:
    code = "import sys, harness.cuda, harness.cuda.gpu, harness.cuda.fixtures; " + (
        "print([m for m in ('pycuda', 'cupy', 'cuda') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_marshalling_wraps_arrays_and_checks_scalars() -> None:
    drv = FakeDriver()
    mod = gpu.GpuModule(
        "__global__ void vadd() {}", ["-DX=1"], name="v.cu", include_dirs=["/k"], drv=drv
    )
    source, options = drv.compiled[0]
    assert source.startswith('extern "C" {\n#line 1 "v.cu"') and options == ["-DX=1", "-I/k"]
    f = mod.get_function("vadd")
    a = np.arange(4, dtype=np.float32)
    c = np.zeros(4, np.float32)
    d = gpu.GpuDeviceArray(np.ones(4, np.float32), drv)
    t = f(hc.In(a), d, hc.Out(c), np.int32(4), block=(4, 1, 1), grid=(1, 1), time_kernel=True)
    assert t == 0.25
    np.testing.assert_array_equal(c, a + 1)
    assert drv.launches[0] == ("vadd", ["in", "device", "out", "scalar"], (4, 1, 1), (1, 1), 0)
    with pytest.raises(hc.LaunchError, match="Python int"):
        f(hc.In(a), d, hc.Out(c), 4, block=(4, 1, 1))
    with pytest.raises(hc.LaunchError, match="2048 threads"):
        f(hc.In(a), d, hc.Out(c), np.int32(4), block=(32, 64, 1))
    with pytest.raises(hc.LaunchError, match="needs the cpu backend"):
        f(hc.In(a), d, hc.Out(c), np.int32(4), block=(4, 1, 1), schedules=("forward",))
    with pytest.raises(hc.CudaError, match="no __global__ function 'nope'"):
        mod.get_function("nope")
    with pytest.raises(
        hc.CudaCompileError,
        match=r"v.cu does not compile \(gpu backend, fake\):\nkernel.cu\(1\): error",
    ):
        gpu.GpuModule("syntax error", name="v.cu", drv=drv)


def test_without_pycuda_or_cupy_the_gpu_backend_says_what_to_install(monkeypatch) -> None:
    if gpu.available_driver() is not None:
        pytest.skip("a gpu driver library is installed here")
    monkeypatch.setattr(gpu, "_drivers", {})
    with pytest.raises(hc.CudaError, match=r"needs pycuda .*--kata-cuda-backend=cpu"):
        hc.SourceModule("__global__ void k() {}", backend="gpu")


def test_cuda_gpu_fixture_skips_saying_why(pytester: pytest.Pytester) -> None:
    # gpu-tier kata tests take `cuda_gpu`: on the cpu backend, or with no driver library, they
    # skip with the reason instead of failing in a launch.
    pytester.makepyfile(
        test_on_gpu="""
        def test_launch(cuda_gpu):
            assert cuda_gpu.backend == "gpu"
        """
    )
    on_cpu = pytester.runpytest("-p", "no:cacheprovider", "--kata-cuda-backend=cpu", "-rs")
    on_cpu.assert_outcomes(skipped=1)
    on_cpu.stdout.fnmatch_lines(["*the cuda fixture is on the cpu backend here*"])
    if gpu.available_driver() is None:
        no_driver = pytester.runpytest("-p", "no:cacheprovider", "--kata-cuda-backend=gpu", "-rs")
        no_driver.assert_outcomes(skipped=1)
        no_driver.stdout.fnmatch_lines(["*the gpu backend needs CuPy*"])
