"""Hidden tests of the matmul kata: random shapes under two thread schedules, and the edges.

Examples and matrices are drawn from the run seed (fresh each run; --kata-seed reproduces
them); the thin and tiny shapes are fixed.

A source that gives nvcc other code than the cpu backend (`#if defined(__NVCC__)`, red team
rt12-nvcc-split) is seen where nvcc is (the lines each compiler keeps); a branch on the GPU's
own architecture (`__CUDA_ARCH__ >= 900`) only the gpu task sees, by timing what the GPU runs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cuda.cpu.loader import INCLUDE
from harness.testing import check_written, hidden_settings, seeded
from harness.toolchain import find_tool

SETTINGS = hidden_settings(15)


def check(cuda, tile, name, M, N, K, schedules=("forward", "reverse")):
    f = cuda.module("matmul.cu", options=[f"-DTILE={tile}"], backend="cpu").get_function(name)
    rng = np.random.default_rng(seeded(f"matmul {name} {tile} {M} {N} {K}"))
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile)
    args = (cuda.In(A), cuda.In(B), cuda.InOut(C), np.int32(M), np.int32(N), np.int32(K))
    f(*args, block=(tile, tile, 1), grid=grid, schedules=schedules)
    check_written(C, name)
    np.testing.assert_allclose(
        C,
        A.astype(np.float64) @ B,
        rtol=1e-4,
        atol=1e-4 * np.sqrt(K),
        err_msg=f"{name} (TILE={tile}): C is not A @ B for {M=} {N=} {K=}",
    )


shape = st.tuples(st.integers(1, 70), st.integers(1, 70), st.integers(1, 70))


@pytest.mark.kata_gate(
    "matmul_tiled's C is not A @ B on random shapes (M, N and K from 1 to 70), its threads run "
    "in two orders"
)
@SETTINGS
@given(mnk=shape)
def test_tiled_random_shapes(cuda, tile, mnk):
    """Catches: zero-filling only one of the two tiles, guarding the loads with the wrong
    bound (M for B's rows instead of K), and a tile loop `t < K / TILE` that drops the last
    partial tile -- the public shapes have K = 29, 48, 64, 80 only."""
    check(cuda, tile, "matmul_tiled", *mnk)


@pytest.mark.parametrize(
    "mnk", [(1, 1, 1), (1, 70, 3), (70, 1, 2), (5, 7, 1), (17, 33, 65), (33, 17, 100)]
)
def test_tiled_thin_and_tiny(cuda, tile, mnk):
    """K smaller than a tile, single rows and columns. Catches: a tile loop that runs
    ceil(K / TILE) - 1 times, and indexing A as A[row * N + k] (right only when K == N)."""
    check(cuda, tile, "matmul_tiled", *mnk)


@pytest.mark.kata_gate("matmul_naive's C is not A @ B on random shapes (M, N and K from 1 to 70)")
@SETTINGS
@given(mnk=shape)
def test_naive_random_shapes(cuda, tile, mnk):
    """Catches: swapping M and N in the bounds check (right for square C only), and B indexed
    as B[k * K + col]."""
    check(cuda, tile, "matmul_naive", *mnk, schedules=("forward",))


def traced(cuda, tile, name, M, N, K):
    """The traced run of `name` on random M x K, K x N: (trace, C is A @ B). The gates below
    judge the accesses of a kernel whose C is right only: a wrong C (a wrong index, a missing
    barrier) is the result tests' to report, in their own words."""
    f = cuda.module("matmul.cu", options=[f"-DTILE={tile}"], backend="cpu").get_function(name)
    rng = np.random.default_rng(seeded(f"matmul traced {name} {tile} {M} {N} {K}"))
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile)
    args = (cuda.In(A), cuda.In(B), cuda.InOut(C), np.int32(M), np.int32(N), np.int32(K))
    t = f.trace(*args, block=(tile, tile, 1), grid=grid)
    check_written(C, name)
    want = A.astype(np.float64) @ B
    right = bool(np.allclose(C, want, rtol=1e-4, atol=1e-4 * np.sqrt(K)))
    return t, right


