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
    reads the cpu backend's garbage (3.4e38): wrong sums; test_shuffle_reads_only_what_its_block_wrote
    says why.)"""
    check(cuda, "reduce_shuffle", n, grid, block, reverse)


# --------------------------------------------------------------------------- structure
# A traced run of the cpu backend records every global and shared-memory access, atomic,
# barrier and warp shuffle, and which thread made it. Each gate below measures one property of
# what the README asks, on a launch drawn from the run seed; a kernel whose sums are wrong on
# that launch is not this gate's business (the launch tests above say so), so the gate skips.
# Parallel steps: the phases between barriers follow one another; in each the block takes as
# many steps as its busiest thread makes shared-memory accesses, or as many atomics as hit one
# address (they serialise). A tree over B partial sums: a few steps per level, log2(B) levels;
# one thread (or one atomic address) taking them in turn: B steps.
def traced(cuda, kernel, n, grid, block):
    """The trace of one launch, or a skip when its per-block sums are wrong."""
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
    if not np.allclose(got, want, rtol=1e-4, atol=1e-3):
        pytest.skip(
            f"{kernel}'s per-block sums are wrong for {n=} {grid=} {block=} (the launch tests "
            "say so): this structure check measures right answers only"
        )
    return t


def random_launch(kata_rng, block=None):
    """n not a multiple of the block, several elements per thread, a grid of 2-5 blocks."""
    block = block or int(kata_rng.choice([64, 128, 256, 512]))
    grid = int(kata_rng.integers(2, 6))
    n = int(kata_rng.integers(3, 9)) * block * grid + int(kata_rng.integers(1, block))
    return n, grid, block


def check_loads_spread(t, kernel, n, grid, block):
    """Every thread of the grid loads its own elements: at most ceil(n / threads) each."""
    threads = grid * block
    most = -(-n // threads)
    busiest = t.most_per_thread["global load"]
    assert busiest <= most, (
        f"{kernel}, {n=} {grid=} {block=}: one thread makes {busiest} global loads; a "
        f"grid-stride loop over the {threads} threads loads at most ceil(n / threads) = {most} "
        f"per thread ({t.active_threads['global load']} threads load at all)\n{t.report()}"
    )


def check_loads_coalesced(t, kernel, n, grid, block):
    """A warp's loads of in[] are consecutive floats: 4 sectors per 32 lanes, 5 where the
    cpu backend's buffer does not start on a sector (80 %); 32 lanes 4 x run bytes apart
    fetch a sector each (12.5 %)."""
    assert t.load_efficiency >= 0.6, (
        f"{kernel}, {n=} {grid=} {block=}: {t.load_efficiency:.0%} of the bytes its global "
        "loads fetch are used (a grid-stride loop's warp reads 32 consecutive floats: 80-100 %)"
        f"\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "reduce_shared's global loads are not spread over the grid's threads (a thread loads more "
    "than ceil(n / threads) elements), on a random n and grid"
)
def test_tree_every_thread_loads_its_share(cuda, kata_rng):
    """Catches: thread 0 of each block reading the block's share serially (with or without a
    tree over zeros after it): right sums, 1/blockDim.x of the threads at work."""
    n, grid, block = random_launch(kata_rng)
    check_loads_spread(
        traced(cuda, "reduce_shared", n, grid, block), "reduce_shared", n, grid, block
    )


@pytest.mark.kata_gate(
    "reduce_shared's global loads are not coalesced (under 60 % of the fetched bytes used), "
    "on a random n and grid"
)
def test_tree_loads_are_coalesced(cuda, kata_rng):
    """Catches: each thread summing a contiguous run of its block's share (lanes 4 x run bytes
    apart: 32 sectors per warp load instead of 4)."""
    n, grid, block = random_launch(kata_rng)
    t = traced(cuda, "reduce_shared", n, grid, block)
    check_loads_coalesced(t, "reduce_shared", n, grid, block)


@pytest.mark.kata_gate(
    "reduce_shared's tree is not log2(blockDim.x) levels in shared memory (every thread's "
    "partial sum stored in buf, a __syncthreads() per level), on blocks of 256 and 1024 threads"
)
@pytest.mark.parametrize("block", [256, 1024])
def test_tree_has_a_level_per_halving(cuda, block):
    """Catches: warp shuffles instead of the shared-memory tree (buf holds the warp totals
    only, one barrier), and a tree that stops at 8 values for thread 0 to add (its steps stay
    within the steps gate's bound, its barriers do not)."""
    levels = block.bit_length() - 1
    t = traced(cuda, "reduce_shared", 4 * block + 3, 2, block)
    storing = t.active_threads["shared store"]
    assert storing == 2 * block and t.barriers >= levels, (
        f"reduce_shared with {block} threads, 2 blocks: {storing} threads store to shared "
        f"memory (want all {2 * block}) and a block passes {t.barriers} barriers (a tree of "
        f"{levels} levels passes at least {levels})\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "reduce_shared's tree spreads a level's active threads over more warps than sequential "
    "addressing (level s on threads 0..s-1: ceil(s / 32) warps), on blocks of 256 and 1024 "
    "threads"
)
@pytest.mark.parametrize("block", [256, 1024])
def test_tree_keeps_active_threads_in_whole_warps(cuda, block):
    """Catches: interleaved addressing (t % (2s) == 0 adds buf[t + s]): a level's s active
    threads lie 2s apart, one or two in every warp, so every warp issues the level's shared
    loads and stores half-empty (divergence) where sequential addressing retires whole warps.
    Counted as shared-memory warp requests per block against the sequential tree's: one store
    per warp, up to 4 requests per active warp and level, and a few for the end."""
    grid = 2
    t = traced(cuda, "reduce_shared", 4 * block + 5, grid, block)
    requests = sum(s.requests for s in t.shared_lines) / grid
    levels = [block >> k for k in range(1, block.bit_length())]
    bound = block // 32 + sum(4 * -(-s // 32) for s in levels) + 4
    assert requests <= bound, (
        f"reduce_shared with {block} threads: {requests:g} shared-memory warp requests per "
        f"block; sequential addressing (level s on threads 0..s-1, whole warps idle) needs at "
        f"most {bound}\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "reduce_shared's shared-memory accesses have bank conflicts (a warp reads several words of "
    "one bank), on a random block size"
)
def test_tree_is_free_of_bank_conflicts(cuda, kata_rng):
    """Catches: the strided index (buf[2st] += buf[2st + s], active threads contiguous): lanes
    2s words apart, up to 32 in one bank. Sequential addressing puts consecutive threads on
    consecutive banks at every level."""
    n, grid, block = random_launch(kata_rng, int(kata_rng.choice([128, 256, 512, 1024])))
    t = traced(cuda, "reduce_shared", n, grid, block)
    assert t.worst_conflict <= 1, (
        f"reduce_shared, {n=} {grid=} {block=}: a warp request needs {t.worst_conflict} "
        f"passes through the banks, {t.bank_replays} replays in all (sequential addressing "
        f"needs 1)\n{t.report()}"
    )


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
    "reduce_shuffle's global loads are not spread over the grid's threads (a thread loads "
    "more than ceil(n / threads) elements), on a random n and grid"
)
def test_shuffle_every_thread_loads_its_share(cuda, kata_rng):
    """Catches: thread 0 of each block reading the block's share serially (one dummy shuffle
    satisfies ptxas' count)."""
    n, grid, block = random_launch(kata_rng)
    t = traced(cuda, "reduce_shuffle", n, grid, block)
    check_loads_spread(t, "reduce_shuffle", n, grid, block)


