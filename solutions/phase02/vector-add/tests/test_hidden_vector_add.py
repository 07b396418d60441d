"""Hidden tests of the vector-add kata: shortcuts that pass the public tests.

Examples are derandomized, so a grade never depends on luck.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness import KataTodo

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a wrong answer fails fast
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


# --------------------------------------------------------------------------- launch
@pytest.fixture(scope="module")
def launch(kata):
    return kata.module("launch")


@SETTINGS
@given(n=st.integers(0, 2**31 - 1), block=st.integers(1, 1024))
def test_launch_grid_size_exact(launch, n, block):
    """Catches: n // block + 1 (one block too many when n is a multiple of block, which the
    public examples avoid) and n // block (one too few otherwise)."""
    assert launch.grid_size(n, block) == -(-n // block)


def test_launch_grid_size_exact_multiples_and_the_grid_limit(launch):
    """Catches: n // block + 1 on exact multiples, and an off-by-one at the gridDim.x limit
    (the largest legal grid is 2**31 - 1 blocks, one more is an error)."""
    assert launch.grid_size(1024, 256) == 4
    assert launch.grid_size((2**31 - 1) * 1024, 1024) == 2**31 - 1
    with pytest.raises(ValueError):
        launch.grid_size((2**31 - 1) * 1024 + 1, 1024)


def test_launch_rejects_bool_and_reports_values(launch):
    """Catches: accepting True as n (bool is an int in Python) and messages without the value."""
    with pytest.raises(ValueError):
        launch.grid_size(True, 256)
    with pytest.raises(ValueError, match="2048"):
        launch.launch_config(100, 2048)


@SETTINGS
@given(
    n=st.integers(1, 10**9),
    block=st.sampled_from([32, 64, 100, 128, 256, 512, 1024]),
    device=st.sampled_from(["T4", "H200"]),
)
def test_launch_config_never_exceeds_the_machine(launch, n, block, device):
    """Catches: capping at the SM count alone (one block per SM), or not capping at all."""
    dev = launch.DEVICES[device]
    grid, got_block = launch.launch_config(n, block, device)
    assert got_block == block
    assert grid == min(-(-n // block), dev.sms * max(1, dev.max_threads_per_sm // block))


# --------------------------------------------------------------------------- kernel
@pytest.fixture(scope="module")
def vadd(kata):
    from harness.cuda import static
    from harness.native.cache import ArtefactCache
    from harness.ptx import load_module

    module = load_module(
        static.compile_ptx(kata.source("vector_add.cu"), "sm_75", cache=ArtefactCache())
    )
    readable = static.demangle(module.kernels)
    names = {full.split("(")[0].split()[-1]: name for name, full in readable.items()}

    def launch(kernel, args, grid, block):
        module.launch(names[kernel], args, (grid, 1, 1), (block, 1, 1), max_steps=10**6)

    return launch


def test_kernel_saxpy_many_blocks(vadd):
    """Catches: a stride of blockDim.x instead of blockDim.x * gridDim.x. vector_add still gives
    the right c (every block redoes the tail of the array, writing the same values), but saxpy
    updates y in place, so each extra visit adds alpha * x again."""
    n = 20_000
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    out = y.copy()
    vadd("saxpy", [np.float32(-1.5), x, out, np.int32(n)], 16, 128)
    if np.array_equal(out, y):
        raise KataTodo("saxpy left y unchanged")
    np.testing.assert_allclose(out, np.float32(-1.5) * x + y, rtol=1e-6, atol=1e-6)


@SETTINGS
@given(
    n=st.integers(0, 5000),
    block=st.sampled_from([1, 32, 96, 100, 256, 1024]),
    grid=st.integers(1, 40),
)
def test_kernel_any_grid_any_n(vadd, n, block, grid):
    """Any grid covers any n, also with block sizes that are not a multiple of 32. Catches: an
    index from threadIdx.x alone, and loops that assume blockDim.x == 256."""
    size = max(n, 1)
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(size, dtype=np.float32), rng.standard_normal(size, dtype=np.float32)
    c = np.full(size, np.nan, dtype=np.float32)
    vadd("vector_add", [a, b, c, np.int32(n)], grid, block)
    if n > 0 and np.all(np.isnan(c)):
        raise KataTodo("vector_add wrote nothing yet")
    np.testing.assert_array_equal(c[:n], (a + b)[:n])
