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

from harness.testing import check_written, hidden_settings, raises, random_for, seeded

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


def _touched(live, size):
    return {b // 32 for a in live for b in range(a, a + size)}


def _useful(live, size):
    return len({b for a in live for b in range(a, a + size)})


@pytest.mark.kata_gate(
    "sectors or efficiency counts an access that crosses a 32-byte boundary in one sector, on "
    "random warps of straddling 2- to 16-byte accesses"
)
def test_sectors_straddling_accesses_touch_both_sectors(sectors, kata_random):
    """Catches: a // 32 per lane (the first byte's sector only), and a straddle looked for
    over 4 bytes whatever the size (8- and 16-byte accesses lose their second sector)."""
    for _ in range(40):
        size = kata_random.choice([2, 4, 8, 16])
        lanes = kata_random.randrange(1, 33)
        # Every lane's access crosses a boundary: it starts within size - 1 bytes of one.
        live = [
            32 * kata_random.randrange(0, 64) + 32 - kata_random.randrange(1, size)
            for _ in range(lanes)
        ]
        addrs = live + [None] * (32 - lanes)
        kata_random.shuffle(addrs)
        want = len(_touched(live, size))
        got = sectors.sectors(addrs, size)
        assert got == want, (
            f"sectors({addrs}, size={size}) = {got}, expected {want}: each lane's {size} bytes "
            "cross a sector boundary and touch two sectors"
        )
        eff = sectors.efficiency(addrs, size)
        assert eff == pytest.approx(_useful(live, size) / (32 * want)), (
            f"efficiency({addrs}, size={size}) = {eff}, expected "
            f"{_useful(live, size)} / (32 x {want})"
        )


@pytest.mark.kata_gate(
    "efficiency counts bytes that several lanes read more than once as useful, on random "
    "warps of overlapping accesses"
)
def test_sectors_overlapping_bytes_count_once(sectors, kata_random):
    """Catches: active lanes x size as the useful bytes, and useful bytes deduplicated by
    start address only (an 8-byte load at 0 and one at 4 share 4 bytes)."""
    for _ in range(40):
        size = kata_random.choice([4, 8, 16])
        base = 32 * kata_random.randrange(0, 64)
        # Lanes start 1..size - 1 bytes apart or at the same byte: their ranges overlap.
        live = [base]
        for _ in range(kata_random.randrange(2, 33) - 1):
            live.append(live[-1] + kata_random.choice([0, *range(1, size)]))
        addrs = live + [None] * (32 - len(live))
        kata_random.shuffle(addrs)
        touched = _touched(live, size)
        want = _useful(live, size) / (32 * len(touched))
        eff = sectors.efficiency(addrs, size)
        assert eff == pytest.approx(want), (
            f"efficiency({addrs}, size={size}) = {eff}, expected {want}: "
            f"{_useful(live, size)} distinct useful bytes of {len(touched)} sectors"
        )


@pytest.mark.kata_gate(
    "sectors or efficiency accepts a size other than 1, 2, 4, 8, 16 or a negative address "
    "without a ValueError, on random bad arguments"
)
def test_sectors_refuse_bad_arguments(sectors, kata_random):
    """The docstrings' ValueError, on sizes and addresses the public test does not try."""
    for fn in (sectors.sectors, sectors.efficiency):
        name = fn.__name__
        size = kata_random.choice([0, 3, 5, 6, 7, 12, 32, 64, -4])
        with raises(ValueError, f"{name}([0, 64], size={size}) must refuse the size"):
            fn([0, 64], size)
        bad = -kata_random.randrange(1, 4096)
        addrs = [4 * k for k in range(31)] + [bad]
        kata_random.shuffle(addrs)
        with raises(ValueError, f"{name}({addrs}, size=4) must refuse the address {bad}"):
            fn(addrs, 4)


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


@pytest.mark.kata_gate(
    "conflict_degree is not the most distinct words in one bank on random warps in which "
    "lanes share words (broadcast) next to lanes reading other words of the same bank"
)
def test_banks_broadcast_among_conflicts(banks, kata_random):
    """Catches: lanes per bank counted instead of distinct words (no broadcast), and a bank
    broadcast only when all its lanes read one word (a bank with repeated and distinct words
    mis-counted)."""
    for _ in range(40):
        # A few words, most of them in a few banks, each read by one or several lanes.
        words = [32 * kata_random.randrange(0, 8) + kata_random.randrange(0, 3) for _ in range(6)]
        live = [4 * kata_random.choice(words) for _ in range(kata_random.randrange(2, 33))]
        addrs = live + [None] * (32 - len(live))
        kata_random.shuffle(addrs)
        per_bank: dict[int, set[int]] = defaultdict(set)
        for a in live:
            per_bank[(a // 4) % 32].add(a // 4)
        want = max(len(w) for w in per_bank.values())
        got = banks.conflict_degree(addrs)
        assert got == want, (
            f"conflict_degree({addrs}) = {got}, expected {want}: lanes reading one word share "
            "it, distinct words of one bank wait for each other"
        )


@pytest.mark.kata_gate(
    "conflict_degree or column_read_degree accepts a negative or unaligned address, a width "
    "below 1 or a column outside the row without a ValueError, on random bad arguments"
)
def test_banks_refuse_bad_arguments(banks, kata_random):
    """The docstrings' ValueError, on arguments the public test does not try."""
    addrs = [4 * k for k in range(32)]
    bad = kata_random.choice(
        [
            -4 * kata_random.randrange(1, 100),
            4 * kata_random.randrange(0, 100) + kata_random.randrange(1, 4),
        ]
    )
    addrs[kata_random.randrange(32)] = bad
    with raises(ValueError, f"conflict_degree({addrs}) must refuse the address {bad}"):
        banks.conflict_degree(addrs)
    width = kata_random.randrange(-5, 1)
    with raises(ValueError, f"column_read_degree({width}) must refuse the width"):
        banks.column_read_degree(width)
    width = kata_random.randrange(1, 100)
    column = kata_random.choice([width + kata_random.randrange(0, 5), -kata_random.randrange(1, 5)])
    with raises(ValueError, f"column_read_degree({width}, {column}) must refuse the column"):
        banks.column_read_degree(width, column)


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


def traced(cuda, kernel, rows, cols):
    """The trace of one forward launch, or a skip when the transpose is wrong: the launch tests
    say so, and a structure gate measures right answers only (a missing barrier or a swapped
    guard is not told its loads are uncoalesced)."""
    f = cuda.module("transpose.cu", backend="cpu").get_function(kernel)
    rng = np.random.default_rng(seeded(f"transpose {kernel} {rows} {cols}"))
    src = rng.standard_normal((rows, cols), np.float32)
    out = np.full((cols, rows), -1.0, dtype=np.float32)
    args = (cuda.In(src), cuda.InOut(out), np.int32(rows), np.int32(cols))
    t = cuda.trace(f, *args, block=(32, 8, 1), grid=((cols + 31) // 32, (rows + 31) // 32))
    check_written(out, kernel, -1.0)
    if not np.array_equal(out, src.T):
        pytest.skip(
            f"{kernel} {rows} x {cols}: the transpose is wrong (the launch tests say so); this "
            "structure check measures right answers only"
        )
    return t


def whole_tiles(kata_random):
    """A matrix of whole 32 x 32 tiles, not square, drawn from the run seed."""
    rows, cols = kata_random.sample(range(1, 6), 2)
    return 32 * rows, 32 * cols


def check_every_thread_moves_its_share(t, kernel, rows, cols):
    """Each of a block's 256 threads loads and stores 4 elements of its 32 x 32 tile."""
    threads = rows * cols // 4
    loads, stores = t.most_per_thread["global load"], t.most_per_thread["global store"]
    assert loads <= 4 and stores <= 4 and t.active_threads["global load"] == threads, (
        f"{kernel} {rows} x {cols}: {t.active_threads['global load']} of the {threads} threads "
        f"load from `in`, the busiest {loads} elements, and one stores {stores}; with blocks "
        f"of 32 x 8 threads every thread moves 4 elements of its tile\n{t.report()}"
    )


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
    "transpose_tiled's global loads or stores are not coalesced (partly used sectors), on a "
    "matrix of whole tiles"
)
@pytest.mark.needs("cxx")
def test_tiled_coalesced_both_ways(cuda, kata_random):
    """Catches: a tile staged in shared memory but written out down the columns of `out`, as
    the naive kernel does (the public traffic test fails it too; this gates the task). The
    shape (whole 32 x 32 tiles, not square) is drawn fresh each run."""
    rows, cols = whole_tiles(kata_random)
    t = traced(cuda, "transpose_tiled", rows, cols)
    for what, eff in (("store", t.store_efficiency), ("load", t.load_efficiency)):
        assert eff == pytest.approx(1.0), (
            f"transpose_tiled {rows} x {cols}: global {what} efficiency {eff:.2f}, expected 1.0 "
            f"(every warp request uses whole sectors)\n{t.report()}"
        )


@pytest.mark.kata_gate(
    "transpose_tiled does not pass every element through the shared tile exactly once (one "
    "shared store and one shared load each), on a matrix of whole tiles"
)
@pytest.mark.needs("cxx")
def test_tiled_every_element_through_the_tile_once(cuda, kata_random):
    """Catches: a kernel that reads `in` into the tile but also (or instead) copies global to
    global. The shape is drawn fresh each run."""
    rows, cols = whole_tiles(kata_random)
    t = traced(cuda, "transpose_tiled", rows, cols)
    assert t.stores["shared"] == t.loads["shared"] == rows * cols, (
        f"transpose_tiled {rows} x {cols}: {t.stores['shared']} shared stores and "
        f"{t.loads['shared']} shared loads, expected {rows * cols} each\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "transpose_tiled's elements are not spread over the block's threads (every thread of a "
    "32 x 8 block loads and stores 4 elements of its tile), on a matrix of whole tiles"
)
@pytest.mark.needs("cxx")
def test_tiled_every_thread_moves_four_elements(cuda, kata_random):
    """Catches: warp 0 of each block moving the whole 32 x 32 tile (32 loads and 32 stores
    per thread, __syncwarp instead of __syncthreads): coalesced, race-free, each element
    through the tile once, and 7 of 8 warps idle."""
    rows, cols = whole_tiles(kata_random)
    t = traced(cuda, "transpose_tiled", rows, cols)
    check_every_thread_moves_its_share(t, "transpose_tiled", rows, cols)


@pytest.mark.kata_gate(
    "transpose_padded's elements are not spread over the block's threads (every thread of a "
    "32 x 8 block loads and stores 4 elements of its tile), on a matrix of whole tiles"
)
@pytest.mark.needs("cxx")
def test_padded_every_thread_moves_four_elements(cuda, kata_random):
    """Catches: warp 0 of each block moving the whole [32][33] tile (as for the tiled kernel:
    no bank conflicts, coalesced, 7 of 8 warps idle)."""
    rows, cols = whole_tiles(kata_random)
    t = traced(cuda, "transpose_padded", rows, cols)
    check_every_thread_moves_its_share(t, "transpose_padded", rows, cols)


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
    t = traced(cuda, "transpose_padded", *shape)
    assert t.shared_lines, f"transpose_padded does not use shared memory\n{t.report()}"
    assert t.worst_conflict == 1, (
        f"transpose_padded: a warp's shared-memory access needs up to {t.worst_conflict} "
        f"passes through the banks (1 when conflict-free)\n{t.report()}"
    )