@pytest.mark.kata_gate(
    "reduce_shuffle's global loads are not coalesced (under 60 % of the fetched bytes used), "
    "on a random n and grid"
)
def test_shuffle_loads_are_coalesced(cuda, kata_rng):
    """Catches: contiguous per-thread runs instead of the grid-stride loop."""
    n, grid, block = random_launch(kata_rng)
    t = traced(cuda, "reduce_shuffle", n, grid, block)
    check_loads_coalesced(t, "reduce_shuffle", n, grid, block)


@pytest.mark.kata_gate(
    "reduce_shuffle's busiest thread does not make two 5-step shuffle trees (the warps, then "
    "the warp totals: 10 warp shuffles, not up to 32 per warp sum), with 1024-thread blocks"
)
def test_shuffle_takes_logarithmic_steps(cuda):
    """Catches: a warp sum that pulls lane 0, 1, ..., 31 in turn with __shfl_sync (32 steps
    per warp sum instead of log2(32) = 5), and a kernel with a token shuffle that combines its
    values some other way. The reference's busiest lane shuffles 10 times (two sums)."""
    t = traced(cuda, "reduce_shuffle", 4 * 1024 + 5, 2, 1024)
    assert 10 <= t.warp_ops <= 16, (
        f"reduce_shuffle: {t.warp_ops} warp collectives by one thread; two 5-step shuffle "
        f"trees (the warps, then the warp totals) take 10\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "reduce_shuffle combines a block's partial sums in more than 4 parallel steps of shared "
    "memory or same-address atomics (the warp totals are written once and read once), with "
    "1024-thread blocks"
)
def test_shuffle_combines_warp_totals_in_two_steps(cuda):
    """Catches: thread 0 adding the 32 warp totals one by one, and atomicAdds into
    warp_totals (32 per address, serialised) instead of shuffles. The reference: 2 steps."""
    t = traced(cuda, "reduce_shuffle", 4 * 1024 + 5, 2, 1024)
    assert t.steps <= 4, (
        f"reduce_shuffle with 1024 threads: {t.steps} parallel steps of shared memory and "
        f"atomics (lane 0 of each warp stores its total, warp 0 loads them: 2)\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "reduce_shuffle reads shared memory that no thread of its block wrote (garbage on a GPU), "
    "on a random block of fewer than 32 warps"
)
def test_shuffle_reads_only_what_its_block_wrote(cuda, kata_rng):
    """Catches: warp 0 loading warp_totals[lane] for every lane, without lane < blockDim.x / 32
    (0 for the others): a GPU's warp_totals holds anything (the cpu backend's 3.4e38s, so the
    sums are wrong too and this gate skips; it counts the reads should a kernel mask them)."""
    n, grid, block = random_launch(kata_rng)
    t = traced(cuda, "reduce_shuffle", n, grid, block)
    assert t.uninitialised_shared == 0, (
        f"reduce_shuffle, {n=} {grid=} {block=}: {t.uninitialised_shared} shared-memory loads "
        f"read a word no thread of the block had written ({block // 32} warp totals per "
        f"block)\n{t.report()}"
    )