def shape_of(kata_rng, multiple=1):
    """A random small shape (every lane's accesses are traced): M, N, K in 17..72."""
    return tuple(
        int(kata_rng.integers(17 // multiple + 1, 72 // multiple + 1)) * multiple for _ in range(3)
    )


def check_reads_seen(t, name, M, N, K, right):
    """C = A @ B needs every element of A and B: a right C from fewer traced global loads means
    loads the trace did not see (atomics, code outside the instrumented kernel)."""
    if right:  # a wrong C is the result tests' business, not this property's
        need = M * K + K * N
        assert t.loads["global"] >= need, (
            f"{name}: the traced run of {M}x{N}x{K} records {t.loads['global']} plain global "
            f"loads ({t.atomics['global']} atomics), fewer than the {need} elements of A and B "
            f"that a right C needs\n{t.report()}"
        )


@pytest.mark.kata_gate(
    "a thread of matmul_tiled makes more than 2 global reads (loads or atomics) per tile step"
)
def test_tiled_inner_loop_reads_shared_memory(cuda, tile, kata_rng):
    """Catches: shared tiles that are filled (so ptxas counts them, with barriers) while the
    multiply-adds still read A and B from global memory (plain loads, atomicAdd(p, 0), a helper
    the trace does not see), the naive kernel renamed, and one thread loading whole tiles for
    the block. Every thread of a tiled kernel reads one element of each strip per tile step:
    at most 2 global reads per thread per step; the busiest thread is what counts."""
    M, N, K = shape_of(kata_rng)
    t, right = traced(cuda, tile, "matmul_tiled", M, N, K)
    steps = -(-K // tile)
    limit = 2 * steps
    assert not right or t.thread_reads <= limit, (
        f"TILE={tile}: a thread of matmul_tiled makes {t.thread_reads} global reads (loads and "
        f"atomics) for {M}x{N}x{K}; a tiled kernel's threads make at most {limit} (2 per tile "
        f"step) and read the rest from shared memory ({t.loads['shared']} shared loads here)"
        f"\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "the traced run of matmul_tiled records fewer global loads than A and B have elements, "
    "though C is right"
)
def test_tiled_loads_seen_by_the_trace(cuda, tile, kata_rng):
    """Catches: A and B read through atomicAdd(p, 0) or any access the traced build does not
    record as a load, which the per-thread count above would not see."""
    M, N, K = shape_of(kata_rng)
    t, right = traced(cuda, tile, "matmul_tiled", M, N, K)
    check_reads_seen(t, "matmul_tiled", M, N, K, right)


@pytest.mark.kata_gate(
    "matmul_tiled's tile loads are not coalesced: a warp's global loads touch more than 4 "
    "sectors per request"
)
def test_tiled_tile_loads_are_coalesced(cuda, tile, kata_rng):
    """Catches: tiles loaded with the roles swapped (As[tx][ty] = A[row0 + tx][t + ty]): each
    lane of a warp reads another row, 16 or 32 sectors per request. With threadIdx.x along the
    row of the strip, a warp reads one or two runs of consecutive floats: at most 4 sectors (K
    and N multiples of 8 keep the runs aligned to sectors)."""
    M, N, K = shape_of(kata_rng, multiple=8)
    t, right = traced(cuda, tile, "matmul_tiled", M, N, K)
    loads = [s for s in t.lines if s.kind == "load"]
    worst = max((s.sectors_per_request for s in loads), default=0.0)
    assert not right or worst <= 4.0, (
        f"TILE={tile}: {worst:.1f} sectors per warp load on average on one line of matmul_tiled "
        f"for {M}x{N}x{K} (at most 4 when a warp reads consecutive floats of a row of A or B)"
        f"\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "matmul_naive's global loads are not coalesced: a warp's loads of A or B touch more than 4 "
    "sectors per request"
)
def test_naive_loads_are_coalesced(cuda, tile, kata_rng):
    """Catches: row from threadIdx.x and col from threadIdx.y. Every element of C is still
    computed once, but a warp's A loads are K floats apart: 32 sectors per request. With
    threadIdx.x on the column, B's loads are consecutive floats and A's one broadcast address:
    at most 4 sectors per warp request (TILE=16: a warp spans two rows of the block)."""
    M, N, K = shape_of(kata_rng, multiple=8)
    t, right = traced(cuda, tile, "matmul_naive", M, N, K)
    loads = [s for s in t.lines if s.kind == "load"]
    worst = max((s.sectors_per_request for s in loads), default=0.0)
    assert not right or worst <= 4.0, (
        f"TILE={tile}: {worst:.1f} sectors per warp load on average on one line of matmul_naive "
        f"for {M}x{N}x{K} (at most 4 when a warp reads consecutive floats of B and one address "
        f"of A)\n{t.report()}"
    )


@pytest.mark.kata_gate(
    "the traced run of matmul_naive records fewer global loads than A and B have elements, "
    "though C is right"
)
def test_naive_loads_seen_by_the_trace(cuda, tile, kata_rng):
    """Catches: A and B read through atomicAdd(p, 0) or any access the traced build does not
    record as a load: such a kernel shows no uncoalesced line because it shows no line."""
    M, N, K = shape_of(kata_rng)
    t, right = traced(cuda, tile, "matmul_naive", M, N, K)
    check_reads_seen(t, "matmul_naive", M, N, K, right)


def kept_lines(cmd: list[str], name: str) -> dict[int, str]:
    """The lines of file `name` a preprocessor keeps (-dD: with the #defines), by line number."""
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert out.returncode == 0, f"{' '.join(cmd)} failed on {name}:\n{out.stderr[-2000:]}"
    kept: dict[int, str] = {}
    mine, line = False, 0
    for text in out.stdout.splitlines():
        m = re.match(r'#\s*(\d+)\s+"([^"]*)"', text)
        if m:
            line, mine = int(m.group(1)), Path(m.group(2)).name == name
            continue
        if mine and text.strip():
            kept[line] = text.strip()
        line += 1
    return kept


def check_same_lines(cuda, kata, tile, task):
    """The lines of matmul.cu that nvcc compiles for the device (sm_75) are the lines the cpu
    backend compiles: a branch on which compiler reads the file gives the GPU another kernel."""
    traced(cuda, tile, f"matmul_{task}", 3, 5, 7)  # a stub writes nothing: not started
    nvcc, cxx = find_tool("nvcc"), find_tool("g++") or find_tool("clang++")
    if nvcc is None or cxx is None:
        pytest.skip("needs nvcc and g++ (or clang++)")
    path = kata.source("matmul.cu")
    gpu = kept_lines([str(nvcc), "-E", "-arch=sm_75", "-Xcompiler", "-dD", f"-DTILE={tile}",
                      str(path)], path.name)  # fmt: skip
    cpu = kept_lines([str(cxx), "-E", "-dD", "-std=gnu++17", f"-I{INCLUDE}", "-include",
                      "kata_cuda.h", f"-DTILE={tile}", "-x", "c++", str(path)], path.name)  # fmt: skip
    only = sorted(set(gpu) ^ set(cpu))
    assert not only, (
        f"matmul.cu (TILE={tile}) for the {task} task: line {only[0]} is compiled by "
        f"{'nvcc' if only[0] in gpu else 'the cpu backend'} only "
        f"({(gpu | cpu)[only[0]]!r}); lines only nvcc compiles: {sorted(set(gpu) - set(cpu))}, "
        f"only the cpu backend: {sorted(set(cpu) - set(gpu))}"
    )


@pytest.mark.kata_gate(
    "matmul.cu gives nvcc other lines to compile than the cpu backend (a branch on the compiler)"
)
def test_tiled_same_source_for_nvcc_and_the_cpu_backend(cuda, kata, tile):
    """Catches: `#if defined(__NVCC__)` around a naive kernel for the GPU and a tiled one for
    the cpu backend that grades it (red team rt12-nvcc-split)."""
    check_same_lines(cuda, kata, tile, "tiled")


@pytest.mark.kata_gate(
    "matmul.cu gives nvcc other lines to compile than the cpu backend (a branch on the compiler)"
)
def test_naive_same_source_for_nvcc_and_the_cpu_backend(cuda, kata, tile):
    """The same for the naive kernel: the coalesced one graded, another one run."""
    check_same_lines(cuda, kata, tile, "naive")
