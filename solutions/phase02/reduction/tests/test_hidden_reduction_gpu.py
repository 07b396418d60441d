"""Hidden test of the reduction kata's gpu task: stale warp totals on a real GPU."""

from __future__ import annotations

import numpy as np

from harness.testing import check_written


def test_gpu_shuffle_after_a_bigger_launch(gpu):
    """Catches: warp 0 reading warp_totals[lane] for all 32 lanes although only blockDim.x / 32
    were written (the cpu backend fills shared memory with 3.4e38s before each block, and the
    cpu tasks' traced gate counts such reads), wrong on a GPU, where shared memory keeps what the previous kernel left: a 1024-thread
    launch summing 1e4s leaves large totals in lanes 2..31 for the 64-thread launch after it.
    (Shared memory is not guaranteed to survive between kernels, so a lucky run can miss it.)"""
    f = gpu.module("reduce.cu", backend="gpu").get_function("reduce_shuffle")
    grid = 1024
    big = np.full(1 << 22, 1e4, dtype=np.float32)
    out = np.full(grid, np.nan, dtype=np.float32)
    f(gpu.In(big), gpu.InOut(out), np.int32(big.size), block=(1024, 1, 1), grid=(grid, 1))
    check_written(out, "reduce_shuffle")
    small = np.ones(grid * 64, dtype=np.float32)
    out = np.full(grid, np.nan, dtype=np.float32)
    f(gpu.In(small), gpu.InOut(out), np.int32(small.size), block=(64, 1, 1), grid=(grid, 1))
    np.testing.assert_array_equal(out, np.full(grid, 64.0, np.float32), err_msg="64-thread blocks")
