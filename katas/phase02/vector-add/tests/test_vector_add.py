"""Public tests of the vector-add kata. Each group is one task of kata.toml.

launch:  launch.py's grid_size and launch_config.
errors:  cuda_check.h's CUDA_CHECK, compiled with g++ against tests/data/fake_runtime.h (a stand-in
         for cuda_runtime.h whose calls fail on demand), so it runs on any machine.
kernel:  vector_add.cu compiled to PTX by nvcc and run on the harness's PTX interpreter.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness import KataTodo
from harness.cuda import static
from harness.native.cache import ArtefactCache, hash_parts
from harness.ptx import load_module
from harness.testing import wrote_nothing
from harness.toolchain import find_tool

DATA = Path(__file__).parent / "data"  # check_demo.cpp, fake_runtime.h


# --------------------------------------------------------------------------- launch
@pytest.mark.parametrize(
    ("n", "block", "grid"),
    [(1, 256, 1), (255, 256, 1), (257, 256, 2), (1000, 256, 4), (10**6, 128, 7813), (0, 256, 0)],
)
def test_launch_grid_size(launch, n, block, grid):
    assert launch.grid_size(n, block) == grid


def test_launch_grid_size_covers_every_element(launch):
    for n in (1, 31, 33, 1023, 4097):
        for block in (32, 100, 256, 1024):
            grid = launch.grid_size(n, block)
            assert grid * block >= n > (grid - 1) * block, (n, block, grid)


def test_launch_grid_size_rejects_bad_arguments(launch):
    for n, block, word in [(-1, 256, "n"), (10, 0, "block_size"), (10, 2048, "block_size")]:
        with pytest.raises(ValueError, match=word):
            launch.grid_size(n, block)
    with pytest.raises(ValueError, match="n"):
        launch.grid_size(2.5, 256)  # a float n is a bug in the caller
    with pytest.raises(ValueError, match="grid"):
        launch.grid_size(2**31 * 1024, 1024)  # more blocks than gridDim.x allows


def test_launch_config_caps_the_grid_at_the_machine(launch):
    # A T4 holds 40 SMs x (1024 // 256) = 160 blocks of 256 threads at once.
    assert launch.launch_config(10**8, 256, "T4") == (160, 256)
    # An H200: 132 SMs x (2048 // 512) = 528 blocks of 512.
    assert launch.launch_config(10**8, 512, "H200") == (528, 512)
    # Small inputs need fewer blocks than that: no idle blocks.
    assert launch.launch_config(1000, 256, "T4") == (4, 256)


def test_launch_config_edge_cases(launch):
    assert launch.launch_config(0) == (0, 256)
    assert launch.launch_config(1, 1024, "T4") == (1, 1024)
    with pytest.raises(ValueError, match="T4"):
        launch.launch_config(100, 256, "GTX 480")  # the message lists the known devices


# --------------------------------------------------------------------------- errors
# The stub's definitions: while a macro still reads like this, its tests are *not started*.
_STUB_BODIES = {"CUDA_CHECK": "(void)(call)", "CUDA_CHECK_LAUNCH": ""}


def _macro_bodies(header: str) -> dict[str, str]:
    """name -> body (comments and spaces removed) of each #define in `header`."""
    text = re.sub(r"/\*.*?\*/", " ", header.replace("\\\n", " "), flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    found = re.finditer(r"^\s*#\s*define\s+(\w+)(\([^)]*\))?(.*)$", text, flags=re.M)
    return {m.group(1): re.sub(r"\s+", "", m.group(3)) for m in found}


def _todo_if_stub(check_demo: Path, *macros: str) -> None:
    bodies = _macro_bodies((check_demo.parent / "cuda_check.h").read_text())
    for name in macros:
        if bodies.get(name, _STUB_BODIES[name]) == _STUB_BODIES[name]:
            raise KataTodo(f"{name} in cuda_check.h is still the stub")


@pytest.fixture(scope="module")
def check_demo(kata) -> Path:
    """check_demo.cpp + your cuda_check.h, built once (cached by content) with g++."""
    cxx = find_tool("cxx")
    if cxx is None:
        pytest.skip("needs a C++ compiler (g++)")
    header = kata.source("cuda_check.h")
    texts = [header.read_text(), (DATA / "fake_runtime.h").read_text()]
    demo = (DATA / "check_demo.cpp").read_text()

    def produce(tmp: Path) -> None:
        (tmp / "cuda_check.h").write_text(texts[0])
        (tmp / "fake_runtime.h").write_text(texts[1])
        (tmp / "check_demo.cpp").write_text(demo)
        cmd = [str(cxx), "-O1", "-Wall", "check_demo.cpp", "-o", "check_demo"]
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        (tmp / "build.log").write_text(proc.stdout + proc.stderr)

    key = hash_parts(["vector-add-check-demo-1", str(cxx), *texts, demo])
    entry = ArtefactCache().get_or_create(key, produce, label="check_demo")
    exe = entry.path / "check_demo"
    if not exe.exists():
        pytest.fail(
            "cuda_check.h does not compile with check_demo.cpp:\n"
            + (entry.path / "build.log").read_text()[-3000:],
            pytrace=False,
        )
    return exe


def _run(exe: Path, scenario: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), scenario], capture_output=True, text=True, timeout=10)


def _line(marker: str) -> int:
    """The line of check_demo.cpp that carries `// LINE:<marker>`."""
    lines = (DATA / "check_demo.cpp").read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if f"// LINE:{marker}" in text)


