"""What hardware computes differently from the PTX text is an error in the interpreter.

- ptxas may contract a ``mul`` and an ``add``/``sub`` that have no rounding modifier into one
  ``fma`` (PTX ISA, add: "mul/add sequences with no rounding modifiers may be optimized to use
  fused-multiply-add"): where the fused result differs for a thread, the add raises
  PtxFloatError naming both lines and what to write.
- ``div.approx.f32``/``div.full.f32`` are within 2 ulp on hardware: a launch that asks for IEEE
  division (``ieee_division=True``) rejects them; without it div.approx computes a * (1/b).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.ptx import PtxFloatError, check_ieee_division, parse_module, run_kernel

# out[i] = BODY(a[i], b[i], c[i]) over f32 (or f64) registers %x0 = a, %x1 = b, %x2 = c.
TEMPLATE = """
.version 7.8
.target sm_75
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 pa, .param .u64 pb, .param .u64 pc)
{{
	.reg .pred %p<2>;
	.reg .b32 %r<2>;
	.reg .b64 %rd<12>;
	.reg .{t} %x<8>;
	ld.param.u64 %rd0, [out];
	ld.param.u64 %rd1, [pa];
	ld.param.u64 %rd2, [pb];
	ld.param.u64 %rd3, [pc];
	mov.u32 %r0, %tid.x;
	mul.wide.u32 %rd4, %r0, {size};
	add.s64 %rd5, %rd1, %rd4;
	add.s64 %rd6, %rd2, %rd4;
	add.s64 %rd7, %rd3, %rd4;
	add.s64 %rd8, %rd0, %rd4;
	ld.global.{t} %x0, [%rd5];
	ld.global.{t} %x1, [%rd6];
	ld.global.{t} %x2, [%rd7];
{body}
	st.global.{t} [%rd8], %x3;
	ret;
}}
"""

# a = b = 1 + 2**-12: a * b = 1 + 2**-11 + 2**-24 exactly; rounded to f32 the 2**-24 is a tie
# that goes to even, so (a * b) - 1 is 2**-11 with two roundings and 2**-11 + 2**-24 fused.
A32 = np.float32(1 + 2.0**-12)
# f64: the same with 2**-27 (a * b = 1 + 2**-26 + 2**-54, a tie in f64)
A64 = np.float64(1 + 2.0**-27)


def run(body: str, a, b, c, t: str = "f32", **kw) -> np.ndarray:
    dt = np.float32 if t == "f32" else np.float64
    a, b, c = (np.array(v, dtype=dt) for v in (a, b, c))
    out = np.zeros(len(a), dtype=dt)
    ptx = TEMPLATE.format(t=t, size=dt().itemsize, body=body)
    run_kernel(ptx, "k", [out, a, b, c], grid=1, block=len(a), **kw)
    return out


MUL_ADD = "\tmul.f32 %x4, %x0, %x1;\n\tadd.f32 %x3, %x4, %x2;"


def test_contraction_that_changes_the_result_is_an_error_naming_both_lines() -> None:
    with pytest.raises(PtxFloatError) as info:
        run(MUL_ADD, [1.0, A32], [1.0, A32], [-1.0, -1.0])
    msg = str(info.value)
    assert "thread (1, 0, 0)" in msg, "the first thread whose result would differ"
    assert "line 25 (add.f32 %x3, %x4, %x2)" in msg and "mul.f32 on line 24" in msg, msg
    assert "mul.rn.f32 and add.rn.f32" in msg and "fma.rn.f32" in msg, "says what to write"
    assert "0.00048828125" in msg, "shows the two-rounding result"


def test_contraction_that_changes_nothing_runs() -> None:
    # Small integers: the product is exact, so fused and unfused agree.
    got = run(MUL_ADD, [1.0, 2.0, 3.0], [4.0, 5.0, -6.0], [0.5, -1.0, 18.0])
    assert got.tolist() == [4.5, 9.0, 0.0]


@pytest.mark.parametrize(
    "body",
    [
        "\tmul.rn.f32 %x4, %x0, %x1;\n\tadd.f32 %x3, %x4, %x2;",
        "\tmul.f32 %x4, %x0, %x1;\n\tadd.rn.f32 %x3, %x4, %x2;",
        "\tmul.rn.f32 %x4, %x0, %x1;\n\tadd.rn.f32 %x3, %x4, %x2;",
        "\tmul.f32 %x4, %x0, %x1;\n\tmov.f32 %x4, %x0;\n\tadd.f32 %x3, %x4, %x2;",
    ],
    ids=["mul.rn", "add.rn", "both.rn", "product-overwritten"],
)
def test_a_rounding_modifier_or_an_overwrite_forbids_contraction(body: str) -> None:
    got = run(body, [A32], [A32], [-1.0])
    if "mov" in body:
        assert got[0] == np.float32(A32 - 1)
    else:
        assert got[0] == np.float32(2.0**-11), "two roundings: the 2**-24 tie went to even"


def test_fma_rounds_once() -> None:
    got = run("\tfma.rn.f32 %x3, %x0, %x1, %x2;", [A32], [A32], [-1.0])
    assert got[0] == np.float32(2.0**-11 + 2.0**-24)


@pytest.mark.parametrize(
    "body",
    [
        "\tmul.f32 %x4, %x0, %x1;\n\tsub.f32 %x3, %x4, %x2;",  # a * b - c
        "\tmul.f32 %x4, %x0, %x1;\n\tsub.f32 %x3, %x2, %x4;",  # c - a * b
        "\tmul.f32 %x4, %x0, %x1;\n\tadd.f32 %x3, %x2, %x4;",  # c + a * b
    ],
)
def test_sub_and_either_operand_order_are_checked(body: str) -> None:
    c = 1.0 if "sub.f32" in body else -1.0  # the result near 2**-11, where the tie shows
    with pytest.raises(PtxFloatError, match="fma.rn.f32"):
        run(body, [A32], [A32], [c])


def test_only_threads_that_ran_the_mul_are_checked() -> None:
    # Thread 1 skips the mul (the guard is false there): its %x4 is not a product.
    body = (
        "\tsetp.eq.f32 %p0, %x0, 0f3F800000;\n"  # a == 1.0
        "\tmov.f32 %x4, %x2;\n"
        "\t@%p0 mul.f32 %x4, %x0, %x1;\n"
        "\tadd.f32 %x3, %x4, %x2;"
    )
    got = run(body, [1.0, A32], [3.0, A32], [-1.0, -1.0])
    assert got.tolist() == [2.0, -2.0]


def test_f64_contraction_is_checked_too() -> None:
    body = "\tmul.f64 %x4, %x0, %x1;\n\tadd.f64 %x3, %x4, %x2;"
    with pytest.raises(PtxFloatError, match=r"mul.rn.f64 and add.rn.f64"):
        run(body, [A64], [A64], [-1.0], t="f64")
    body_rn = "\tmul.rn.f64 %x4, %x0, %x1;\n\tadd.rn.f64 %x3, %x4, %x2;"
    assert run(body_rn, [A64], [A64], [-1.0], t="f64")[0] == 2.0**-26


DIV = "\tdiv.{kind}.f32 %x3, %x0, %x1;"


@pytest.mark.parametrize("kind", ["approx", "full"])
def test_ieee_division_rejects_approximate_division(kind: str) -> None:
    with pytest.raises(PtxFloatError) as info:
        run(DIV.format(kind=kind), [1.0], [3.0], [0.0], ieee_division=True)
    msg = str(info.value)
    assert f"line 24 (div.{kind}.f32 %x3, %x0, %x1)" in msg and "write div.rn.f32" in msg, msg


def test_ieee_division_accepts_div_rn() -> None:
    got = run(DIV.format(kind="rn"), [1.0, 7.0], [3.0, 10.0], [0.0, 0.0], ieee_division=True)
    assert got.tolist() == [np.float32(1 / 3), np.float32(0.7)]


def test_div_approx_is_a_times_the_reciprocal() -> None:
    # Two roundings (1/b, then a times it) land one ulp off the correctly rounded quotient
    # for some of these.
    a = np.arange(1, 200, dtype=np.float32)
    b = np.float32(3) * np.ones_like(a) + np.float32(0.1) * a
    got = run(DIV.format(kind="approx"), a, b, np.zeros_like(a))
    want = (a * (np.float32(1) / b)).astype(np.float32)
    assert np.array_equal(got, want)
    assert not np.array_equal(got, (a / b).astype(np.float32)), "not IEEE division"
    huge = run(DIV.format(kind="approx"), [1.0, np.inf], [2.0**127, 2.0**127], [0.0, 0.0])
    assert huge[0] == 0.0 and np.isnan(huge[1]), "the ISA's 2**126 < |b| < 2**128 rule"


def test_check_ieee_division_on_a_parsed_kernel() -> None:
    ptx = TEMPLATE.format(t="f32", size=4, body=DIV.format(kind="rn"))
    check_ieee_division(parse_module(ptx).kernels["k"])  # no error: div.rn
    bad = parse_module(TEMPLATE.format(t="f32", size=4, body=DIV.format(kind="approx")))
    with pytest.raises(PtxFloatError, match="div.approx.f32 is within 2 ulp"):
        check_ieee_division(bad.kernels["k"])
