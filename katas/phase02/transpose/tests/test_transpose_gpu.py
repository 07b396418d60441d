"""Public tests of the transpose kata's gpu task: transpose.cu on a real GPU (the `cuda`
fixture's gpu backend, CuPy or pycuda). Skipped without the gpu tier, with the probe's reason.

- test_gpu_transposes: the three kernels on the device, square and ragged shapes.
- test_gpu_bandwidth: effective bandwidth as a fraction of a device-to-device copy. The copy is
  COPY below: the same tiles and launch, no transpose (the ceiling any transpose can reach).
  The cost is transpose_padded's time over the copy's (CUDA events, median of 5 launches); yours
  may be at most 1.4 x the reference's. The report shows GB/s and the fraction for all three.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
import pytest

from harness.testing import check_written

KERNELS = ("transpose_naive", "transpose_tiled", "transpose_padded")
SIZE = 8192  # 256 MiB per matrix: well past every cache
LAUNCHES = 5
COPY = """
// Device-to-device copy with transpose.cu's tiles and launch: block (32, 8), 4 rows per thread.
__global__ void copy_tiles(const float* in, float* out, int rows, int cols) {
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < cols && y + j < rows) out[(y + j) * cols + x] = in[(y + j) * cols + x];
}
"""


@pytest.fixture(scope="module")
def gpu(cuda_gpu):
    """The `cuda` fixture on a real GPU (harness.cuda.fixtures.cuda_gpu skips otherwise)."""
    return cuda_gpu


def dims(rows: int, cols: int) -> dict:
    return {"block": (32, 8, 1), "grid": ((cols + 31) // 32, (rows + 31) // 32)}


@pytest.mark.parametrize("shape", [(1024, 1024), (1000, 777), (33, 4100)], ids=str)
def test_gpu_transposes(gpu, shape):
    rows, cols = shape
    src = np.random.default_rng(rows + cols).standard_normal(shape, dtype=np.float32)
    mod = gpu.module("transpose.cu", backend="gpu")
    for name in KERNELS:
        out = np.full((cols, rows), np.nan, dtype=np.float32)
        mod.get_function(name)(
            gpu.In(src), gpu.InOut(out), np.int32(rows), np.int32(cols), **dims(rows, cols)
        )
        check_written(out, name)
        np.testing.assert_array_equal(out, src.T, err_msg=f"{name} {rows} x {cols} on the GPU")


@dataclass
class Timing:
    copy_s: float
    kernel_s: dict[str, float]
    out: np.ndarray  # transpose_padded's result


class Timer:
    """Times one transpose.cu's kernels and the copy on the same device matrices (CUDA events)."""

    def __init__(self, gpu, path, src: np.ndarray) -> None:
        mod = gpu.module(str(path), backend="gpu")
        self.kernels = {name: mod.get_function(name) for name in KERNELS}
        self.copy = gpu.source_module(COPY, backend="gpu", name="copy.cu").get_function(
            "copy_tiles"
        )
        self.src = gpu.to_device(src)
        self.out = gpu.zeros(src.shape[::-1], np.float32)
        self.copied = gpu.zeros(src.shape, np.float32)  # the copy's own output
        self.rows, self.cols = src.shape

    def median_s(self, f, out) -> float:
        args = (self.src, out, np.int32(self.rows), np.int32(self.cols))
        f(*args, **dims(self.rows, self.cols))  # warm-up: module load, clocks up
        return statistics.median(
            f(*args, **dims(self.rows, self.cols), time_kernel=True) for _ in range(LAUNCHES)
        )

    def __call__(self) -> Timing:
        copy_s = self.median_s(self.copy, self.copied)
        times = {}
        for name, f in self.kernels.items():  # padded last: self.out is then its result alone
            self.out.set(np.zeros(self.out.shape, np.float32))
            times[name] = self.median_s(f, self.out)
        self.last = Timing(copy_s, times, self.out.get())
        return self.last


def test_gpu_bandwidth(gpu, kata, kata_budget, kata_metrics):
    src = np.random.default_rng(1).standard_normal((SIZE, SIZE), dtype=np.float32)
    mine = Timer(gpu, kata.source("transpose.cu").resolve(), src)
    ref = Timer(gpu, kata_budget.reference.source("transpose.cu").resolve(), src)
    check_written(mine().out, "transpose_padded", 0)
    try:
        kata_budget.compare(
            mine, ref, name="padded transpose time / copy time", metric="time ratio",
            ratio=1.4, cost=lambda t: t.kernel_s["transpose_padded"] / t.copy_s,
            check=lambda t: np.array_equal(t.out, src.T),
        )  # fmt: skip
        for name in mine.last.kernel_s:  # a kernel faster than the device did not move the bytes
            kata_budget.physical(
                name, mine.last.kernel_s[name], moves=2 * src.nbytes, peak=gpu.device_peak(),
                reference_seconds=ref.last.kernel_s[name] if hasattr(ref, "last") else None,
            )  # fmt: skip
    finally:  # what the report shows: GB/s (read + written) and the fraction of the copy's
        moved = 2 * src.nbytes
        for who, timer in (("your", mine), ("reference", ref)):
            if hasattr(timer, "last"):
                t = timer.last
                kata_metrics[f"{who} copy GB/s"] = round(moved / t.copy_s / 1e9)
                for name, s in t.kernel_s.items():
                    kata_metrics[f"{who} {name} GB/s"] = round(moved / s / 1e9)
                    kata_metrics[f"{who} {name} / copy"] = round(t.copy_s / s, 3)