def test_errors_success_passes_through(check_demo):
    _todo_if_stub(check_demo, "CUDA_CHECK")
    proc = _run(check_demo, "ok")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "else calls=1\n", "the call must run exactly once, and print nothing"
    assert proc.stderr == ""


def test_errors_failure_names_place_error_and_call(check_demo):
    _todo_if_stub(check_demo, "CUDA_CHECK")
    proc = _run(check_demo, "fail")
    assert proc.returncode == 1, "CUDA_CHECK must exit(EXIT_FAILURE) on an error"
    assert "kept going" not in proc.stdout
    err = proc.stderr
    assert f"check_demo.cpp:{_line('fail')}" in err, f"file:line of the call: {err!r}"
    assert "cudaErrorMemoryAllocation" in err and "out of memory" in err, err
    assert "(2)" in err, f"the error number: {err!r}"
    assert "fake_call(cudaErrorMemoryAllocation)" in err, f"the call's text (#call): {err!r}"


def test_errors_launch_configuration_error(check_demo):
    _todo_if_stub(check_demo, "CUDA_CHECK_LAUNCH")
    proc = _run(check_demo, "launch")
    assert proc.returncode == 1 and "kept going" not in proc.stdout
    assert "cudaErrorInvalidConfiguration" in proc.stderr, proc.stderr
    assert f"check_demo.cpp:{_line('launch')}" in proc.stderr, proc.stderr


def test_errors_error_while_the_kernel_ran(check_demo):
    _todo_if_stub(check_demo, "CUDA_CHECK_LAUNCH")
    # The launch itself was fine; the kernel faulted. Only the synchronising call sees it.
    proc = _run(check_demo, "async")
    assert proc.returncode == 1 and "kept going" not in proc.stdout
    assert "cudaErrorIllegalAddress" in proc.stderr, proc.stderr


def test_errors_launch_check_calls_both(check_demo):
    _todo_if_stub(check_demo, "CUDA_CHECK_LAUNCH")
    proc = _run(check_demo, "launch-ok")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "last=1 sync=1\n", "CUDA_CHECK_LAUNCH: cudaGetLastError, then sync"


# --------------------------------------------------------------------------- kernel
SENTINEL = np.float32(-7.25)  # what output elements hold before the kernel runs


class Kernels:
    """vector_add.cu compiled to PTX by nvcc (cached) and run on the harness's PTX interpreter:
    every thread of the grid, with bounds-checked global memory (an access past the end of an
    array is an error naming the thread and the PTX line)."""

    def __init__(self, source: Path) -> None:
        ptx = static.compile_ptx(source, "sm_75", cache=ArtefactCache())
        self.module = load_module(ptx)
        readable = static.demangle(self.module.kernels)
        self.names = {full.split("(")[0].split()[-1]: name for name, full in readable.items()}

    def launch(self, kernel: str, args: list, grid: int, block: int) -> None:
        if kernel not in self.names:
            raise AssertionError(f"vector_add.cu has no kernel {kernel!r}: {sorted(self.names)}")
        self.module.launch(self.names[kernel], args, (grid, 1, 1), (block, 1, 1), max_steps=10**6)


@pytest.fixture(scope="module")
def vadd(kata):
    return Kernels(kata.source("vector_add.cu"))


def _inputs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)


def run_vector_add(vadd, n: int, grid: int, block: int) -> np.ndarray:
    """c after vector_add(a, b, c, n) on exactly-sized buffers (an access past n is an error)."""
    a, b = _inputs(max(n, 1))
    c = np.full(max(n, 1), SENTINEL, dtype=np.float32)
    vadd.launch("vector_add", [a, b, c, np.int32(n)], grid, block)
    if n > 0 and wrote_nothing(c, SENTINEL):
        raise KataTodo("vector_add wrote nothing yet")
    if n > 0:
        missing = np.flatnonzero(c != a + b)
        assert missing.size == 0, (
            f"n={n}, grid={grid}, block={block}: {missing.size} elements wrong, "
            f"first at index {missing[0]} (got {c[missing[0]]}, want {a[missing[0]] + b[missing[0]]})"
        )
    return c


def test_kernel_one_thread_per_element(vadd):
    # 4 blocks x 256 = 1024 threads for 1000 elements: the last 24 threads must do nothing.
    run_vector_add(vadd, 1000, 4, 256)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1023, 4097, 65543])
def test_kernel_sizes_that_are_not_multiples(vadd, n):
    run_vector_add(vadd, n, (n + 127) // 128, 128)


def test_kernel_grid_smaller_than_the_data(vadd):
    # 8 blocks of 128 = 1024 threads for 100 000 elements: each thread does ~98 of them.
    run_vector_add(vadd, 100_000, 8, 128)


def test_kernel_more_threads_than_elements(vadd):
    run_vector_add(vadd, 10, 4, 256)


def test_kernel_n_zero_touches_nothing(vadd):
    run_vector_add(vadd, 1, 1, 64)  # first: the kernel does write when there is work
    c = run_vector_add(vadd, 0, 1, 64)
    assert c[0] == SENTINEL, "with n == 0 the kernel must not write c[0]"


def test_kernel_saxpy(vadd):
    # One block of 256 threads for 5000 elements: the grid-stride loop does all the work.
    n = 5000
    x, y = _inputs(n, seed=1)
    want = np.float32(2.5) * x + y
    out = y.copy()
    vadd.launch("saxpy", [np.float32(2.5), x, out, np.int32(n)], 1, 256)
    if np.array_equal(out, y):
        raise KataTodo("saxpy left y unchanged")
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
