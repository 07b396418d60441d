"""Public tests of the matmul kata. Each group is one task of kata.toml.

The kernels run on a small CPU stand-in for CUDA (tests/cpu_cuda.h): blocks one after another,
the threads of a block as real threads, __shared__ shared between them and __syncthreads() a
real barrier. ptxas (nvcc) checks what the tiled kernel asks of the hardware.
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
_spec = importlib.util.spec_from_file_location("_matmul_cpu_build", HERE / "cpu_build.py")
cpu_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu_build)

SENTINEL = np.float32(-3.5)


@pytest.fixture(scope="module", params=[16, 32], ids=["tile16", "tile32"])
def lib(kata, request):
    return cpu_build.MatmulLib(kata.source("matmul.cu"), request.param)


def matmul(lib, kernel: str, M: int, N: int, K: int, seed: int = 0, reverse: bool = False) -> None:
    """Run `kernel` on random M x K and K x N matrices and compare C with numpy."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.full((M, N), SENTINEL, dtype=np.float32)
    lib.run(kernel, A, B, C, reverse=reverse)
    if np.all(C == SENTINEL):
        raise KataTodo(f"{kernel} wrote nothing yet")
    want = A.astype(np.float64) @ B.astype(np.float64)
    bad = np.argwhere(~np.isclose(C, want, rtol=1e-4, atol=1e-4 * np.sqrt(K)))
    assert bad.size == 0, (
        f"{kernel} (TILE={lib.tile}{', threads in reverse order' if reverse else ''}), M={M} N={N} K={K}: {len(bad)} of {M * N} elements wrong, "
        f"first C[{bad[0][0]}][{bad[0][1]}] = {C[tuple(bad[0])]}, want {want[tuple(bad[0])]:.5f}"
    )


# --------------------------------------------------------------------------- naive
def test_naive_square(lib):
    matmul(lib, "matmul_naive", 64, 64, 64)


def test_naive_rectangular(lib):
    matmul(lib, "matmul_naive", 32, 96, 48)


def test_naive_sizes_not_multiples_of_the_tile(lib):
    # The grid covers C with whole blocks: threads past row M or column N must not write.
    matmul(lib, "matmul_naive", 37, 50, 29)


# --------------------------------------------------------------------------- tiled
def test_tiled_square(lib):
    matmul(lib, "matmul_tiled", 64, 64, 64)


def test_tiled_rectangular(lib):
    matmul(lib, "matmul_tiled", 32, 96, 48)


def test_tiled_sizes_not_multiples_of_the_tile(lib):
    # Partial tiles in every dimension: load zeros outside A and B, and keep every thread
    # going to the barriers (an early return deadlocks the block).
    matmul(lib, "matmul_tiled", 37, 50, 29)


def test_tiled_threads_in_reverse_order(lib):
    # The same launch with each block's threads scheduled last to first: a kernel that is only
    # right in one order is missing a __syncthreads().
    matmul(lib, "matmul_tiled", 64, 48, 80, reverse=True)


@pytest.mark.needs("nvcc")
@pytest.mark.parametrize("tile", [16, 32])
def test_tiled_uses_shared_tiles_and_barriers(kata, tile):
    """ptxas: two TILE x TILE float tiles of static shared memory, and a barrier."""
    res = static.ptxas_resources(
        kata.source("matmul.cu"), "sm_75", [f"-DTILE={tile}"], cache=ArtefactCache()
    )
    r = res["matmul_tiled"]
    if r.shared_bytes == 0 and r.barriers == 0 and r.registers <= 8:
        raise KataTodo("matmul_tiled is empty")
    assert r.shared_bytes == 2 * tile * tile * 4, (
        f"TILE={tile}: ptxas reports {r.shared_bytes} bytes of shared memory; two tiles of "
        f"{tile} x {tile} floats are {2 * tile * tile * 4} (unused __shared__ arrays are removed)"
    )
    assert r.barriers >= 1, "no __syncthreads() in matmul_tiled"
