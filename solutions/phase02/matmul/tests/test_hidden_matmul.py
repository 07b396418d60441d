"""Hidden tests of the matmul kata: random shapes under both thread orders, and the edges.

Examples are derandomized, so a grade never depends on luck.
"""

from __future__ import annotations

import importlib.util

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


@pytest.fixture(scope="module")
def cpu_build(kata):
    spec = importlib.util.spec_from_file_location(
        "_matmul_cpu_build_hidden", kata.dir / "tests" / "cpu_build.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=[16, 32], ids=["tile16", "tile32"])
def lib(kata, cpu_build, request):
    return cpu_build.MatmulLib(kata.source("matmul.cu"), request.param)


def check(lib, kernel, M, N, K, reverse, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    lib.run(kernel, A, B, C, reverse=reverse)
    if np.all(np.isnan(C)):
        raise KataTodo(f"{kernel} wrote nothing yet")
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4 * np.sqrt(K))


shape = st.tuples(st.integers(1, 70), st.integers(1, 70), st.integers(1, 70))


@SETTINGS
@given(mnk=shape, reverse=st.booleans())
def test_tiled_random_shapes(lib, mnk, reverse):
    """Catches: zero-filling only one of the two tiles, guarding the loads with the wrong
    bound (M for B's rows instead of K), and a tile loop `t < K / TILE` that drops the last
    partial tile -- the public shapes have K = 29, 48, 64, 80 only."""
    check(lib, "matmul_tiled", *mnk, reverse)


@pytest.mark.parametrize(
    "mnk", [(1, 1, 1), (1, 70, 3), (70, 1, 2), (5, 7, 1), (17, 33, 65), (33, 17, 100)]
)
def test_tiled_thin_and_tiny(lib, mnk):
    """K smaller than a tile, single rows and columns. Catches: a tile loop that runs
    ceil(K / TILE) - 1 times, and indexing A as A[row * N + k] (right only when K == N)."""
    check(lib, "matmul_tiled", *mnk, reverse=False)
    check(lib, "matmul_tiled", *mnk, reverse=True)


@SETTINGS
@given(mnk=shape)
def test_naive_random_shapes(lib, mnk):
    """Catches: swapping M and N in the bounds check (right for square C only), and B indexed
    as B[k * K + col]."""
    check(lib, "matmul_naive", *mnk, reverse=False)
