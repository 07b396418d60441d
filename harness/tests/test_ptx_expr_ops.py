"""The PTX interpreter on nvcc's PTX for the expr-to-ptx kata's language, and the kata's own
compiler (its reference) against nvcc, element by element.

Each kernel of harness/ptx/samples/expr_ops.cu is one expression of the language written as CUDA
C. Its PTX (checked in for sm_75; fresh from nvcc for sm_75 and sm_90 when nvcc is installed)
runs on the interpreter, and so does the PTX the kata's reference compiler makes of the same
expression: they must agree bit for bit (NaN payloads aside), on inputs with NaN, infinities,
-0.0 and subnormals. nvcc's PTX is very different code — branches instead of selp, magic-number
multiplications for constant divisors, its own register use — so agreement checks both the
interpreter's instruction semantics and the kata's instruction selection. A few results are
also checked against numpy, so that two wrong answers cannot agree.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import harness.ptx as ptx
from harness.loader import context_for
from harness.ptx import load_module, run_kernel
from harness.toolchain import find_tool

ROOT = Path(__file__).resolve().parents[2]
KATA = ROOT / "katas" / "phase03" / "expr-to-ptx"
SAMPLES = Path(ptx.__file__).parent / "samples"
HAVE_NVCC = find_tool("nvcc") is not None
HEAD = "in x: f32, y: f32, k: i32, j: i32;\n"
# kernel name in expr_ops.cu -> the same expression in the kata's language
PROGRAMS = {
    "arith": "x * y + 2.5",
    "divide": "(x - y) / (y * y + 1.0)",
    "roots": "sqrt(abs(x)) + rsqrt(abs(y) + 1.0)",
    "approx": "sin(x) * cos(y) - exp2(x * 0.1) + log2(abs(y) + 0.5)",
    "minmax": "min(x, y) - max(x, -y) + abs(x)",
    "compare": "x != y ? x : (x < y ? y : 0.5)",
    "tofloat": "f32(k) * 0.25 + f32(j % 7)",
    "intdiv": "k / 7 + j % 5 - k / j + k % j",
    "toint": "i32(x * 100.0) - min(k, j) * abs(j)",
    "intsel": "k >= j ? k - j : -(k * 3)",
    "mixed": "max(k, 0) + (x <= y ? 1 : 2) * (k == j ? 3 : 4)",
    "lets": "let s = x * x; let t = s - y; t > 0.0 ? sqrt(t) : -t",
}
N = 300
RNG = np.random.default_rng(11)
SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-40, 1.0, -1.0, 3e9]
X = np.concatenate([RNG.standard_normal(N - len(SPECIAL)) * 20, SPECIAL]).astype(np.float32)
Y = np.roll(X, 7) * np.float32(0.5)
K = RNG.integers(-5000, 5000, N).astype(np.int32)
J = (RNG.integers(1, 60, N) * RNG.choice([-1, 1], N)).astype(np.int32)  # never 0: k / j, k % j
SOURCES = [
    "checked-in",
    pytest.param("nvcc-sm_75", marks=pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")),
    pytest.param("nvcc-sm_90", marks=pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")),
]
pytestmark = pytest.mark.skipif(not KATA.is_dir(), reason="the expr-to-ptx kata is not here")


@pytest.fixture(scope="module", params=SOURCES)
def nvcc_module(request: pytest.FixtureRequest) -> ptx.LoadedModule:
    if request.param == "checked-in":
        return load_module((SAMPLES / "expr_ops_sm75.ptx").read_text())
    from harness.cuda.static import compile_ptx

    arch = request.param.split("-")[1]
    options = ["-O3", "-fmad=false", "-diag-suppress=177"]
    return load_module(compile_ptx(SAMPLES / "expr_ops.cu", arch, options))


@pytest.fixture(scope="module")
def compiler():
    return context_for(KATA / "kata.toml", "solution").module("compiler")


def _run_nvcc(mod: ptx.LoadedModule, name: str, dtype) -> np.ndarray:
    out = np.zeros(N, dtype)
    mod.launch(name, [out, X, Y, K, J, np.uint32(N)], grid=-(-N // 128), block=128)
    return out


def _run_ours(compiler, name: str, dtype) -> np.ndarray:
    out = np.zeros(N, dtype)
    text = compiler.compile_source(HEAD + PROGRAMS[name]).ptx
    run_kernel(text, "expr", [out, X, Y, K, J, np.uint32(N)], grid=-(-N // 128), block=128)
    return out


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a == b


def test_every_kernel_has_a_program(nvcc_module) -> None:
    assert set(nvcc_module.module.kernels) == set(PROGRAMS)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_nvcc_and_the_kata_compiler_agree(nvcc_module, compiler, name: str) -> None:
    dtype = np.int32 if name in ("intdiv", "toint", "intsel", "mixed") else np.float32
    theirs, ours = _run_nvcc(nvcc_module, name, dtype), _run_ours(compiler, name, dtype)
    bad = np.flatnonzero(~_same(theirs, ours))
    assert not bad.size, (
        f"{name}: {PROGRAMS[name]}: element {bad[0]} (x={X[bad[0]]!r}, y={Y[bad[0]]!r}, "
        f"k={K[bad[0]]}, j={J[bad[0]]}): nvcc's PTX gives {theirs[bad[0]]!r}, ours {ours[bad[0]]!r}"
    )


def test_some_results_against_numpy(nvcc_module) -> None:
    np.testing.assert_array_equal(_run_nvcc(nvcc_module, "arith", np.float32), X * Y + np.float32(2.5))  # fmt: skip
    with np.errstate(all="ignore"):
        want = (X - Y) / (Y * Y + np.float32(1))
    np.testing.assert_array_equal(_run_nvcc(nvcc_module, "divide", np.float32), want)
    k, j = K.astype(np.int64), J.astype(np.int64)
    q = lambda a, b: np.trunc(a / b).astype(np.int64)  # noqa: E731  C division
    want = q(k, 7) + (j - q(j, 5) * 5) - q(k, j) + (k - q(k, j) * j)
    np.testing.assert_array_equal(_run_nvcc(nvcc_module, "intdiv", np.int32), want.astype(np.int32))  # fmt: skip
