"""Public tests of the matmul kata. Each group is one task of kata.toml.

naive, tiled: matmul.cu on harness.cuda's cpu backend (the `cuda` fixture): blocks one after
another, the threads of a block as fibers, `__shared__` one copy per block. `cuda.check_races`
runs a launch under several thread schedules: a result that depends on the order is a missing
`__syncthreads()`. ptxas (nvcc) checks what the tiled kernel asks of the hardware.
gpu: the same kernels on the device (tests/test_matmul_gpu.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness import KataTodo
from harness.cuda import static
from harness.native.cache import ArtefactCache
from harness.testing import check_written

SENTINEL = np.float32(-3.5)


def kernel(cuda, tile: int, name: str):
    """`name` of matmul.cu built with -DTILE=tile on the cpu backend (races need it)."""
    return cuda.module("matmul.cu", options=[f"-DTILE={tile}"], backend="cpu").get_function(name)


def launch(cuda, f, tile: int, A, B, C, check_races: bool = False) -> None:
    """C = A @ B with block (TILE, TILE) and a grid covering C; C (filled beforehand) is updated."""
    (M, K), (_, N) = A.shape, B.shape
    args = (cuda.In(A), cuda.In(B), cuda.InOut(C), np.int32(M), np.int32(N), np.int32(K))
    dims = {"block": (tile, tile, 1), "grid": ((N + tile - 1) // tile, (M + tile - 1) // tile)}
    if check_races:
        cuda.check_races(f, *args, **dims)
    else:
        f(*args, **dims)


def matmul(cuda, tile: int, name: str, M: int, N: int, K: int, check_races: bool = False) -> None:
    """Run `name` on random M x K and K x N matrices and compare C with numpy."""
    rng = np.random.default_rng(M * N + K)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.full((M, N), SENTINEL, dtype=np.float32)
    launch(cuda, kernel(cuda, tile, name), tile, A, B, C, check_races)
    check_written(C, name, SENTINEL)
    want = A.astype(np.float64) @ B.astype(np.float64)
    bad = np.argwhere(~np.isclose(C, want, rtol=1e-4, atol=1e-4 * np.sqrt(K)))
    assert bad.size == 0, (
        f"{name} (TILE={tile}), M={M} N={N} K={K}: {len(bad)} of {M * N} elements wrong, "
        f"first C[{bad[0][0]}][{bad[0][1]}] = {C[tuple(bad[0])]}, want {want[tuple(bad[0])]:.5f}"
    )


# --------------------------------------------------------------------------- naive
def test_naive_square(cuda, tile):
    matmul(cuda, tile, "matmul_naive", 64, 64, 64)


def test_naive_rectangular(cuda, tile):
    matmul(cuda, tile, "matmul_naive", 32, 96, 48)


def test_naive_sizes_not_multiples_of_the_tile(cuda, tile):
    # The grid covers C with whole blocks: threads past row M or column N must not write (on
    # the cpu backend an access past the end of a matrix is an OutOfBounds error).
    matmul(cuda, tile, "matmul_naive", 37, 50, 29)


# --------------------------------------------------------------------------- tiled
def test_tiled_square(cuda, tile):
    matmul(cuda, tile, "matmul_tiled", 64, 64, 64)


def test_tiled_rectangular(cuda, tile):
    matmul(cuda, tile, "matmul_tiled", 32, 96, 48)


def test_tiled_sizes_not_multiples_of_the_tile(cuda, tile):
    # Partial tiles in every dimension: load zeros outside A and B, and keep every thread
    # going to the barriers (an early return is a BarrierDeadlock).
    matmul(cuda, tile, "matmul_tiled", 37, 50, 29)


def test_tiled_is_race_free(cuda, tile):
    # The same launch under the forward, reverse, random and preempt schedules: a kernel whose
    # result depends on the order of the threads is missing a __syncthreads().
    matmul(cuda, tile, "matmul_tiled", 64, 48, 80, check_races=True)


@pytest.mark.needs("nvcc")
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
