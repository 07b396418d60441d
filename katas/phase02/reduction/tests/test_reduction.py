"""Public tests of the reduction kata. Each group is one task of kata.toml.

The kernels run on a small CPU stand-in for CUDA (tests/cpu_cuda.h): blocks one after another,
the threads of a block as fibers, __shared__ shared between them, __syncthreads() a barrier and
warp shuffles warp-synchronous. Each launch runs with the threads in forward and reverse order.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from harness import KataTodo
from harness.cuda import static
from harness.native.cache import ArtefactCache

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_reduction_cpu_build", HERE / "cpu_build.py")
cpu_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu_build)


@pytest.fixture(scope="module")
def lib(kata):
    return cpu_build.ReduceLib(kata.source("reduce.cu"))


def block_sums(n: int, grid: int, block: int, data: np.ndarray) -> np.ndarray:
    """What each block of a grid-stride reduction sums: element i goes to block (i // block) % grid."""
    owner = (np.arange(n) // block) % grid
    return np.bincount(owner, weights=data.astype(np.float64), minlength=grid)


def reduce(lib, kernel: str, n: int, grid: int, block: int) -> None:
    data = np.random.default_rng(n + grid).standard_normal(n).astype(np.float32)
    want = block_sums(n, grid, block, data)
    for reverse in (False, True):
        got = lib.run(kernel, data, grid, block, reverse=reverse)
        if np.all(np.isnan(got)):
            raise KataTodo(f"{kernel} wrote nothing yet")
        order = "reverse" if reverse else "forward"
        assert np.allclose(got, want, rtol=1e-4, atol=1e-3), (
            f"{kernel}, n={n}, grid={grid}, block={block}, threads in {order} order: "
            f"block sums {got[:4]}..., want {want[:4]}..."
        )


# --------------------------------------------------------------------------- tree
def test_tree_one_block(lib):
    reduce(lib, "reduce_shared", 256, 1, 256)


def test_tree_grid_stride(lib):
    # 4 blocks of 128 threads for 100 000 elements: about 195 per thread before the tree.
    reduce(lib, "reduce_shared", 100_000, 4, 128)


@pytest.mark.parametrize("block", [64, 512, 1024])
def test_tree_block_sizes(lib, block):
    reduce(lib, "reduce_shared", 5000, 3, block)


def test_tree_fewer_elements_than_threads(lib):
    reduce(lib, "reduce_shared", 100, 2, 256)


# --------------------------------------------------------------------------- shuffle
def test_shuffle_one_block(lib):
    reduce(lib, "reduce_shuffle", 256, 1, 256)


def test_shuffle_grid_stride(lib):
    reduce(lib, "reduce_shuffle", 100_000, 4, 128)


@pytest.mark.parametrize("block", [64, 512, 1024])
def test_shuffle_block_sizes(lib, block):
    reduce(lib, "reduce_shuffle", 5000, 3, block)


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
