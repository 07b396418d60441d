"""Hidden tests of the matmul kata: random shapes under two thread schedules, and the edges.

Examples and matrices are drawn from the run seed (fresh each run; --kata-seed reproduces
them); the thin and tiny shapes are fixed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.testing import check_written, hidden_settings, seeded

SETTINGS = hidden_settings(15)


def check(cuda, tile, name, M, N, K, schedules=("forward", "reverse")):
    f = cuda.module("matmul.cu", options=[f"-DTILE={tile}"], backend="cpu").get_function(name)
    rng = np.random.default_rng(seeded(f"matmul {name} {tile} {M} {N} {K}"))
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile)
    args = (cuda.In(A), cuda.In(B), cuda.InOut(C), np.int32(M), np.int32(N), np.int32(K))
    f(*args, block=(tile, tile, 1), grid=grid, schedules=schedules)
    check_written(C, name)
    np.testing.assert_allclose(
        C,
        A.astype(np.float64) @ B,
        rtol=1e-4,
        atol=1e-4 * np.sqrt(K),
        err_msg=f"{name} (TILE={tile}): C is not A @ B for {M=} {N=} {K=}",
    )


shape = st.tuples(st.integers(1, 70), st.integers(1, 70), st.integers(1, 70))


@SETTINGS
@given(mnk=shape)
def test_tiled_random_shapes(cuda, tile, mnk):
    """Catches: zero-filling only one of the two tiles, guarding the loads with the wrong
    bound (M for B's rows instead of K), and a tile loop `t < K / TILE` that drops the last
    partial tile -- the public shapes have K = 29, 48, 64, 80 only."""
    check(cuda, tile, "matmul_tiled", *mnk)


@pytest.mark.parametrize(
    "mnk", [(1, 1, 1), (1, 70, 3), (70, 1, 2), (5, 7, 1), (17, 33, 65), (33, 17, 100)]
)
def test_tiled_thin_and_tiny(cuda, tile, mnk):
    """K smaller than a tile, single rows and columns. Catches: a tile loop that runs
    ceil(K / TILE) - 1 times, and indexing A as A[row * N + k] (right only when K == N)."""
    check(cuda, tile, "matmul_tiled", *mnk)


@SETTINGS
@given(mnk=shape)
def test_naive_random_shapes(cuda, tile, mnk):
    """Catches: swapping M and N in the bounds check (right for square C only), and B indexed
    as B[k * K + col]."""
    check(cuda, tile, "matmul_naive", *mnk, schedules=("forward",))


@pytest.mark.kata_gate(
    "matmul_tiled makes more than 2 global loads per thread per tile step: the inner loop "
    "reads A and B from global memory, not from the shared tiles"
)
def test_tiled_inner_loop_reads_shared_memory(cuda, tile):
    """Catches: shared tiles that are filled (so ptxas counts them, with barriers) while the
    multiply-adds still load A and B from global memory, and the naive kernel renamed. The
    traced run counts every lane's global loads: a tiled kernel loads each element of its
    block's strips once per tile step, 2 loads per thread per step, instead of 2 per
    multiply-add."""
    M, N, K = 32, 36, 40  # small: every lane's loads are traced (1024-thread blocks at 32)
    f = cuda.module("matmul.cu", options=[f"-DTILE={tile}"], backend="cpu").get_function(
        "matmul_tiled"
    )
    rng = np.random.default_rng(seeded("matmul tiled traffic"))
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile)
    args = (cuda.In(A), cuda.In(B), cuda.InOut(C), np.int32(M), np.int32(N), np.int32(K))
    t = f.trace(*args, block=(tile, tile, 1), grid=grid)
    check_written(C, "matmul_tiled")
    np.testing.assert_allclose(
        C,
        A.astype(np.float64) @ B,
        rtol=1e-4,
        atol=1e-4 * np.sqrt(K),
        err_msg=f"matmul_tiled (TILE={tile}): C is not A @ B for {M=} {N=} {K=}",
    )
    threads = grid[0] * grid[1] * tile * tile
    steps = -(-K // tile)
    limit = 2 * threads * steps
    assert t.loads["global"] <= limit, (
        f"TILE={tile}: {t.loads['global']} global loads for {M}x{N}x{K}; a tiled kernel makes at "
        f"most {limit} (2 per thread per tile step) and reads the rest from shared memory "
        f"({t.loads['shared']} shared loads here)\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "matmul_naive's global loads are not coalesced: a warp's loads of A or B touch more than "
    "4 sectors per request (the lanes walk down a column)"
)
def test_naive_loads_are_coalesced(cuda, tile):
    """Catches: row from threadIdx.x and col from threadIdx.y. Every element of C is still
    computed once, but a warp's A loads are K floats apart: 32 sectors per request. With
    threadIdx.x on the column, B's loads are consecutive floats and A's one broadcast address:
    at most 4 sectors per warp request (TILE=16: a warp spans two rows of the block)."""
    M, N, K = 32, 36, 20
    f = cuda.module("matmul.cu", options=[f"-DTILE={tile}"], backend="cpu").get_function(
        "matmul_naive"
    )
    rng = np.random.default_rng(seeded("matmul naive coalescing"))
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile)
    args = (cuda.In(A), cuda.In(B), cuda.InOut(C), np.int32(M), np.int32(N), np.int32(K))
    t = f.trace(*args, block=(tile, tile, 1), grid=grid)
    check_written(C, "matmul_naive")
    np.testing.assert_allclose(
        C,
        A.astype(np.float64) @ B,
        rtol=1e-4,
        atol=1e-4 * np.sqrt(K),
        err_msg=f"matmul_naive (TILE={tile}): C is not A @ B for {M=} {N=} {K=}",
    )
    loads = [s for s in t.lines if s.kind == "load"]
    worst = max((s.sectors_per_request for s in loads), default=0.0)
    assert worst <= 4.0, (
        f"TILE={tile}: {worst:.1f} sectors per warp load on average (at most 4 when a warp "
        f"reads consecutive floats of B and one address of A)\n{t.report()}"
    )
