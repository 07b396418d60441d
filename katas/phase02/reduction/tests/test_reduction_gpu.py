"""Public tests of the reduction kata's gpu task: reduce.cu on a real GPU (the `cuda` fixture's
gpu backend, CuPy or pycuda). Skipped without the gpu tier, with the probe's reason.

- test_gpu_sums_match_numpy: both kernels on 16 M floats, per-block sums against numpy's.
- test_gpu_bandwidth: a budget against the reference. The cost is the kernel's time (CUDA
  events, median of 5 launches over 64 M floats); yours may be at most 1.5 x the reference's.
  The report shows the GB/s both reach (a reduction is a pure read: its ceiling is DRAM
  bandwidth, 4.8 TB/s on an H200).
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from harness.testing import check_written

KERNELS = ("reduce_shared", "reduce_shuffle")
GRID = 1024  # blocks; with the grid-stride loop every thread adds up n / (GRID * block) elements
LAUNCHES = 5


def launch_dims(kernel: str, block: int) -> dict:
    shared = block * 4 if kernel == "reduce_shared" else 0  # one float per thread
    return {"block": (block, 1, 1), "grid": (GRID, 1), "shared": shared}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("block", [256, 1024])
def test_gpu_sums_match_numpy(gpu, kernel, block):
    n = (1 << 24) + 3
    data = np.random.default_rng(block).standard_normal(n).astype(np.float32)
    owner = (np.arange(n) // block) % GRID
    want = np.bincount(owner, weights=data.astype(np.float64), minlength=GRID)
    got = np.full(GRID, np.nan, dtype=np.float32)
    f = gpu.module("reduce.cu", backend="gpu").get_function(kernel)
    f(gpu.In(data), gpu.InOut(got), np.int32(n), **launch_dims(kernel, block))
    check_written(got, kernel)
    # ~16 000 floats per block added in float32 in some order: float64's answer to 1e-3.
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=2e-2, err_msg=f"{kernel} on the GPU")


class Timer:
    """Times one reduce.cu's kernel on device input (CUDA events); returns (seconds, sums)."""

    def __init__(self, gpu, path, kernel: str, data: np.ndarray) -> None:
        self.f = gpu.module(str(path), backend="gpu").get_function(kernel)
        self.kernel = kernel
        self.data, self.out = gpu.to_device(data), gpu.zeros(GRID, np.float32)
        self.n = np.int32(data.size)

    def __call__(self) -> tuple[float, np.ndarray]:
        args, dims = (self.data, self.out, self.n), launch_dims(self.kernel, 256)
        self.f(*args, **dims)  # warm-up
        s = statistics.median(self.f(*args, **dims, time_kernel=True) for _ in range(LAUNCHES))
        self.last = s
        return s, self.out.get()


@pytest.mark.parametrize("kernel", KERNELS)
def test_gpu_bandwidth(gpu, kata, kata_budget, kata_metrics, kernel):
    n = 1 << 26
    data = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    want = data.astype(np.float64).sum()
    mine = Timer(gpu, kata.source("reduce.cu").resolve(), kernel, data)
    ref = Timer(gpu, kata_budget.reference.source("reduce.cu").resolve(), kernel, data)
    check_written(mine()[1], kernel, 0)
    try:
        kata_budget.compare(
            mine, ref, name=f"{kernel} time", metric="GPU seconds", ratio=1.5,
            cost=lambda r: r[0],
            check=lambda r: bool(np.isclose(r[1].astype(np.float64).sum(), want, atol=1.0)),
            moves=data.nbytes, flops=data.size, peak=gpu.device_peak(),  # one add per float
        )  # fmt: skip
    finally:
        for who, timer in (("your", mine), ("reference", ref)):
            if hasattr(timer, "last"):
                kata_metrics[f"{who} {kernel} GB/s"] = round(data.nbytes / timer.last / 1e9)
