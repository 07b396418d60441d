"""Hidden tests of the transpose kata: shortcuts that pass the public tests.

Examples are derandomized, so a grade never depends on luck.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.testing import check_written, hidden_settings

SETTINGS = hidden_settings(200)


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
def check(cuda, kernel, rows, cols, schedules=("forward",), trace=False):
    f = cuda.module("transpose.cu", backend="cpu").get_function(kernel)
    src = np.random.default_rng(rows + 1000 * cols).standard_normal((rows, cols), np.float32)
    out = np.full((cols, rows), -1.0, dtype=np.float32)
    args = (cuda.In(src), cuda.InOut(out), np.int32(rows), np.int32(cols))
    dims = {"block": (32, 8, 1), "grid": ((cols + 31) // 32, (rows + 31) // 32)}
    t = cuda.trace(f, *args, **dims) if trace else f(*args, **dims, schedules=schedules)
    check_written(out, kernel, -1.0)
    np.testing.assert_array_equal(out, src.T, err_msg=f"{kernel} {rows} x {cols}")
    return t


KERNEL_SETTINGS = hidden_settings(12)
shapes = st.tuples(st.integers(1, 80), st.integers(1, 80))
both = st.sampled_from([("forward", "reverse"), ("reverse", "random")])


@KERNEL_SETTINGS
@given(shape=shapes)
def test_naive_any_shape(cuda, shape):
    """Catches: bounds checked as x < rows or y < cols (right for square matrices only)."""
    check(cuda, "transpose_naive", *shape)


@KERNEL_SETTINGS
@given(shape=shapes, schedules=both)
def test_tiled_any_shape(cuda, shape, schedules):
    """Catches: the phase-2 guard copied from phase 1 (x < cols instead of x < rows), and the
    phase-2 coordinates left as (bx, by) instead of swapped -- right for one square tile."""
    check(cuda, "transpose_tiled", *shape, schedules=schedules)


@KERNEL_SETTINGS
@given(shape=shapes, schedules=both)
def test_padded_any_shape(cuda, shape, schedules):
    """The same shapes for the padded kernel; catches the same shortcuts there."""
    check(cuda, "transpose_padded", *shape, schedules=schedules)


@pytest.mark.needs("cxx")
def test_padded_traffic_on_a_square_matrix(cuda):
    """Catches: a padded kernel that reads the tile by rows and writes `out` by columns (no
    bank conflicts, but the stores are uncoalesced again) -- 128 x 128, every request full."""
    t = check(cuda, "transpose_padded", 128, 128, trace=True)
    assert t.store_efficiency == pytest.approx(1.0), t.report()
    assert t.load_efficiency == pytest.approx(1.0), t.report()


@pytest.mark.kata_gate(
    "the tile is not read back by columns into coalesced rows of out: stores are not "
    "coalesced (more than 4 sectors per 32 floats), so this is not a tiled transpose"
)
@pytest.mark.needs("cxx")
def test_tiled_coalesced_both_ways_through_the_tile(cuda):
    """Catches: a tile staged in shared memory but written out down the columns of `out`, as
    the naive kernel does (the public traffic test fails it too; this gates the task). Every
    element must go through the tile once: one shared store and one shared load each."""
    rows, cols = 96, 64
    t = check(cuda, "transpose_tiled", rows, cols, trace=True)
    assert t.store_efficiency == pytest.approx(1.0), t.report()
    assert t.load_efficiency == pytest.approx(1.0), t.report()
    assert t.stores["shared"] == t.loads["shared"] == rows * cols, t.report()


@pytest.mark.kata_gate(
    "a column of the padded tile still falls in one shared-memory bank: the padding is on "
    "the wrong dimension or not on the tile (32-way bank conflicts)"
)
@pytest.mark.needs("cxx")
@pytest.mark.parametrize("shape", [(64, 96), (37, 50)])
def test_padded_tile_is_conflict_free(cuda, shape):
    """Catches: tile[TILE + 1][TILE] (the same 4224 bytes ptxas checks, transposed) and an
    unpadded tile next to a decoy 32-float array. The trace groups the shared-memory accesses
    of each warp: lanes reading different words of one bank are served one after the other."""
    t = check(cuda, "transpose_padded", *shape, trace=True)
    assert t.shared_lines, f"transpose_padded does not use shared memory\n{t.report()}"
    assert t.worst_conflict == 1, (
        f"transpose_padded: a warp's shared-memory access needs up to {t.worst_conflict} "
        f"passes through the banks (1 when conflict-free)\n{t.report()}"
    )
