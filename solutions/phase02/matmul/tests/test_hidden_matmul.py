"""Hidden tests of the matmul kata: random shapes under two thread schedules, and the edges.

Examples are derandomized, so a grade never depends on luck.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness import KataTodo

SETTINGS = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a wrong answer fails fast
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module", params=[16, 32], ids=["tile16", "tile32"])
def tile(request):
    return request.param


def check(cuda, tile, name, M, N, K, schedules=("forward", "reverse")):
    f = cuda.module("matmul.cu", options=[f"-DTILE={tile}"], backend="cpu").get_function(name)
    rng = np.random.default_rng(M + 100 * N + 10_000 * K)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile)
    args = (cuda.In(A), cuda.In(B), cuda.InOut(C), np.int32(M), np.int32(N), np.int32(K))
    f(*args, block=(tile, tile, 1), grid=grid, schedules=schedules)
    if np.all(np.isnan(C)):
        raise KataTodo(f"{name} wrote nothing yet")
    np.testing.assert_allclose(
        C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4 * np.sqrt(K), err_msg=f"{M=} {N=} {K=}"
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
