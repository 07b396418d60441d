"""Hidden tests of the reduction kata: any n, grid and block size, in both thread orders.

Examples and data are drawn from the run seed (fresh each run; --kata-seed reproduces them).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import KataTodo
from harness.testing import check_written, hidden_settings, seeded, wrote_nothing

SETTINGS = hidden_settings(25)


def launch(cuda, kernel, n, grid, block, reverse):
    """Per-block sums of `kernel` (NaN where it wrote nothing) and numpy's."""
    f = cuda.module("reduce.cu", backend="cpu").get_function(kernel)
    data = (
        np.random.default_rng(seeded(f"reduce {kernel} {n}")).standard_normal(n).astype(np.float32)
    )
    owner = (np.arange(n) // block) % grid
    want = np.bincount(owner, weights=data.astype(np.float64), minlength=grid)
    got = np.full(grid, np.nan, dtype=np.float32)
    f(
        cuda.In(data), cuda.InOut(got), np.int32(n), block=(block, 1, 1), grid=(grid, 1),
        shared=block * 4 if kernel == "reduce_shared" else 0,
        schedules=("reverse",) if reverse else ("forward",),
    )  # fmt: skip
    return got, want


def check(cuda, kernel, n, grid, block, reverse):
    got, want = launch(cuda, kernel, n, grid, block, reverse)
    # Nothing written: a stub, unless the kernel does write for a plain launch (then an empty
    # input, n = 0, is what it gets wrong).
    if wrote_nothing(got) and wrote_nothing(launch(cuda, kernel, 5000, 2, 256, False)[0]):
        raise KataTodo(f"{kernel} wrote nothing yet")
    np.testing.assert_allclose(
        got,
        want,
        rtol=1e-4,
        atol=1e-3,
        err_msg=f"{kernel}: the per-block sums are wrong for {n=} {grid=} {block=}",
    )


launches = dict(
    n=st.integers(0, 20_000),
    grid=st.integers(1, 9),
    block=st.sampled_from([64, 128, 256, 512, 1024]),
    reverse=st.booleans(),
)


@SETTINGS
@given(**launches)
def test_tree_any_launch(cuda, n, grid, block, reverse):
    """Catches: a tree that starts at a fixed s = 128 (right for 256-thread blocks), blocks with
    no elements that skip the store (their partial sum stays unset), and an int index that
    starts at threadIdx.x only."""
    check(cuda, "reduce_shared", n, grid, block, reverse)


@SETTINGS
@given(**launches)
def test_shuffle_any_launch(cuda, n, grid, block, reverse):
    """Catches: threads past n that return before the shuffles (`if (i >= n) return;` -- every
    public shuffle launch has n >= its number of threads; a lane that returned never reaches
    __shfl_down_sync, a BarrierDeadlock), and n = 0. (Reading warp_totals[lane] for every lane
    is caught on the gpu tier only: the cpu backend starts each launch with zeroed __shared__.)"""
    check(cuda, "reduce_shuffle", n, grid, block, reverse)


# --------------------------------------------------------------------------- structure
# A traced run of the cpu backend records every shared-memory access, atomic, barrier and warp
# shuffle. Parallel steps: the phases between barriers follow one another; in each the block
# takes as many steps as its busiest thread makes shared-memory accesses, or as many atomics
# as hit one address (they serialise). A tree over B partial sums: a few steps per level,
# log2(B) levels; one thread (or one atomic address) taking them in turn: B steps.
def traced(cuda, kernel, n, grid, block):
    f = cuda.module("reduce.cu", backend="cpu").get_function(kernel)
    data = (
        np.random.default_rng(seeded(f"reduce {kernel} {n}")).standard_normal(n).astype(np.float32)
    )
    owner = (np.arange(n) // block) % grid
    want = np.bincount(owner, weights=data.astype(np.float64), minlength=grid)
    got = np.full(grid, np.nan, dtype=np.float32)
    shared = block * 4 if kernel == "reduce_shared" else 0
    t = f.trace(
        cuda.In(data), cuda.InOut(got), np.int32(n), block=(block, 1, 1), grid=(grid, 1),
        shared=shared,
    )  # fmt: skip
    check_written(got, kernel)
    np.testing.assert_allclose(
        got,
        want,
        rtol=1e-4,
        atol=1e-3,
        err_msg=f"{kernel}: the per-block sums are wrong for {n=} {grid=} {block=}",
    )
    return t


@pytest.mark.kata_gate(
    "reduce_shared takes more parallel steps than a log2(blockDim.x)-level tree (about "
    "blockDim.x: the partial sums combined one at a time), on blocks of 256 and 1024 threads"
)
@pytest.mark.parametrize("block", [256, 1024])
def test_tree_takes_logarithmic_steps(cuda, block):
    """Catches: thread 0 summing buf[0..blockDim.x) after one barrier, and every thread
    atomicAdd-ing into one shared total. Both are right and race-free; both take blockDim.x
    steps where a tree takes a handful per level (26 for the reference at 256 threads)."""
    levels = block.bit_length() - 1
    t = traced(cuda, "reduce_shared", 4 * block, 2, block)
    limit = 4 * levels + 8
    assert t.steps <= limit, (
        f"reduce_shared with {block} threads: {t.steps} parallel steps over {t.barriers} "
        f"barriers; a tree takes at most {limit} ({levels} levels)\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "reduce_shuffle's busiest thread makes more warp shuffles than two 5-step shuffle trees "
    "(up to 32 per warp sum: the lanes pulled one at a time)"
)
def test_shuffle_takes_logarithmic_steps(cuda):
    """Catches: a warp sum that pulls lane 0, 1, ..., 31 in turn with __shfl_sync. It uses
    shuffles and no shared tree, which the public test checks, but takes 32 steps per warp
    sum instead of log2(32) = 5. The reference's busiest lane shuffles 10 times (two sums)."""
    t = traced(cuda, "reduce_shuffle", 4096, 2, 256)
    assert t.warp_ops <= 16, (
        f"reduce_shuffle: {t.warp_ops} warp collectives by one thread; two 5-step shuffle "
        f"trees (the warps, then the warp totals) take 10\n{t.report()}"
    )
