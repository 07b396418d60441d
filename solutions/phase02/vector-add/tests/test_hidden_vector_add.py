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


@pytest.mark.kata_gate(
    "grid_size returns a grid above gridDim.x's limit (2**31 - 1 blocks) instead of raising "
    "ValueError, on random n past the limit"
)
def test_launch_refuses_grids_past_the_limit(launch):
    """Catches: no check of MAX_GRID_X at all (every other case of grid_size is right). Sizes
    drawn fresh each run, from one block past the limit to far beyond it."""
    rng = random_for("launch past the grid limit")
    for _ in range(20):
        block = rng.choice((rng.randrange(1, 1025), 32 * rng.randrange(1, 33)))
        n = (2**31 - 1) * block + rng.choice(
            (1, rng.randrange(1, block + 1), rng.randrange(1, 2**50))
        )
        with raises(ValueError, f"grid_size({n}, {block}) needs more than 2**31 - 1 blocks"):
            launch.grid_size(n, block)


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


# --------------------------------------------------------------------------- errors
# Programs of their own, compiled with g++ against your cuda_check.h and the public
# tests/data/fake_runtime.h (whose calls fail on demand and count how often they ran).
ERRORS_PROGRAMS = {
    # CUDA_CHECK in a function other than main: the program must end there.
    "helper": r"""
        static int allocate(cudaError_t result) {
          CUDA_CHECK(fake_call(result));
          return 7;
        }
        int main(int argc, char** argv) {
          int got = allocate((cudaError_t)atoi(argv[1]));
          printf("kept going after an error in a helper (it returned %d)\n", got);
          return 0;
        }
    """,
    # How often the failing call ran, printed at exit (CUDA_CHECK exits from inside).
    "once": r"""
        static void report(void) {
          printf("calls=%d last=%d sync=%d\n", fake_calls, fake_last_error_calls, fake_sync_calls);
          fflush(stdout);
        }
        int main(int argc, char** argv) {
          atexit(report);
          cudaError_t e = (cudaError_t)atoi(argv[2]);
          if (argv[1][0] == 'c') CUDA_CHECK(fake_call(e));
          if (argv[1][0] == 'l') { fake_last_error = e; CUDA_CHECK_LAUNCH(); }
          if (argv[1][0] == 's') { fake_sync_error = e; CUDA_CHECK_LAUNCH(); }
          return 0;
        }
    """,
    # After an unbraced if whose condition is false, nothing of the macro may run.
    "statement": r"""
        int main(int argc, char** argv) {
          int launched = argc > 99;
          if (launched) CUDA_CHECK_LAUNCH();
          if (launched) CUDA_CHECK(fake_call(cudaErrorInvalidValue));
          printf("calls=%d last=%d sync=%d\n", fake_calls, fake_last_error_calls, fake_sync_calls);
          return 0;
        }
    """,
    # Both macros as the statement of an if with an else, without braces: it must parse.
    "if-else": r"""
        int main(int argc, char** argv) {
          if (argc > 99) CUDA_CHECK_LAUNCH(); else printf("else ");
          if (argc > 99) CUDA_CHECK(fake_call(cudaSuccess)); else printf("else ");
          printf("done\n");
          return 0;
        }
    """,
}
ERRORS = (1, 2, 9, 100, 700)  # fake_runtime.h's failing codes
_STUB_BODIES = {"CUDA_CHECK": "(void)(call)", "CUDA_CHECK_LAUNCH": ""}


