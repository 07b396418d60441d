"""The PTX interpreter (harness.ptx) against numpy, on PTX that nvcc emits.

Kernels are written in CUDA C (harness/ptx/samples/kernels.cu). Their sm_75 PTX is checked in,
so every check runs without nvcc; with nvcc installed the same checks also run on fresh sm_75 and
sm_90 output. Hand-written PTX pins the corners nvcc rarely shows: rounding modes, saturation,
NaN compares, shift clamping, error messages.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.ptx as ptx
from harness.ptx import (
    PtxRuntimeError,
    PtxSyntaxError,
    PtxUnsupportedError,
    load_module,
    run_kernel,
)
from harness.toolchain import find_tool

SAMPLES = Path(ptx.__file__).parent / "samples"
HAVE_NVCC = find_tool("nvcc") is not None
SOURCES = [
    "checked-in",
    pytest.param("nvcc-sm_75", marks=pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")),
    pytest.param("nvcc-sm_90", marks=pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")),
]


@pytest.fixture(scope="module", params=SOURCES)
def sample(request: pytest.FixtureRequest) -> ptx.LoadedModule:
    if request.param == "checked-in":
        return load_module((SAMPLES / "kernels_sm75.ptx").read_text())
    from harness.cuda.static import compile_ptx

    arch = request.param.split("-")[1]
    text = compile_ptx(SAMPLES / "kernels.cu", arch, ["-O3"])
    assert f".target {arch}" in text
    return load_module(text)


def _launch(mod: ptx.LoadedModule, name: str, args: list, n: int, block: int = 128):
    return mod.launch(name, args, grid=(n + block - 1) // block, block=block)


def _fma32(a: np.ndarray, b: np.ndarray, c: float) -> np.ndarray:
    """Fused multiply-add rounded once, as fma.rn.f32 does (exact in float64 for these sizes)."""
    return (a.astype(np.float64) * b.astype(np.float64) + np.float64(c)).astype(np.float32)


# --------------------------------------------------------------------------- nvcc's PTX
def test_saxpy_matches_numpy_and_respects_the_bounds_check(sample) -> None:
    n = 1000  # not a multiple of the block: the last block has 24 idle threads
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, n)).astype(np.float32)
    out = np.full(n + 24, -7.0, dtype=np.float32)  # room past n: idle threads must not write
    stats = _launch(sample, "saxpy", [a, b, out, np.int32(n)], n)
    np.testing.assert_array_equal(out[:n], _fma32(a, b, 3.0))  # nvcc contracts a*b+3 to fma
    assert (out[n:] == -7.0).all()
    assert stats.threads == 1024
    assert stats.opcodes["st.global.f32"] == n  # one store per in-range thread


def test_saxpy_out_of_bounds_names_the_thread_and_buffer(sample) -> None:
    a = np.ones(100, np.float32)
    b = np.ones(100, np.float32)
    out = np.zeros(100, np.float32)
    with pytest.raises(PtxRuntimeError) as err:
        _launch(sample, "saxpy", [a, b, out, np.int32(101)], 101)  # n one too large
    msg = str(err.value)
    assert "thread (100, 0, 0) of block (0, 0, 0)" in msg
    assert "past the end of argument" in msg and "400 bytes" in msg


def _c_div(x: np.ndarray, y: int) -> np.ndarray:
    return np.trunc(x / y).astype(np.int64)


@settings(deadline=None, max_examples=25)
@given(
    st.lists(st.integers(-(2**15), 2**15), min_size=1, max_size=300),
    st.integers(0, 2**31 - 1),
)
def test_integer_ops_follow_c_semantics(sample, xs: list[int], seed: int) -> None:
    x = np.array(xs, dtype=np.int64)
    y = np.random.default_rng(seed).integers(-(2**15), 2**15, x.size)
    out = np.zeros(x.size, np.int32)
    _launch(sample, "intops", [x.astype(np.int32), y.astype(np.int32), out, np.int32(x.size)], x.size)  # fmt: skip
    want = (
        ((x ^ y) << 3) + (x >> 2) - (y & 7) + _c_div(x, 7) + (y - _c_div(y, 5) * 5)
        + np.minimum(x, y) * np.abs(y)
    )  # fmt: skip
    np.testing.assert_array_equal(out, want.astype(np.int32))


def test_select_sqrt_and_expf(sample) -> None:
    n = 2048
    rng = np.random.default_rng(2)
    a = (rng.standard_normal(n) * 30).astype(np.float32)
    b = (rng.standard_normal(n) * 30).astype(np.float32)
    out = np.zeros(n, np.float32)
    _launch(sample, "select_math", [a, b, out, np.int32(n)], n)
    taken = a > b
    assert 0.3 < taken.mean() < 0.7  # both sides of the branch ran
    np.testing.assert_array_equal(out[taken], np.sqrt(np.abs(a[taken])))  # sqrt.rn is exact
    exact = np.exp((b[~taken] * np.float32(0.1)).astype(np.float64))  # mul.f32, then expf
    # expf is nvcc's ex2.approx-based sequence: within 2 ulp of the true value.
    np.testing.assert_allclose(out[~taken], exact, rtol=2.4e-7)


def test_conversions(sample) -> None:
    n = 500
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(n) * 100).astype(np.float32)
    oi, ou = np.zeros(n, np.int32), np.zeros(n, np.uint32)
    of, od = np.zeros(n, np.float32), np.zeros(n, np.float64)
    _launch(sample, "conversions", [a, oi, ou, of, od, np.int32(n)], n)
    np.testing.assert_array_equal(oi, np.trunc(a).astype(np.int32))
    np.testing.assert_array_equal(ou, np.trunc(a * a).astype(np.uint32))
    want = np.trunc(a * np.float32(10)) + np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(of, want.astype(np.float32))
    np.testing.assert_array_equal(od, a.astype(np.float64) * 1.5)


def test_divergent_loop_trip_counts(sample) -> None:
    n = 300
    a = np.linspace(-3, 3, n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    stats = _launch(sample, "ragged_loop", [a, out, np.int32(n)], n, block=64)
    want = np.zeros(n, np.float32)
    for i in range(n):
        for k in range(i % 7):
            want[i] = np.float32(np.float64(a[i]) * k + np.float64(want[i]))
    np.testing.assert_array_equal(out, want)
    # Threads with fewer trips idle while others loop: fewer thread-instructions than issues x n.
    assert stats.thread_instructions < stats.issues * stats.threads
    assert stats.opcodes["fma.rn.f32"] == sum(i % 7 for i in range(n))


def test_two_dimensional_grid(sample) -> None:
    rows, cols = 37, 53
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, rows, cols)).astype(np.float32)
    c = np.zeros((rows, cols), np.float32)
    sample.launch("matrix_add", [a, b, c, np.int32(rows), np.int32(cols)], grid=(4, 3), block=(16, 16))  # fmt: skip
    np.testing.assert_array_equal(c, _fma32(np.full_like(b, -2.0), b, 0.0) + a)


@settings(deadline=None, max_examples=20)
@given(st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 2000), min_size=1, max_size=100))
def test_64_bit_unsigned_ops(sample, xs: list[int]) -> None:
    x = np.array(xs, dtype=np.uint64)
    out, small = np.zeros(x.size, np.uint64), np.zeros(x.size, np.uint32)
    _launch(sample, "wide_ints", [x, out, small, np.int32(x.size)], x.size)
    want = [((v >> 7) * 3 + (v // 3 if v < 1000 else v % 1000)) % 2**64 for v in xs]
    assert out.tolist() == want
    low = [v & 0xFFFFFFFF for v in xs]
    assert small.tolist() == [(v ^ 0xFF) if v > 100 else 1 for v in low]


# --------------------------------------------------------------------------- hand-written PTX
HEADER = ".version 7.0\n.target sm_75\n.address_size 64\n"


def _kernel(body: str, regs: str = "", params: str = ".param .u64 out") -> str:
    decls = "\n".join(
        [
            ".reg .pred %p<8>;",
            ".reg .b32 %r<16>;",
            ".reg .f32 %f<16>;",
            ".reg .b64 %rd<16>;",
            ".reg .f64 %fd<8>;",
            regs,
        ]
    )
    return f"{HEADER}.visible .entry k({params})\n{{\n{decls}\nld.param.u64 %rd1, [out];\ncvta.to.global.u64 %rd1, %rd1;\n{body}\nret;\n}}\n"  # fmt: skip


def _run_scalar(body: str, dtype: type, count: int = 1) -> np.ndarray:
    out = np.zeros(count, dtype=dtype)
    run_kernel(_kernel(body), "k", [out])
    return out


def _f32(x: float) -> str:
    return "0f" + np.array(x, np.float32).view(np.uint32).item().to_bytes(4, "big").hex().upper()


def test_fma_rounds_once() -> None:
    # a*b = 1 + 2^-11 + 2^-24 exactly; the f32 product alone rounds the 2^-24 away.
    a = _f32(1 + 2**-12)
    c = _f32(-(1 + 2**-11))
    body = f"fma.rn.f32 %f1, {a}, {a}, {c};\nmul.rn.f32 %f2, {a}, {a};\nadd.f32 %f2, %f2, {c};\nst.global.f32 [%rd1], %f1;\nst.global.f32 [%rd1+4], %f2;"  # fmt: skip
    fused, unfused = _run_scalar(body, np.float32, 2)
    assert fused == np.float32(2**-24) and unfused == 0.0


@pytest.mark.parametrize(
    ("mode", "x", "want"),
    [
        ("rn", 1 / 3, np.float32(1 / 3)),
        ("rz", 1 / 3, np.nextafter(np.float32(1 / 3), np.float32(0))),  # 1/3 rounds up in rn
        ("rm", 1 / 3, np.nextafter(np.float32(1 / 3), np.float32(0))),
        ("rp", 1 / 3, np.float32(1 / 3)),
        ("rz", -1 / 3, -np.nextafter(np.float32(1 / 3), np.float32(0))),
        ("rm", -1 / 3, np.float32(-1 / 3)),
        ("rp", -1 / 3, -np.nextafter(np.float32(1 / 3), np.float32(0))),
    ],
)
def test_cvt_f64_to_f32_rounding_modes(mode: str, x: float, want: np.float32) -> None:
    bits = np.array(x, np.float64).view(np.uint64).item()
    body = f"mov.f64 %fd1, 0d{bits:016X};\ncvt.{mode}.f32.f64 %f1, %fd1;\nst.global.f32 [%rd1], %f1;"  # fmt: skip
    assert _run_scalar(body, np.float32)[0] == want


def test_directed_add_sees_bits_below_the_last_place() -> None:
    tiny = _f32(2**-30)
    body = "\n".join(
        f"add.{m}.f32 %f{i}, 0f3F800000, {tiny};\nst.global.f32 [%rd1+{4 * i}], %f{i};"
        for i, m in enumerate(("rn", "rz", "rm", "rp"))
    )
    rn, rz, rm, rp = _run_scalar(body, np.float32, 4)
    assert rn == rz == rm == 1.0
    assert rp == np.nextafter(np.float32(1), np.float32(2))


def test_float_to_int_saturates_and_rounds_half_to_even() -> None:
    values = [3e9, -3e9, float("nan"), 2.5, -2.5, 3.5, 2.7]
    modes = ["rzi", "rzi", "rzi", "rni", "rni", "rni", "rmi"]
    body = "\n".join(
        f"cvt.{m}.s32.f32 %r{i}, {_f32(v)};\nst.global.s32 [%rd1+{4 * i}], %r{i};"
        for i, (m, v) in enumerate(zip(modes, values, strict=True))
    )
    got = _run_scalar(body, np.int32, len(values)).tolist()
    assert got == [2**31 - 1, -(2**31), 0, 2, -2, 4, 2]


def test_nan_compares_ordered_and_unordered() -> None:
    ops = ["lt", "ltu", "ne", "neu", "eq", "equ", "num", "nan"]
    nan = "0f7FC00000"
    body = "\n".join(
        f"setp.{op}.f32 %p1, {nan}, 0f3F800000;\nselp.u32 %r{i}, 1, 0, %p1;\nst.global.u32 [%rd1+{4 * i}], %r{i};"  # fmt: skip
        for i, op in enumerate(ops)
    )
    got = dict(zip(ops, _run_scalar(body, np.uint32, len(ops)).tolist(), strict=True))
    assert got == {"lt": 0, "ltu": 1, "ne": 0, "neu": 1, "eq": 0, "equ": 1, "num": 0, "nan": 1}


def test_shifts_clamp_and_signed_division_truncates() -> None:
    lines = [
        "shl.b32 %r1, 1, 40;",  # amount >= 32: 0
        "shr.s32 %r2, -8, 40;",  # arithmetic: sign fill
        "shr.u32 %r3, -8, 40;",
        "shr.s32 %r4, -8, 1;",
        "div.s32 %r5, -7, 2;",  # toward zero: -3
        "rem.s32 %r6, -7, 2;",  # sign of the dividend: -1
        "div.u32 %r7, -7, 2;",
        "div.s32 %r8, 5, 0;",  # hardware: all ones
    ]
    body = "\n".join(lines) + "\n" + "\n".join(f"st.global.s32 [%rd1+{4 * (i - 1)}], %r{i};" for i in range(1, 9))  # fmt: skip
    got = _run_scalar(body, np.int32, 8).tolist()
    assert got == [0, -1, 0, -4, -3, -1, (2**32 - 7) // 2, -1]


def test_wide_and_high_multiplies_and_vector_moves() -> None:
    body = """
