"""Hidden tests of the transpose kata: shortcuts that pass the public tests.

Examples are derandomized, so a grade never depends on luck.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness import KataTodo

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a wrong answer fails fast
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def sectors(kata):
    return kata.module("sectors")


@pytest.fixture(scope="module")
def banks(kata):
    return kata.module("banks")


lane_address = st.one_of(st.none(), st.integers(0, 4096))


# --------------------------------------------------------------------------- sectors
@SETTINGS
@given(
    addrs=st.lists(lane_address, min_size=32, max_size=32),
    size=st.sampled_from([1, 2, 4, 8, 16]),
)
def test_sectors_any_warp_access(sectors, addrs, size):
    """Unaligned addresses and every access size. Catches: counting a // 32 per lane (an
    8-byte load at byte 28 touches sectors 0 and 1), and counting the span max - min instead of
    the sectors actually touched."""
    live = [a for a in addrs if a is not None]
    touched = {b // 32 for a in live for b in range(a, a + size)}
    assert sectors.sectors(addrs, size) == len(touched)
    useful = len({b for a in live for b in range(a, a + size)})
    want = useful / (32 * len(touched)) if touched else 1.0
    assert sectors.efficiency(addrs, size) == pytest.approx(want)


def test_sectors_straddling_loads(sectors):
    """Catches the a // 32 shortcut on the smallest case: one lane, one straddling load."""
    assert sectors.sectors([28], size=8) == 2
    assert sectors.sectors([24], size=8) == 1
    assert sectors.efficiency([28], size=8) == pytest.approx(8 / 64)


# --------------------------------------------------------------------------- banks
@SETTINGS
@given(
    addrs=st.lists(
        st.one_of(st.none(), st.integers(0, 1024).map(lambda w: 4 * w)), min_size=32, max_size=32
    )
)
def test_banks_any_warp_access(banks, addrs):
    """Arbitrary patterns. Catches: a formula for strided access (32 // gcd(stride, 32)) instead
    of counting, and counting lanes per bank instead of distinct words per bank."""
    words: dict[int, set[int]] = defaultdict(set)
    for a in addrs:
        if a is not None:
            words[(a // 4) % 32].add(a // 4)
    assert banks.conflict_degree(addrs) == max((len(w) for w in words.values()), default=0)


@pytest.mark.parametrize("width", [1, 2, 3, 8, 31, 32, 33, 48, 63, 64, 65, 96, 97])
def test_banks_column_reads_of_any_width(banks, width):
    """Catches: column_read_degree special-casing 32 and 33."""
    from math import gcd

    assert banks.column_read_degree(width) == gcd(width, 32)


# --------------------------------------------------------------------------- kernels
@pytest.fixture(scope="module")
def lib(kata):
    name = "_transpose_cpu_build_hidden"
    spec = importlib.util.spec_from_file_location(name, kata.dir / "tests" / "cpu_build.py")
    module = sys.modules.setdefault(name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module, module.TransposeLib(kata.source("transpose.cu"))


def check(lib, kernel, rows, cols, reverse):
    build, transposer = lib
    src = build.aligned((rows, cols))
    src[...] = np.random.default_rng(rows + 1000 * cols).standard_normal((rows, cols))
    out = build.aligned((cols, rows), -1.0)
    traffic = transposer.run(kernel, src, out, reverse=reverse)
    if np.all(out == -1.0):
        raise KataTodo(f"{kernel} wrote nothing yet")
    np.testing.assert_array_equal(out, src.T, err_msg=f"{kernel} {rows} x {cols}")
    return traffic


KERNEL_SETTINGS = settings(SETTINGS, max_examples=12)
shapes = st.tuples(st.integers(1, 80), st.integers(1, 80))


@KERNEL_SETTINGS
@given(shape=shapes)
def test_naive_any_shape(lib, shape):
    """Catches: bounds checked as x < rows or y < cols (right for square matrices only)."""
    check(lib, "transpose_naive", *shape, reverse=False)


@KERNEL_SETTINGS
@given(shape=shapes, reverse=st.booleans())
def test_tiled_any_shape(lib, shape, reverse):
    """Catches: the phase-2 guard copied from phase 1 (x < cols instead of x < rows), and the
    phase-2 coordinates left as (bx, by) instead of swapped -- right for one square tile."""
    check(lib, "transpose_tiled", *shape, reverse)


@KERNEL_SETTINGS
@given(shape=shapes, reverse=st.booleans())
def test_padded_any_shape(lib, shape, reverse):
    """The same shapes for the padded kernel; catches the same shortcuts there."""
    check(lib, "transpose_padded", *shape, reverse)


def test_padded_traffic_on_a_square_matrix(lib):
    """Catches: a padded kernel that reads the tile by rows and writes `out` by columns (no
    bank conflicts, but the stores are uncoalesced again) -- 128 x 128, every request full."""
    t = check(lib, "transpose_padded", 128, 128, reverse=False)
    assert t.store_efficiency == pytest.approx(1.0) and t.load_efficiency == pytest.approx(1.0)
