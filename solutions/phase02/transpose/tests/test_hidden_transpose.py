"""Hidden tests of the transpose kata: shortcuts that pass the public tests.

Examples and matrices are drawn from the run seed (fresh each run; --kata-seed reproduces
them); the straddling and bank-width cases are fixed.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.testing import check_written, hidden_settings, random_for, seeded

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
    got = sectors.sectors(addrs, size)
    assert got == len(touched), (
        f"sectors({addrs}, size={size}) = {got}, expected {len(touched)} distinct 32-byte sectors"
    )
    useful = len({b for a in live for b in range(a, a + size)})
    want = useful / (32 * len(touched)) if touched else 1.0
    eff = sectors.efficiency(addrs, size)
    assert eff == pytest.approx(want), (
        f"efficiency({addrs}, size={size}) = {eff}, expected {want} ({useful} useful bytes of "
        f"{len(touched)} sectors)"
    )


def test_sectors_straddling_loads(sectors):
    """Catches the a // 32 shortcut on the smallest case: one lane, one straddling load."""
    for addrs, want in (([28], 2), ([24], 1)):
        got = sectors.sectors(addrs, size=8)
        assert got == want, f"sectors({addrs}, size=8) = {got}, expected {want}"
    eff = sectors.efficiency([28], size=8)
    assert eff == pytest.approx(8 / 64), f"efficiency([28], size=8) = {eff}, expected 8 / 64"


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
    want = max((len(w) for w in words.values()), default=0)
    got = banks.conflict_degree(addrs)
    assert got == want, (
        f"conflict_degree({addrs}) = {got}, expected {want} (the most distinct words in one bank)"
    )


@pytest.mark.parametrize("width", [1, 2, 3, 8, 31, 32, 33, 48, 63, 64, 65, 96, 97])
def test_banks_column_reads_of_any_width(banks, width):
    """Catches: column_read_degree special-casing 32 and 33."""
    from math import gcd

    got = banks.column_read_degree(width)
    assert got == gcd(width, 32), f"column_read_degree({width}) = {got}, expected {gcd(width, 32)}"


@pytest.mark.kata_gate(
    "column_read_degree is not the conflict degree of 32 lanes reading one column of a "
    "float tile[32][row_floats] (gcd(row_floats, 32)) on random widths and columns"
)
def test_banks_column_reads_of_random_widths_and_columns(banks):
    """Widths and columns drawn fresh each run: lane i reads byte 4 (i row_floats + column),
    so the degree is gcd(row_floats, 32) whatever the column."""
    from math import gcd

    rng = random_for("banks column reads")
    for _ in range(30):
        width = rng.choice((rng.randrange(1, 40), rng.randrange(1, 600), 32 * rng.randrange(1, 9)))
        column = rng.randrange(width)
        got = banks.column_read_degree(width, column)
        assert got == gcd(width, 32), (
            f"column_read_degree({width}, {column}) = {got}, expected gcd({width}, 32) = "
            f"{gcd(width, 32)}"
        )


# --------------------------------------------------------------------------- kernels
def check(cuda, kernel, rows, cols, schedules=("forward",), trace=False):
    f = cuda.module("transpose.cu", backend="cpu").get_function(kernel)
    rng = np.random.default_rng(seeded(f"transpose {kernel} {rows} {cols}"))
    src = rng.standard_normal((rows, cols), np.float32)
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
    for what, eff in (("store", t.store_efficiency), ("load", t.load_efficiency)):
        assert eff == pytest.approx(1.0), (
            f"transpose_padded 128 x 128: global {what} efficiency {eff:.2f}, expected 1.0 "
            f"(every warp request uses whole sectors)\n{t.report()}"
        )


@pytest.mark.kata_gate(
    "transpose_tiled on matrices of whole tiles: its global loads or stores are not coalesced "
    "(partly used sectors), or an element does not pass through the shared tile exactly once"
)
@pytest.mark.needs("cxx")
def test_tiled_coalesced_both_ways_through_the_tile(cuda, kata_random):
    """Catches: a tile staged in shared memory but written out down the columns of `out`, as
    the naive kernel does (the public traffic test fails it too; this gates the task). Every
    element must go through the tile once: one shared store and one shared load each. The
    shape (whole 32 x 32 tiles, not square) is drawn fresh each run."""
    rows, cols = kata_random.choice([(96, 64), (64, 128), (128, 32), (32, 96)])
    t = check(cuda, "transpose_tiled", rows, cols, trace=True)
    for what, eff in (("store", t.store_efficiency), ("load", t.load_efficiency)):
        assert eff == pytest.approx(1.0), (
            f"transpose_tiled {rows} x {cols}: global {what} efficiency {eff:.2f}, expected 1.0 "
            f"(every warp request uses whole sectors)\n{t.report()}"
        )
    assert t.stores["shared"] == t.loads["shared"] == rows * cols, (
        f"transpose_tiled {rows} x {cols}: {t.stores['shared']} shared stores and "
        f"{t.loads['shared']} shared loads, expected {rows * cols} each (every element through "
        f"the tile once)\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "transpose_padded: a warp's shared-memory access reads several words of one bank (bank "
    "conflicts), on matrices of whole and of partial tiles"
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
