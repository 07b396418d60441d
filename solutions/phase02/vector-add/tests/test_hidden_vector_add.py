"""Hidden tests of the vector-add kata: shortcuts that pass the public tests.

Examples and array contents are drawn from the run seed (fresh each run; --kata-seed
reproduces them); the boundary cases are fixed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import KataTodo
from harness.testing import (
    check_written,
    hidden_settings,
    raises,
    random_for,
    seeded,
    wrote_nothing,
)

SETTINGS = hidden_settings(40)


# --------------------------------------------------------------------------- launch
@SETTINGS
@given(n=st.integers(0, 2**31 - 1), block=st.integers(1, 1024))
def test_launch_grid_size_exact(launch, n, block):
    """Catches: n // block + 1 (one block too many when n is a multiple of block, which the
    public examples avoid) and n // block (one too few otherwise)."""
    got, want = launch.grid_size(n, block), -(-n // block)
    assert got == want, (
        f"grid_size({n}, {block}) = {got}, expected {want}: the fewest blocks of {block} threads "
        f"that cover {n} elements"
    )


def test_launch_grid_size_exact_multiples_and_the_grid_limit(launch):
    """Catches: n // block + 1 on exact multiples, and an off-by-one at the gridDim.x limit
    (the largest legal grid is 2**31 - 1 blocks, one more is an error)."""
    got = launch.grid_size(1024, 256)
    assert got == 4, f"grid_size(1024, 256) = {got}, expected 4 (an exact multiple)"
    got = launch.grid_size((2**31 - 1) * 1024, 1024)
    assert got == 2**31 - 1, (
        f"grid_size((2**31 - 1) * 1024, 1024) = {got}, expected 2**31 - 1 (the largest legal grid)"
    )
    with raises(ValueError, "grid_size((2**31 - 1) * 1024 + 1, 1024) needs 2**31 blocks: too many"):
        launch.grid_size((2**31 - 1) * 1024 + 1, 1024)


def test_launch_rejects_bool_and_reports_values(launch):
    """Catches: accepting True as n (bool is an int in Python) and messages without the value."""
    with raises(ValueError, "grid_size(True, 256) must refuse a bool n"):
        launch.grid_size(True, 256)
    with raises(ValueError, "launch_config(100, 2048) must refuse the block, saying 2048", "2048"):
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
    assert got_block == block, (
        f"launch_config({n}, {block}, {device!r}) changed the block to {got_block}"
    )
    want = min(-(-n // block), dev.sms * max(1, dev.max_threads_per_sm // block))
    assert grid == want, (
        f"launch_config({n}, {block}, {device!r}) gave a grid of {grid}, expected {want}: enough "
        f"blocks for n, at most the blocks the {dev.sms} SMs hold at once"
    )


GIVEN_DEVICES = {"T4": (40, 1024), "H200": (132, 2048)}  # (SMs, threads per SM): launch.py's


@pytest.mark.kata_gate(
    "grid_size or launch_config refuses, or answers wrongly, valid launches (n >= 0, a block "
    "of 1..1024 threads, a known device) drawn at random"
)
def test_launch_takes_every_valid_launch(launch):
    """Random valid launches, sizes from 0 to 2**40 and any block of 1..1024: grid_size is
    ceil(n / block) (while that fits gridDim.x), launch_config's grid min(ceil(n / block),
    SMs x max(1, threads per SM // block)) with the block kept. A ValueError here refuses a
    valid launch (its checks mixed up), which is a wrong answer."""
    rng = random_for("launch valid launches")
    for _ in range(60):
        n = rng.randrange(0, 1 << rng.choice((4, 12, 24, 40)))
        block = rng.choice((rng.randrange(1, 1025), 32 * rng.randrange(1, 33)))
        device = rng.choice(sorted(GIVEN_DEVICES))
        sms, per_sm = GIVEN_DEVICES[device]
        if -(-n // block) <= 2**31 - 1:
            try:
                got = launch.grid_size(n, block)
            except ValueError as e:
                raise AssertionError(
                    f"grid_size({n}, {block}) refused a valid launch: {e}"
                ) from None
            assert got == -(-n // block), (
                f"grid_size({n}, {block}) = {got}, expected ceil(n / block) = {-(-n // block)}"
            )
        want = (min(-(-n // block), sms * max(1, per_sm // block)), block)
        try:
            got = launch.launch_config(n, block, device)
        except ValueError as e:
            raise AssertionError(
                f"launch_config({n}, {block}, {device!r}) refused a valid launch: {e}"
            ) from None
        assert tuple(got) == want, (
            f"launch_config({n}, {block}, {device!r}) = {got}, expected {want}: enough blocks "
            f"for n, at most the blocks the {sms} SMs hold at once"
        )


@pytest.mark.kata_gate(
    "grid_size or launch_config takes a size or a block that is not an int (a float such as "
    "256.0, a bool), where it must raise ValueError"
)
def test_launch_refuses_sizes_that_are_not_ints(launch):
    """A float block or size would make a float grid (and a bool is an int subclass that means
    no size): both functions check both arguments. Values drawn fresh each run."""
    rng = random_for("launch non-int arguments")
    n, block = rng.randrange(1, 10**6), rng.choice((32, 64, 128, 256, 512, 1024))
    for args in ((n, True), (True, block), (n, float(block)), (float(n), block)):
        for name in ("grid_size", "launch_config"):
            with raises(ValueError, f"{name}{args!r} must refuse an argument that is not an int"):
                getattr(launch, name)(*args)


# --------------------------------------------------------------------------- kernel
@pytest.fixture(scope="module")
def vadd_ptx(kata):
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


def test_kernel_saxpy_many_blocks(vadd_ptx, kata_rng):
    """Catches: a stride of blockDim.x instead of blockDim.x * gridDim.x. vector_add still gives
    the right c (every block redoes the tail of the array, writing the same values), but saxpy
    updates y in place, so each extra visit adds alpha * x again. Sizes and data drawn fresh."""
    n = int(kata_rng.integers(12_000, 24_000))
    rng = kata_rng
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    out = y.copy()
    vadd_ptx("saxpy", [np.float32(-1.5), x, out, np.int32(n)], 16, 128)
    if np.array_equal(out, y):
        raise KataTodo("saxpy left y unchanged")
    np.testing.assert_allclose(
        out, np.float32(-1.5) * x + y, rtol=1e-6, atol=1e-6,
        err_msg=f"saxpy(-1.5, x, y, n={n}) on a grid of 16 x 128 threads: y is not -1.5 x + y "
        "(each element updated exactly once?)",
    )  # fmt: skip


@SETTINGS
@given(
    n=st.integers(0, 5000),
    block=st.sampled_from([1, 32, 96, 100, 256, 1024]),
    grid=st.integers(1, 40),
)
def test_kernel_any_grid_any_n(vadd_ptx, n, block, grid):
    """Any grid covers any n, also with block sizes that are not a multiple of 32. Catches: an
    index from threadIdx.x alone, and loops that assume blockDim.x == 256."""
    size = max(n, 1)
    rng = np.random.default_rng(seeded(f"vector_add {n} {block} {grid}"))
    a, b = rng.standard_normal(size, dtype=np.float32), rng.standard_normal(size, dtype=np.float32)
    c = np.full(size, np.nan, dtype=np.float32)
    vadd_ptx("vector_add", [a, b, c, np.int32(n)], grid, block)
    if n > 0 and wrote_nothing(c):
        raise KataTodo("vector_add wrote nothing yet")
    np.testing.assert_array_equal(
        c[:n], (a + b)[:n],
        err_msg=f"vector_add(a, b, c, n={n}) on {grid} blocks of {block}: c is not a + b",
    )  # fmt: skip


# --------------------------------------------------------------------------- kernel structure
# The cpu backend (harness.cuda) runs the same vector_add.cu: traced, it counts the 32-byte
# sectors of each warp's accesses; probed, it runs only the last block of a 2**31-thread grid.
def _cpu_kernel(cuda, name: str):
    return cuda.module("vector_add.cu", backend="cpu").get_function(name)


@pytest.mark.kata_gate(
    "neighbouring threads do not touch neighbouring elements: a warp's loads and stores are "
    "not coalesced (more than 4 sectors per 32 floats)"
)
@pytest.mark.parametrize("kernel", ["vector_add", "saxpy"])
def test_kernel_accesses_are_coalesced(cuda, kernel, kata_rng):
    """Catches: each thread looping over its own contiguous chunk. The answers are right, but
    lane t reads element t * chunk: every warp access touches 32 sectors instead of 4."""
    n = 16 * 1024
    rng = kata_rng
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    f = _cpu_kernel(cuda, kernel)
    if kernel == "vector_add":
        args = (cuda.In(x), cuda.In(y), cuda.InOut(out), np.int32(n))
        want = x + y
    else:
        out[:] = y
        args = (np.float32(2.0), cuda.In(x), cuda.InOut(out), np.int32(n))
        want = np.float32(2.0) * x + y
    # 4 blocks of 128 threads for 16K elements: 32 elements per thread.
    t = f.trace(*args, block=(128, 1, 1), grid=(4, 1))
    if wrote_nothing(out) or (kernel == "saxpy" and np.array_equal(out, y)):
        raise KataTodo(f"{kernel} wrote nothing yet")
    np.testing.assert_allclose(
        out,
        want,
        rtol=1e-6,
        atol=1e-6,
        err_msg=f"{kernel} on 4 blocks of 128 threads: wrong result",
    )
    for kind in ("load", "store"):
        lines = [s for s in t.lines if s.kind == kind]
        spr = sum(s.sectors for s in lines) / max(1, sum(s.requests for s in lines))
        assert spr <= 4.5, (
            f"{kernel}: {spr:.1f} sectors per warp {kind} (4 when 32 lanes read 32 "
            f"consecutive floats): consecutive threads must take consecutive elements\n{t.report()}"
        )


@pytest.mark.kata_gate(
    "the grid-stride loop's index is 32 bits: past 2**31 - 1 elements i + stride wraps to a "
    "negative index"
)
@pytest.mark.parametrize("kernel", ["vector_add", "saxpy"])
def test_kernel_index_is_64_bit(cuda, kernel):
    """Catches: `int i` / `int stride`. n = 2**31 - 1 with 2**21 blocks of 1024: only the last
    block runs (a probe of the cpu backend), over 8 GiB arrays of which only the tail exists. Its threads start at
    2**31 - 1024 + t; adding the stride (2**31) overflows an int to -1024 + t, still < n."""
    n = 2**31 - 1
    blocks = 2**21
    f = _cpu_kernel(cuda, kernel)
    x, y = cuda.tail_array(n, np.float32), cuda.tail_array(n, np.float32)
    x.tail_view()[:] = 1.5
    y.tail_view()[:] = 2.0
    # vector_add(x, y, y): y = x + y in place, like saxpy's y = 2x + y.
    args = (x, y, y) if kernel == "vector_add" else (np.float32(2.0), x, y)
    try:
        f(
            *args,
            np.int32(n),
            block=(1024, 1, 1),
            grid=(blocks, 1),
            blocks=range(blocks - 1, blocks),
        )
    except cuda.OutOfBounds as e:
        raise AssertionError(
            f"{kernel} with n = 2**31 - 1: {e}\nUse size_t for the index and the stride."
        ) from None
    tail = y.tail_view()[-1023:]
    check_written(tail, kernel, 2.0)
    want = 3.5 if kernel == "vector_add" else 5.0
    assert np.all(tail == want), f"{kernel}: the last elements are {tail[:4]}, want {want}"
