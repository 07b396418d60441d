"""Public tests of the transpose kata. Each group is one task of kata.toml.

sectors: sectors.py, the 32-byte sector model of a warp's global-memory access.
banks:   banks.py, the 32-bank model of a warp's shared-memory access.
"""

from __future__ import annotations

import pytest

WARP = range(32)


@pytest.fixture(scope="module")
def sectors(kata):
    return kata.module("sectors")


@pytest.fixture(scope="module")
def banks(kata):
    return kata.module("banks")


# --------------------------------------------------------------------------- sectors
def test_sectors_consecutive_floats(sectors):
    # 32 lanes x 4 bytes = 128 bytes starting at a 128-byte boundary: 4 sectors, all useful.
    addrs = [4096 + 4 * lane for lane in WARP]
    assert sectors.sectors(addrs) == 4
    assert sectors.efficiency(addrs) == 1.0


def test_sectors_misaligned_row(sectors):
    # The same 128 bytes shifted by one float straddle 5 sectors: 128 / 160 = 80 %.
    addrs = [4100 + 4 * lane for lane in WARP]
    assert sectors.sectors(addrs) == 5
    assert sectors.efficiency(addrs) == pytest.approx(0.8)


def test_sectors_column_of_a_matrix(sectors):
    # A warp reading down a column of a 1024-float-wide matrix: 32 floats, 32 sectors, 12.5 %.
    addrs = [4 * (lane * 1024) for lane in WARP]
    assert sectors.sectors(addrs) == 32
    assert sectors.efficiency(addrs) == pytest.approx(0.125)


def test_sectors_stride_two_and_broadcast(sectors):
    # Every other float: 8 sectors for 128 useful bytes, 50 %.
    assert sectors.efficiency([8 * lane for lane in WARP]) == pytest.approx(0.5)
    # All lanes read one float: one sector, 4 useful bytes of 32.
    assert sectors.sectors([256] * 32) == 1
    assert sectors.efficiency([256] * 32) == pytest.approx(4 / 32)


def test_sectors_inactive_lanes_and_wide_accesses(sectors):
    # Half the warp inactive (a bounds check): 2 sectors for 64 bytes.
    addrs = [4 * lane if lane < 16 else None for lane in WARP]
    assert sectors.sectors(addrs) == 2 and sectors.efficiency(addrs) == 1.0
    # float4 loads (16 bytes per lane): 512 bytes, 16 sectors.
    assert sectors.sectors([16 * lane for lane in WARP], size=16) == 16
    assert sectors.sectors([None] * 32) == 0


def test_sectors_rejects_bad_input(sectors):
    with pytest.raises(ValueError, match="size"):
        sectors.sectors([0], size=3)
    with pytest.raises(ValueError):
        sectors.sectors([-4])


# --------------------------------------------------------------------------- banks
def test_banks_row_of_a_tile_is_conflict_free(banks):
    # tile[y][x] for x = lane: 32 consecutive words, one per bank.
    assert banks.conflict_degree([4 * lane for lane in WARP]) == 1


def test_banks_column_of_a_32_wide_tile(banks):
    # tile[lane][0] of float tile[32][32]: word lane * 32, bank 0 for every lane: 32-way.
    assert banks.conflict_degree([4 * 32 * lane for lane in WARP]) == 32
    assert banks.column_read_degree(32) == 32


def test_banks_padding_spreads_a_column(banks):
    # float tile[32][33]: lane i's word is 33 i, bank (33 i) % 32 = i: conflict-free.
    assert banks.column_read_degree(33) == 1
    assert banks.column_read_degree(33, column=5) == 1
    # Even strides conflict: tile[32][34] puts two lanes in each even bank.
    assert banks.column_read_degree(34) == 2
    assert banks.column_read_degree(16) == 16


def test_banks_broadcast_is_free(banks):
    # Every lane reads the same word: one transaction, broadcast.
    assert banks.conflict_degree([128] * 32) == 1
    # Two words in one bank, each read by 16 lanes: 2 transactions.
    assert banks.conflict_degree([0] * 16 + [128] * 16) == 2


def test_banks_inactive_lanes_and_bad_input(banks):
    assert banks.conflict_degree([None] * 32) == 0
    assert banks.conflict_degree([4 * 32 * lane if lane < 4 else None for lane in WARP]) == 4
    with pytest.raises(ValueError):
        banks.conflict_degree([2])  # not 4-byte aligned
    with pytest.raises(ValueError):
        banks.column_read_degree(32, column=32)
