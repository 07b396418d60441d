"""Public tests of the transpose kata. Each group is one task of kata.toml.

sectors: sectors.py, the 32-byte sector model of a warp's global-memory access.
banks:   banks.py, the 32-bank model of a warp's shared-memory access.
naive, tiled, padded: the kernels of transpose.cu on harness.cuda's cpu backend (the `cuda`
fixture): their results, races (`cuda.check_races`) and global traffic (`cuda.trace`).
gpu: the same kernels on the device, and their bandwidth (tests/test_transpose_gpu.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness import KataTodo
from harness.cuda import static
from harness.native.cache import ArtefactCache
from harness.testing import check_written

WARP = range(32)


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


# --------------------------------------------------------------------------- kernels
# transpose.cu runs on the cpu backend. cuda.trace rebuilds it with clang so that every global
# load and store is recorded: the 32 lanes of a warp executing one load or store are one
# request, and the trace counts the 32-byte sectors each request touches.
SENTINEL = np.float32(-9.5)


def transpose(cuda, kernel: str, rows: int, cols: int, mode: str = "run"):
    """Run `kernel` on a random rows x cols matrix and check out == in.T. mode: "run" (one
    launch), "races" (cuda.check_races: several thread schedules) or "trace" (returns the Trace)."""
    f = cuda.module("transpose.cu", backend="cpu").get_function(kernel)
    src = np.random.default_rng(rows * cols).standard_normal((rows, cols), dtype=np.float32)
    out = np.full((cols, rows), SENTINEL, dtype=np.float32)
    args = (cuda.In(src), cuda.InOut(out), np.int32(rows), np.int32(cols))
    dims = {"block": (32, 8, 1), "grid": ((cols + 31) // 32, (rows + 31) // 32)}
    trace = None
    if mode == "races":
        cuda.check_races(f, *args, **dims)
    elif mode == "trace":
        trace = cuda.trace(f, *args, **dims)
    else:
        f(*args, **dims)
    check_written(out, kernel, SENTINEL)
    bad = np.argwhere(out != src.T)
    assert bad.size == 0, (
        f"{kernel}, {rows} x {cols}: {len(bad)} of {out.size} elements wrong, first "
        f"out[{bad[0][0]}][{bad[0][1]}] = {out[tuple(bad[0])]}, want in[{bad[0][1]}][{bad[0][0]}]"
    )
    return trace


def sectors_of(trace, kind: str) -> int:
    return sum(line.sectors for line in trace.lines if line.kind == kind)


def requests_of(trace, kind: str) -> int:
    return sum(line.requests for line in trace.lines if line.kind == kind)


def test_naive_transposes(cuda):
    transpose(cuda, "transpose_naive", 64, 96)
    transpose(cuda, "transpose_naive", 37, 50)  # partial tiles: guard both coordinates


@pytest.mark.needs("cxx")
def test_naive_traffic(cuda):
    t = transpose(cuda, "transpose_naive", 64, 96, mode="trace")
    # Rows of `in` are read 32 floats at a time (4 sectors); columns of `out` are written one
    # float per sector: 32 sectors per request.
    assert t.load_efficiency == pytest.approx(1.0), t.report()
    assert t.store_efficiency == pytest.approx(0.125), t.report()
    assert requests_of(t, "store") == 64 * 96 // 32, t.report()


def check_tiled(cuda, kernel: str) -> None:
    transpose(cuda, kernel, 64, 96)
    transpose(cuda, kernel, 37, 50)
    # Forward, reverse, random (and preempt) schedules: only right in one order means a missing
    # __syncthreads() between writing the tile and reading it back.
    transpose(cuda, kernel, 64, 96, mode="races")


def check_traffic(cuda, kernel: str) -> None:
    t = transpose(cuda, kernel, 64, 96, mode="trace")
    assert t.load_efficiency == pytest.approx(1.0), f"{kernel} loads:\n{t.report()}"
    assert t.store_efficiency == pytest.approx(1.0), f"{kernel} stores:\n{t.report()}"
    # Each element is read once and written once: 4 sectors per 32 floats, both ways.
    assert sectors_of(t, "load") == sectors_of(t, "store") == 64 * 96 // 8, t.report()


def test_tiled_transposes(cuda):
    check_tiled(cuda, "transpose_tiled")


@pytest.mark.needs("cxx")
def test_tiled_traffic(cuda):
    check_traffic(cuda, "transpose_tiled")


def test_padded_transposes(cuda):
    check_tiled(cuda, "transpose_padded")


@pytest.mark.needs("cxx")
def test_padded_traffic(cuda):
    check_traffic(cuda, "transpose_padded")


@pytest.mark.needs("nvcc")
def test_padded_tile_shape(kata):
    """ptxas: the tiled kernel keeps a 32 x 32 float tile, the padded one 32 x 33."""
    res = static.ptxas_resources(kata.source("transpose.cu"), "sm_75", cache=ArtefactCache())
    tiled, padded = res["transpose_tiled"].shared_bytes, res["transpose_padded"].shared_bytes
    if padded == 0:
        raise KataTodo("transpose_padded has no shared tile yet")
    assert tiled == 32 * 32 * 4, f"transpose_tiled: {tiled} bytes of shared memory, want 4096"
    assert padded == 32 * 33 * 4, (
        f"transpose_padded: {padded} bytes of shared memory; a [32][33] float tile is 4224"
    )