mul.wide.s32 %rd2, -3, 1000000;
mul.hi.u64 %rd3, -1, -1;
mov.b64 %rd4, {%r1, %r2};
mov.b64 {%r3, %r4}, %rd2;
st.global.s64 [%rd1], %rd2;
st.global.u64 [%rd1+8], %rd3;
cvt.u64.u32 %rd5, %r4;
st.global.u64 [%rd1+16], %rd5;
"""
    got = _run_scalar(body, np.uint64, 3)
    assert got.view(np.int64)[0] == -3_000_000
    assert got[1] == 2**64 - 2  # (2^64-1)^2 >> 64
    assert got[2] == (-3_000_000 % 2**64) >> 32


def test_setp_writes_complement_and_combines() -> None:
    body = """
mov.u32 %r1, %tid.x;
setp.lt.and.u32 %p1|%p2, %r1, 2, 1;
selp.u32 %r2, 1, 0, %p1;
selp.u32 %r3, 10, 0, %p2;
add.u32 %r4, %r2, %r3;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r4;
"""
    out = np.zeros(4, np.uint32)
    run_kernel(_kernel(body), "k", [out], block=4)
    assert out.tolist() == [1, 1, 10, 10]


def test_misaligned_store_is_an_error() -> None:
    with pytest.raises(PtxRuntimeError, match="misaligned"):
        _run_scalar("st.global.f32 [%rd1+2], 0f00000000;", np.float32, 2)


# --------------------------------------------------------------------------- diagnostics
@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        ("", PtxSyntaxError, "starts with .version"),
        (".target sm_75\n.address_size 64\n", PtxSyntaxError, "starts with .version"),
        (_kernel("mov.u32 %q1, 0;"), PtxSyntaxError, r"%q1 is not declared"),
        (_kernel("bra $nowhere;"), PtxSyntaxError, "not a label"),
        (_kernel("add.f32 %f1, %u1, %f2;", ".reg .u32 %u<2>;"), PtxSyntaxError, r"%u1 is .u32"),
        (_kernel("add.s32 %r1, %f1, %r2;"), PtxSyntaxError, r"%f1 is .f32"),
        (_kernel("mov.u32 %r1, 0"), PtxSyntaxError, "missing ';'"),
        (_kernel("bfind.u32 %r1, %r2;"), PtxUnsupportedError, "does not implement 'bfind.u32'"),
        (_kernel("cvt.s32.f32 %r1, %f1;"), PtxSyntaxError, "needs .rni, .rzi"),
    ],
)
def test_bad_ptx_is_reported_with_its_line(text: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        run_kernel(text, "k", [np.zeros(1, np.float32)])


def test_undeclared_register_error_names_the_line() -> None:
    text = _kernel("mov.u32 %r1, 0;\nmov.u32 %q2, %r1;")
    with pytest.raises(PtxSyntaxError) as err:
        load_module(text).decoded(load_module(text).kernel("k"))
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "%q2" in s)
    assert err.value.line == line


def test_endless_loop_hits_the_step_limit() -> None:
    with pytest.raises(PtxRuntimeError, match="endless loop"):
        run_kernel(_kernel("$top:\nbra.uni $top;"), "k", [np.zeros(1)], max_steps=500)


def test_arguments_are_checked_against_the_params() -> None:
    text = _kernel("", params=".param .u64 out, .param .u32 n")
    with pytest.raises(TypeError, match="takes 2 arguments"):
        run_kernel(text, "k", [np.zeros(1)])
    with pytest.raises(TypeError, match="pass a scalar"):
        run_kernel(text, "k", [np.zeros(1), np.zeros(2)])
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        run_kernel(text, "nope", [np.zeros(1), 1])
