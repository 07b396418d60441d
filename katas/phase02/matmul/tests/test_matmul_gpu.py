"""Public tests of the matmul kata's gpu task: matmul.cu on a real GPU (the `cuda` fixture's gpu
backend, CuPy or pycuda). Skipped without the gpu tier, with the probe's reason.

- test_gpu_matches_numpy: both kernels on the device, sizes that are not multiples of TILE.
- test_gpu_tiled_beats_naive: a budget against the reference. The cost is the tiled kernel's
  time over the naive kernel's (CUDA events, median of 5 launches); yours may be at most
  1.25 x the reference's, i.e. your tiled kernel must reach 80 % of the reference's speed-up.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
import pytest

from harness.testing import check_written

SIZE = 2048  # M = N = K for the timing: 17 GFLOP per launch, milliseconds on any GPU
LAUNCHES = 5


@pytest.fixture(scope="module")
def gpu(cuda_gpu):
    """The `cuda` fixture on a real GPU (harness.cuda.fixtures.cuda_gpu skips otherwise)."""
    return cuda_gpu


def dims(tile: int, M: int, N: int) -> dict:
    return {"block": (tile, tile, 1), "grid": ((N + tile - 1) // tile, (M + tile - 1) // tile)}


@pytest.mark.parametrize("mnk", [(1024, 768, 512), (1000, 777, 333)], ids=str)
def test_gpu_matches_numpy(gpu, tile, mnk):
    M, N, K = mnk
    rng = np.random.default_rng(M + N + K)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    want = A.astype(np.float64) @ B.astype(np.float64)
    mod = gpu.module("matmul.cu", options=[f"-DTILE={tile}"], backend="gpu")
    for name in ("matmul_naive", "matmul_tiled"):
        C = np.full((M, N), np.nan, dtype=np.float32)
        args = (gpu.In(A), gpu.In(B), gpu.InOut(C), np.int32(M), np.int32(N), np.int32(K))
        mod.get_function(name)(*args, **dims(tile, M, N))
        check_written(C, name)
        np.testing.assert_allclose(
            C, want, rtol=1e-3, atol=1e-3 * np.sqrt(K), err_msg=f"{name} TILE={tile} on the GPU"
        )


@dataclass
class Timing:
    naive_s: float
    tiled_s: float
    C: np.ndarray  # the tiled kernel's result


class Timer:
    """Times one matmul.cu's two kernels on the same device inputs (CUDA events)."""

    def __init__(self, gpu, path, tile: int, A: np.ndarray, B: np.ndarray) -> None:
        mod = gpu.module(str(path), options=[f"-DTILE={tile}"], backend="gpu")
        self.naive = mod.get_function("matmul_naive")
        self.tiled = mod.get_function("matmul_tiled")
        self.A, self.B = gpu.to_device(A), gpu.to_device(B)
        self.C = gpu.zeros((A.shape[0], B.shape[1]), np.float32)
        self.tile = tile

    def median_s(self, f) -> float:
        (M, K), N = self.A.shape, self.B.shape[1]
        args = (self.A, self.B, self.C, np.int32(M), np.int32(N), np.int32(K))
        f(*args, **dims(self.tile, M, N))  # warm-up: module load, clocks up
        return statistics.median(
            f(*args, **dims(self.tile, M, N), time_kernel=True) for _ in range(LAUNCHES)
        )

    def __call__(self) -> Timing:
        naive = self.median_s(self.naive)
        self.C.set(np.zeros(self.C.shape, np.float32))
        self.last = Timing(naive, self.median_s(self.tiled), self.C.get())
        return self.last


def test_gpu_tiled_beats_naive(gpu, kata, kata_budget, kata_metrics, tile):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((SIZE, SIZE), dtype=np.float32)
    B = rng.standard_normal((SIZE, SIZE), dtype=np.float32)
    want = A.astype(np.float64) @ B.astype(np.float64)
    mine = Timer(gpu, kata.source("matmul.cu").resolve(), tile, A, B)
    ref = Timer(gpu, kata_budget.reference.source("matmul.cu").resolve(), tile, A, B)

    check_written(mine().C, "matmul_tiled", 0)

    def right(t: Timing) -> bool:
        return np.allclose(t.C, want, rtol=1e-3, atol=1e-3 * np.sqrt(SIZE))

    try:
        kata_budget.compare(
            mine, ref, name=f"tiled/naive time (TILE={tile})", metric="time ratio", ratio=1.25,
            cost=lambda t: t.tiled_s / t.naive_s, check=right,
        )  # fmt: skip
        peak = gpu.device_peak()
        for kernel in ("naive", "tiled"):  # faster than the device: the FLOPs were not done
            kata_budget.physical(
                f"matmul_{kernel} (TILE={tile})", getattr(mine.last, f"{kernel}_s"),
                flops=2.0 * SIZE**3, peak=peak,
                reference_seconds=getattr(ref.last, f"{kernel}_s") if hasattr(ref, "last") else None,
            )  # fmt: skip
    finally:  # what the report shows: GFLOP/s of the four kernels
        flop = 2.0 * SIZE**3
        for who, timer in (("your", mine), ("reference", ref)):
            if hasattr(timer, "last"):
                kata_metrics[f"{who} naive GFLOP/s"] = round(flop / timer.last.naive_s / 1e9)
                kata_metrics[f"{who} tiled GFLOP/s"] = round(flop / timer.last.tiled_s / 1e9)
