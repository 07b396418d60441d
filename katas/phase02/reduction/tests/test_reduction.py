"""Public tests of the reduction kata. Each group is one task of kata.toml.

tree, shuffle: reduce.cu on harness.cuda's cpu backend (the `cuda` fixture): blocks one after
another, the threads of a block as fibers, `__shared__` one copy per block, `__syncthreads()` a
barrier and warp shuffles warp-synchronous. Every launch runs under two thread schedules
(forward and reverse), and `cuda.check_races` tries all of them once per kernel: a result that
depends on the order is a missing barrier.
gpu: the same kernels on the device (tests/test_reduction_gpu.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness import KataTodo
from harness.cuda import static
from harness.native.cache import ArtefactCache
from harness.testing import check_written


def block_sums(n: int, grid: int, block: int, data: np.ndarray) -> np.ndarray:
    """What each block of a grid-stride reduction sums: element i goes to block (i // block) % grid."""
    owner = (np.arange(n) // block) % grid
    return np.bincount(owner, weights=data.astype(np.float64), minlength=grid)


def reduce(cuda, kernel: str, n: int, grid: int, block: int, races: bool = False) -> None:
    """Launch `kernel` (forward and reverse schedules; all of them with races=True) and compare
    its per-block sums with numpy's."""
    f = cuda.module("reduce.cu", backend="cpu").get_function(kernel)
    data = np.random.default_rng(n + grid).standard_normal(n).astype(np.float32)
    want = block_sums(n, grid, block, data)
    got = np.full(grid, np.nan, dtype=np.float32)
    args = (cuda.In(data), cuda.InOut(got), np.int32(n))
    dims = {"block": (block, 1, 1), "grid": (grid, 1)}
    shared = block * 4 if kernel == "reduce_shared" else 0  # dynamic: one float per thread
    if races:
        cuda.check_races(f, *args, **dims, shared=shared)
    else:
        f(*args, **dims, shared=shared, schedules=("forward", "reverse"))
    check_written(got, kernel)
    assert np.allclose(got, want, rtol=1e-4, atol=1e-3), (
        f"{kernel}, n={n}, grid={grid}, block={block}: block sums {got[:4]}..., want {want[:4]}..."
    )


# --------------------------------------------------------------------------- tree
def test_tree_one_block(cuda):
    reduce(cuda, "reduce_shared", 256, 1, 256)


def test_tree_grid_stride(cuda):
    # 4 blocks of 128 threads for 100 000 elements: about 195 per thread before the tree.
    reduce(cuda, "reduce_shared", 100_000, 4, 128)


@pytest.mark.parametrize("block", [64, 512, 1024])
def test_tree_block_sizes(cuda, block):
    reduce(cuda, "reduce_shared", 5000, 3, block)


def test_tree_fewer_elements_than_threads(cuda):
    reduce(cuda, "reduce_shared", 100, 2, 256)


def test_tree_is_race_free(cuda):
    # Forward, reverse, random and preempt schedules: a step that reads buf[t + s] before the
    # thread that owns it has written it shows up as a RaceDetected naming reduce_shared.
    reduce(cuda, "reduce_shared", 3000, 2, 256, races=True)


# --------------------------------------------------------------------------- shuffle
def test_shuffle_one_block(cuda):
    reduce(cuda, "reduce_shuffle", 256, 1, 256)


def test_shuffle_grid_stride(cuda):
    reduce(cuda, "reduce_shuffle", 100_000, 4, 128)


@pytest.mark.parametrize("block", [64, 512, 1024])
def test_shuffle_block_sizes(cuda, block):
    reduce(cuda, "reduce_shuffle", 5000, 3, block)


def test_shuffle_is_race_free(cuda):
    # The barrier between writing warp_totals and warp 0 reading them is the one that matters.
    reduce(cuda, "reduce_shuffle", 3000, 2, 256, races=True)


@pytest.mark.needs("nvcc")
def test_shuffle_uses_shuffles_not_a_tree(kata):
    """ptxas/SASS: reduce_shuffle keeps only the 32 warp totals in shared memory and shuffles."""
    source = kata.source("reduce.cu")
    cache = ArtefactCache()
    res = static.ptxas_resources(source, "sm_75", cache=cache)["reduce_shuffle"]
    ptx_text = static.compile_ptx(source, "sm_75", cache=cache)
    ptx = static.ptx_instruction_counts(ptx_text, by="base")["reduce_shuffle"]
    if res.barriers == 0 and ptx.get("shfl", 0) == 0:
        raise KataTodo("reduce_shuffle is empty")
    assert ptx.get("shfl", 0) >= 1, "no warp shuffle (__shfl_down_sync) in reduce_shuffle"
    assert res.shared_bytes <= 32 * 4, f"{res.shared_bytes} bytes of shared memory: a tree?"
