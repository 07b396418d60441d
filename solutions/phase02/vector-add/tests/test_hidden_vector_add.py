"""Hidden tests of the vector-add kata: shortcuts that pass the public tests.

Examples are derandomized, so a grade never depends on luck.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
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