def _todo_if_stub(header: str, *macros: str) -> None:
    """Not started while a macro still reads like the stub's (comments and spaces aside)."""
    import re

    text = re.sub(r"/\*.*?\*/", " ", header.replace("\\\n", " "), flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    found = re.finditer(r"^\s*#\s*define\s+(\w+)(\([^)]*\))?(.*)$", text, flags=re.M)
    bodies = {m.group(1): re.sub(r"\s+", "", m.group(3)) for m in found}
    for name in macros:
        if bodies.get(name, _STUB_BODIES[name]) == _STUB_BODIES[name]:
            raise KataTodo(f"{name} in cuda_check.h is still the stub")


def _errors_program(kata, which: str, *macros: str):
    """Your cuda_check.h compiled into ERRORS_PROGRAMS[which]: a runner of its scenarios. A
    program that does not compile is a BuildError (the sources do not load: no gate trips)."""
    import subprocess
    import textwrap

    from harness.native.build import BuildError
    from harness.native.cache import ArtefactCache, hash_parts
    from harness.toolchain import find_tool

    header = kata.source("cuda_check.h").read_text()
    _todo_if_stub(header, *macros)
    cxx = find_tool("cxx")
    if cxx is None:
        pytest.skip("needs a C++ compiler (g++)")
    fake = (kata.dir / "tests" / "data" / "fake_runtime.h").read_text()
    program = (
        "#include <stdio.h>\n#include <stdlib.h>\n"
        '#include "fake_runtime.h"\n#include "cuda_check.h"\n'
        + textwrap.dedent(ERRORS_PROGRAMS[which])
    )

    def produce(tmp):
        (tmp / "cuda_check.h").write_text(header)
        (tmp / "fake_runtime.h").write_text(fake)
        (tmp / "program.cpp").write_text(program)
        cmd = [str(cxx), "-O1", "program.cpp", "-o", "program"]
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        (tmp / "build.log").write_text(proc.stdout + proc.stderr)

    key = hash_parts(["vector-add-hidden-errors-1", which, str(cxx), header, fake, program])
    entry = ArtefactCache().get_or_create(key, produce, label=f"errors {which}")
    exe = entry.path / "program"
    if not exe.exists():
        log = (entry.path / "build.log").read_text()
        raise BuildError(
            f"cuda_check.h does not compile in a program that uses {' and '.join(macros)} "
            f"({which}):\n{program}\n{log[-2000:]}",
            log=log,
            command=[str(cxx)],
        )

    def run(*args: str):
        return subprocess.run(
            [str(exe), *args], capture_output=True, text=True, timeout=10, check=False
        )

    return run


@pytest.mark.kata_gate(
    "CUDA_CHECK returns from the function it is used in instead of ending the program, when a "
    "call fails in a helper function called from main"
)
def test_errors_failure_in_a_helper_ends_the_program(kata, kata_random):
    """Catches: `return EXIT_FAILURE` instead of exit(EXIT_FAILURE): every CUDA_CHECK of the
    public demo is in main, where the two are the same. In a helper returning int, the return
    hands EXIT_FAILURE back to main as a value, and the program goes on after the error."""
    run = _errors_program(kata, "helper", "CUDA_CHECK")
    code = kata_random.choice(ERRORS)
    proc = run(str(code))
    assert proc.returncode == 1 and "kept going" not in proc.stdout, (
        f"CUDA_CHECK(fake_call(error {code})) in `static int allocate(...)` called from main: "
        f"exit status {proc.returncode}, stdout {proc.stdout.strip()!r}; expected the program to "
        "stop there with exit(EXIT_FAILURE)"
    )
    ok = run("0")
    assert ok.returncode == 0 and "returned 7" in ok.stdout, (
        f"CUDA_CHECK(fake_call(cudaSuccess)) in a helper: exit status {ok.returncode}, stdout "
        f"{ok.stdout.strip()!r}; a call that succeeds must let the helper go on"
    )


@pytest.mark.kata_gate(
    "CUDA_CHECK or CUDA_CHECK_LAUNCH runs a failing call more than once (a failing cudaMalloc "
    "or launch check repeated), on random error codes"
)
def test_errors_a_failing_call_runs_once(kata, kata_random):
    """Catches: `if ((call) != cudaSuccess) ... cudaGetErrorName(call)`: the failure path
    evaluates the call again to print it. fake_runtime.h counts every call."""
    run = _errors_program(kata, "once", "CUDA_CHECK", "CUDA_CHECK_LAUNCH")
    code = kata_random.choice(ERRORS)
    for mode, what, want in (
        ("c", "CUDA_CHECK(fake_call(error))", "calls=1 last=0 sync=0"),
        ("l", "CUDA_CHECK_LAUNCH() after a bad launch", "calls=0 last=1 sync=0"),
        ("s", "CUDA_CHECK_LAUNCH() after a faulting kernel", "calls=0 last=1 sync=1"),
    ):
        proc = run(mode, str(code))
        assert proc.returncode == 1 and want in proc.stdout, (
            f"{what} with error {code}: exit status {proc.returncode}, calls counted "
            f"{proc.stdout.strip()!r}; expected exit status 1 and {want!r} (each call once)"
        )


@pytest.mark.kata_gate(
    "CUDA_CHECK_LAUNCH or CUDA_CHECK is not a single statement: after an unbraced `if` whose "
    "condition is false, part of it still runs"
)
def test_errors_macros_are_single_statements(kata):
    """Catches: CUDA_CHECK_LAUNCH() written as two CUDA_CHECKs without do { } while (0)
    (`if (x) CUDA_CHECK_LAUNCH();` then always synchronises); the public demo puts only
    CUDA_CHECK after an if."""
    proc = _errors_program(kata, "statement", "CUDA_CHECK", "CUDA_CHECK_LAUNCH")()
    assert proc.returncode == 0 and "calls=0 last=0 sync=0" in proc.stdout, (
        "`if (false) CUDA_CHECK_LAUNCH();` and `if (false) CUDA_CHECK(fake_call(...));`: exit "
        f"status {proc.returncode}, calls counted {proc.stdout.strip()!r}; expected nothing to "
        "run (calls=0 last=0 sync=0)"
    )


def test_errors_macros_parse_before_an_else(kata):
    """`if (c) CUDA_CHECK_LAUNCH(); else g();` and the same with CUDA_CHECK must compile and
    take the else branch (a macro in braces without do { } while (0) does not parse here)."""
    proc = _errors_program(kata, "if-else", "CUDA_CHECK", "CUDA_CHECK_LAUNCH")()
    assert proc.returncode == 0 and proc.stdout.strip() == "else else done", (
        f"both macros after an unbraced if with an else: exit status {proc.returncode}, stdout "
        f"{proc.stdout.strip()!r}; expected 'else else done'"
    )


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


@pytest.mark.kata_gate(
    "vector_add's c is not a + b, or saxpy's y is not alpha * x + y, on random sizes, grids and "
    "blocks with alpha drawn at random"
)
def test_kernel_values_on_random_launches(vadd_ptx, kata_rng):
    """Both kernels' arithmetic, on launches drawn fresh each run (grids that cover n and grids
    that must stride, blocks that are not a multiple of 32); the structure gates below only
    count who touches what."""
    for trial in range(4):
        n = int(kata_rng.integers(1, 3000))
        block = int(kata_rng.choice([1, 32, 96, 100, 256, 1024]))
        grid = int(kata_rng.integers(1, 2 + -(-n // block)))
        alpha = np.float32(kata_rng.uniform(-4, 4))
        a = kata_rng.standard_normal(n, dtype=np.float32)
        b = kata_rng.standard_normal(n, dtype=np.float32)
        c = np.full(n, np.nan, dtype=np.float32)
        vadd_ptx("vector_add", [a, b, c, np.int32(n)], grid, block)
        if trial == 0 and wrote_nothing(c):
            raise KataTodo("vector_add wrote nothing yet")
        np.testing.assert_array_equal(
            c,
            a + b,
            err_msg=f"vector_add(a, b, c, n={n}) on {grid} blocks of {block}: c is not a + b",
        )
        y = b.copy()
        vadd_ptx("saxpy", [alpha, a, y, np.int32(n)], grid, block)
        if trial == 0 and np.array_equal(y, b):
            raise KataTodo("saxpy left y unchanged")
        np.testing.assert_allclose(
            y, alpha * a + b, rtol=1e-6, atol=1e-6,
            err_msg=f"saxpy({alpha}, x, y, n={n}) on {grid} blocks of {block}: y is not alpha x + y",
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
    # 4 blocks of 128 threads for 16K elements: 32 elements per thread.
    t = _traced_launch(cuda, kernel, 16 * 1024, 4, 128, kata_rng)
    if t is None:
        pytest.skip(f"{kernel} gives a wrong result on 4 blocks of 128 threads")
    for kind in ("load", "store"):
        lines = [s for s in t.lines if s.kind == kind]
        spr = sum(s.sectors for s in lines) / max(1, sum(s.requests for s in lines))
        assert spr <= 4.5, (
            f"{kernel}: {spr:.1f} sectors per warp {kind} (4 when 32 lanes read 32 "
            f"consecutive floats): consecutive threads must take consecutive elements\n{t.report()}"
        )


def _traced_launch(cuda, kernel, n, grid, block, rng):
    """The trace of `kernel` on n random floats, or None when its result is wrong (the launch
    tests say so: a structure gate measures right answers only)."""
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
    t = f.trace(*args, block=(block, 1, 1), grid=(grid, 1))
    if wrote_nothing(out) or (kernel == "saxpy" and np.array_equal(out, y)):
        raise KataTodo(f"{kernel} wrote nothing yet")
    return t if np.allclose(out, want, rtol=1e-6, atol=1e-6) else None


def _spread(t, n, grid, block):
    """'' when every thread of the grid takes its share (at most ceil(n / threads) elements:
    two loads and one store each, and every thread works while n >= threads), else why not."""
    threads = grid * block
    share = -(-n // threads)
    loads, stores = t.most_per_thread["global load"], t.most_per_thread["global store"]
    working = t.active_threads["global store"]
    if loads <= 2 * share and stores <= share and working == min(n, threads):
        return ""
    return (
        f"n={n} on {grid} blocks of {block}: {working} of the {threads} threads store, the "
        f"busiest makes {loads} loads and {stores} stores; a grid-stride loop gives every "
        f"thread at most ceil(n / threads) = {share} elements (2 loads and a store each)"
    )


@pytest.mark.kata_gate(
    "vector_add or saxpy does not spread the elements over the grid's threads (a thread takes "
    "more than ceil(n / threads) of them, or a thread with elements to take stays idle), on "
    "random grids smaller than n and covering n"
)
@pytest.mark.parametrize("kernel", ["vector_add", "saxpy"])
def test_kernel_every_thread_takes_its_share(cuda, kernel, kata_rng):
    """Catches: one thread walking the whole array, thread 0 (or warp 0) of each block walking
    its block's share while the others idle, and a kernel that does one element per thread
    when the grid covers n but lets one thread per block walk the data otherwise -- all right,
    all coalesced enough, the grid-stride loop run 32 to 256 times narrower."""
    rng = kata_rng
    block = int(rng.choice([64, 96, 128, 256]))
    grid = int(rng.integers(2, 7))
    small = int(rng.integers(3, 9)) * grid * block + int(rng.integers(1, block))
    cover = int(rng.integers(1, 5)) * block - int(rng.integers(1, block))
    for n, g in ((small, grid), (cover, -(-cover // block))):
        t = _traced_launch(cuda, kernel, n, g, block, rng)
        if t is None:
            pytest.skip(f"{kernel} gives a wrong result for n={n} on {g} blocks of {block}")
        why = _spread(t, n, g, block)
        assert not why, f"{kernel}: {why}\n{t.report()}"


@pytest.mark.kata_gate(
    "the grid-stride loop's index is 32 bits: past 2**31 - 1 elements i + stride wraps to a "
    "negative index"
)
@pytest.mark.parametrize("kernel", ["vector_add", "saxpy"])
def test_kernel_index_is_64_bit(cuda, kernel):
    """Catches: `int i` / `int stride`. n = 2**31 - 1 with 2**21 blocks of 1024: only the last
    block runs (a probe of the cpu backend), over 8 GiB arrays of which only the tail exists. Its threads start at
    2**31 - 1024 + t; adding the stride (2**31) overflows an int to -1024 + t, still < n."""
    # The probe needs thread (b, t) to take element b * blockDim.x + t on a grid that covers n:
    # a kernel that spreads its work otherwise is the spread gate's business, not this one's.
    rng = np.random.default_rng(seeded(f"64-bit precondition {kernel}"))
    t = _traced_launch(cuda, kernel, 5 * 128 - 37, 5, 128, rng)
    if t is None or _spread(t, 5 * 128 - 37, 5, 128):
        pytest.skip(f"{kernel} does not take one element per thread on a grid that covers n")
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
            f"{kernel} with n = 2**31 - 1, the last of 2**21 blocks of 1024 threads: {e}\n"
            "Use size_t for the index and the stride."
        ) from None
    tail = y.tail_view()[-1023:]
    check_written(tail, kernel, 2.0)
    want = 3.5 if kernel == "vector_add" else 5.0
    assert np.all(tail == want), f"{kernel}: the last elements are {tail[:4]}, want {want}"
