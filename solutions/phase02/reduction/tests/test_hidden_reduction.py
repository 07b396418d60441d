"""Hidden tests of the reduction kata: any n, grid and block size, in both thread orders.

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
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a wrong answer fails fast
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def lib(kata):
    spec = importlib.util.spec_from_file_location(
        "_reduction_cpu_build_hidden", kata.dir / "tests" / "cpu_build.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ReduceLib(kata.source("reduce.cu"))


def check(lib, kernel, n, grid, block, reverse):
    data = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    owner = (np.arange(n) // block) % grid
    want = np.bincount(owner, weights=data.astype(np.float64), minlength=grid)
    got = lib.run(kernel, data, grid, block, reverse=reverse)
    if np.all(np.isnan(got)):
        raise KataTodo(f"{kernel} wrote nothing yet")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=f"{n=} {grid=} {block=}")


launches = dict(
    n=st.integers(0, 20_000),
    grid=st.integers(1, 9),
    block=st.sampled_from([64, 128, 256, 512, 1024]),
    reverse=st.booleans(),
)


@SETTINGS
@given(**launches)
def test_tree_any_launch(lib, n, grid, block, reverse):
    """Catches: a tree that starts at a fixed s = 128 (right for 256-thread blocks), blocks with
    no elements that skip the store (their partial sum stays unset), and an int index that
    starts at threadIdx.x only."""
    check(lib, "reduce_shared", n, grid, block, reverse)


@SETTINGS
@given(**launches)
def test_shuffle_any_launch(lib, n, grid, block, reverse):
    """Catches: warp 0 reading warp_totals[lane] for every lane although only blockDim.x / 32
    were written (stale totals from an earlier block or launch), and a fixed 8 warps."""
    check(lib, "reduce_shuffle", n, grid, block, reverse)


def test_shuffle_after_a_bigger_launch(lib):
    """A 1024-thread launch leaves 32 warp totals behind; a 64-thread launch must then use only
    its own 2. Catches the unzeroed-lanes shortcut deterministically."""
    check(lib, "reduce_shuffle", 50_000, 2, 1024, reverse=False)
    check(lib, "reduce_shuffle", 3000, 3, 64, reverse=False)
