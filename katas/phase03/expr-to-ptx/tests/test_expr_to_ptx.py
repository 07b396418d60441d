"""Public tests of the expr-to-ptx kata. Each group is one task of kata.toml, in the order the
compiler's stages run; read them as examples.

Kernels run on the harness's PTX interpreter (harness.ptx): every thread of the grid at once,
on numpy arrays, with global memory bounds-checked. Parameters are ``out``, one pointer per input
in the order of the ``in`` clause, then ``n`` (u32).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from harness.cuda.static import ptxas_resources
from harness.native.build import default_cache
from harness.ptx import run_kernel
from harness.ptx.device import run_on_device

BLOCK = 64
CACHE = default_cache()  # ptxas results are cached by content; made before the tests start
PAD = 9  # out has room past n: a thread that skips the bounds check writes there


@pytest.fixture(scope="module")
def semantics(kata):
    return kata.module("semantics")


def tokens(kata, source: str) -> list[tuple]:
    return [tuple(t) for t in kata.module("lexer").tokenize(source)]


def front(kata, source: str):
    compiler = kata.module("compiler")
    return compiler.front_end(source)


def error_of(fn, *args) -> str:
    """str() of the CompileError `fn(*args)` raises."""
    with pytest.raises(Exception) as info:
        fn(*args)
    if type(info.value).__name__ != "CompileError":
        raise info.value
    return str(info.value)


def run(ptx: str, inputs: list[np.ndarray], dtype, n: int | None = None):
    """Launch the kernel over len(inputs[0]) elements; returns (out[:n], the padding, stats)."""
    n = len(inputs[0]) if n is None else n
    out = np.full(n + PAD, 77, dtype=dtype)
    # f32 '/' is IEEE division (README.md): div.approx/div.full are an error, not a near miss
    stats = run_kernel(
        ptx, "expr", [out, *inputs, np.uint32(n)], grid=-(-n // BLOCK), block=BLOCK,
        ieee_division=True,
    )  # fmt: skip
    return out[:n], out[n:], stats


def same(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Equal element by element, NaN equal to NaN."""
    both_nan = np.isnan(actual) & np.isnan(expected) if actual.dtype.kind == "f" else False
    return bool(np.all((actual == expected) | both_nan))


def instruction_count(ptx: str) -> int:
    """Instructions in the kernel body: lines ending in ';' that are not declarations."""
    body = ptx[ptx.index("{") :]
    return sum(1 for line in body.splitlines() if line.strip().endswith(";") and not line.strip().startswith("."))  # fmt: skip


RNG = np.random.default_rng(2026)
X = np.concatenate([RNG.standard_normal(120) * 4, [0.0, -0.0, 1.0, np.inf, -np.inf, np.nan]])
X = X.astype(np.float32)
Y = RNG.standard_normal(len(X)).astype(np.float32) * 3
K = RNG.integers(-1000, 1000, len(X)).astype(np.int32)
K[:3] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0]


# --------------------------------------------------------------------------- task: lexer
def test_lexer_tokens_with_lines_and_columns(kata):
    src = "in x: f32;\nlet y = x*2.5e-1;  # a comment\n  y <= 3"
    assert tokens(kata, src) == [
        ("keyword", "in", 1, 1), ("name", "x", 1, 4), ("op", ":", 1, 5), ("name", "f32", 1, 7),
        ("op", ";", 1, 10),
        ("keyword", "let", 2, 1), ("name", "y", 2, 5), ("op", "=", 2, 7), ("name", "x", 2, 9),
        ("op", "*", 2, 10), ("float", "2.5e-1", 2, 11), ("op", ";", 2, 17),
        ("name", "y", 3, 3), ("op", "<=", 3, 5), ("int", "3", 3, 8),
        ("eof", "", 3, 9),
    ]  # fmt: skip


def test_lexer_numbers_and_longest_operators(kata):
    kinds = [(t[0], t[1]) for t in tokens(kata, "42 1.5 2e3 1.5E-3 0.25 a<=b==c!=d>=e<f")]
    assert kinds[:5] == [("int", "42"), ("float", "1.5"), ("float", "2e3"), ("float", "1.5E-3"), ("float", "0.25")]  # fmt: skip
    ops = [text for kind, text in kinds if kind == "op"]
    assert ops == ["<=", "==", "!=", ">=", "<"], "two-character operators are one token"
    assert tokens(kata, "let letter")[:2] == [("keyword", "let", 1, 1), ("name", "letter", 1, 5)]
    assert tokens(kata, "2147483647")[0] == ("int", "2147483647", 1, 1), "the largest i32 is fine"


@pytest.mark.parametrize(
    "source, where, words",
    [
        ("x @ y", "1:3", "unexpected character"),
        ("1 +\n  $", "2:3", "unexpected character"),
        ("1. + x", "1:1", "malformed number"),
        ("x * 2e", "1:5", "malformed number"),
        ("2147483648", "1:1", "out of range"),
    ],
)
def test_lexer_errors_name_the_position(kata, source, where, words):
    msg = error_of(kata.module("lexer").tokenize, source)
    assert msg.startswith(where + ":"), (
        f"{source!r}: the error must start with {where}:, got {msg!r}"
    )
    assert words in msg, f"{source!r}: expected {words!r} in {msg!r}"


# --------------------------------------------------------------------------- task: parser
@pytest.mark.parametrize(
    "source, tree",
    [
        ("1 + 2 * 3 - 4", "(- (+ 1 (* 2 3)) 4)"),
        ("8 / 4 / 2 % 3", "(% (/ (/ 8 4) 2) 3)"),
        ("-2 * -(3 + 4)", "(* (neg 2) (neg (+ 3 4)))"),
        ("1 + 2 < 3 * 4", "(< (+ 1 2) (* 3 4))"),
        ("1 < 2 ? 3 : 4 < 5 ? 6 : 7", "(? (< 1 2) 3 (? (< 4 5) 6 7))"),
        ("min(1.5, max(2, 3)) + sqrt(4.0)", "(+ (min 1.5 (max 2 3)) (sqrt 4.0))"),
        ("0.1", "0.10000000149011612"),  # float literals are rounded to f32
    ],
)
def test_parser_precedence_and_associativity(kata, syntax, source, tree):
    program = kata.module("parser").parse(kata.module("lexer").tokenize(source))
    assert syntax.dump(program.result) == tree, f"parse({source!r})"


def test_parser_program_inputs_lets_and_positions(kata, syntax):
    src = "in a: f32, k: i32;\nlet s = a * 2.0;\nlet t = f32(k);\ns > t ? s : t"
    program = kata.module("parser").parse(kata.module("lexer").tokenize(src))
    assert [(i.name, i.type, i.line, i.col) for i in program.inputs] == [("a", "f32", 1, 4), ("k", "i32", 1, 12)]  # fmt: skip
    assert [(b.name, b.line, b.col) for b in program.lets] == [("s", 2, 5), ("t", 3, 5)]
    assert (
        syntax.dump(program) == "(in a:f32 k:i32) (let s (* a 2.0)) (let t (f32 k)) (? (> s t) s t)"
    )
    r = program.result
    assert (r.line, r.col) == (4, 7), "a select sits at its '?'"
    assert (r.cond.line, r.cond.col) == (4, 3), "a binary node sits at its operator"
    assert (program.lets[1].value.line, program.lets[1].value.col) == (3, 9), "a call at its name"


@pytest.mark.parametrize(
    "source, message",
    [
        ("1 +", "1:4: expected an expression, found end of input"),
        ("in x: f32\nx", "2:1: expected ';', found 'x'"),
        ("in x: f64; x", "1:7: expected a type (f32 or i32), found 'f64'"),
        ("let = 3; 1", "1:5: expected a name, found '='"),
        ("let y = 3 y", "1:11: expected ';', found 'y'"),
        ("(1 + 2", "1:7: expected ')', found end of input"),
        ("1 2", "1:3: expected end of input, found '2'"),
        ("1 < 2 ? 3 4", "1:11: expected ':', found '4'"),
        ("min(1, 2", "1:9: expected ')', found end of input"),
    ],
)
def test_parser_errors_are_line_column_messages(kata, source, message):
    assert error_of(front, kata, source) == message


def test_parser_comparisons_do_not_chain(kata):
    msg = error_of(front, kata, "1 < 2 < 3")
    assert msg.startswith("1:7:") and "chain" in msg, msg


# --------------------------------------------------------------------------- task: typecheck
def test_typecheck_sets_a_type_on_every_node(kata):
    program = front(kata, "in x: f32, k: i32; let b = x < 1.0; b ? f32(k % 3) : -x * 2.0")
    r = program.result
    assert program.lets[0].value.type == "bool"
    assert (r.type, r.cond.type, r.then.type, r.then.args[0].type) == ("f32", "bool", "f32", "i32")
    assert (r.other.type, r.other.left.type, r.other.left.operand.type) == ("f32", "f32", "f32")
    assert front(kata, "in x: f32; i32(x) / 2").result.type == "i32"


@pytest.mark.parametrize(
    "source, message",
    [
        ("in x: f32; x + 1", "1:14: '+' needs operands of one type, got f32 and i32"),
        ("y * 2", "1:1: undefined name 'y'"),
        ("in x: f32; x % 2.0", "1:14: '%' needs i32 operands, got f32"),
        ("1 < 2", "1:3: the result must be f32 or i32, got bool"),
        ("in x: f32; x ? 1.0 : 2.0", "1:14: the condition of '?' must be bool, got f32"),
        (
            "in k: i32; k > 0 ? k : 1.0",
            "1:18: the branches of '?' have different types: i32 and f32",
        ),
        ("in k: i32; sqrt(k)", "1:12: sqrt needs an f32 argument, got i32"),
        ("in x: f32; f32(x)", "1:12: f32 needs an i32 argument, got f32"),
        ("min(1.0)", "1:1: min takes 2 argument(s), got 1"),
        ("tanh(1.0)", "1:1: unknown function 'tanh'"),
        ("in x: f32, x: i32; 1", "1:12: 'x' is already defined"),
        ("let z = 1; let z = 2; z", "1:16: 'z' is already defined"),
        ("in x: f32; -(x < 1.0)", "1:12: '-' needs an f32 or i32 operand, got bool"),
    ],
)
def test_typecheck_errors(kata, source, message):
    assert error_of(front, kata, source) == message


# --------------------------------------------------------------------------- task: codegen
# These tests compile without folding or register allocation (every virtual register gets its
# own physical one), so they grade instruction selection alone.
def plain(compiler, source: str, **kw):
    return compiler.compile_source(source, optimize=False, allocate_registers=False, **kw)


def test_codegen_kernel_signature_and_header(compiler):
    ptx = plain(compiler, "in a: f32, k: i32; a * f32(k)").ptx
    assert re.search(r"^\.version 7\.8\s*$", ptx, re.M) and re.search(
        r"^\.target sm_75\s*$", ptx, re.M
    )
    assert re.search(r"^\.address_size 64\s*$", ptx, re.M)
    params = re.findall(r"\.param\s+\.(\w+)\s+(\w+)", ptx)
    assert params == [("u64", "out"), ("u64", "in_a"), ("u64", "in_k"), ("u32", "n")], params
    for special in ("%ctaid.x", "%ntid.x", "%tid.x"):
        assert special in ptx, f"the thread index needs {special}"
    assert plain(compiler, "1.0", arch="sm_90").ptx.count(".target sm_90") == 1


@pytest.mark.parametrize(
    "source, expected",
    [
        ("in x: f32, y: f32; x * y + 2.5", lambda: X * Y + np.float32(2.5)),
        ("in x: f32, y: f32; (x - y) / (y * y)", lambda: (X - Y) / (Y * Y)),
        ("in x: f32; let s = x * x; s - -x", lambda: X * X + X),
        (
            "in x: f32, y: f32; min(x, y) + max(abs(x), 0.5)",
            lambda: np.fmin(X, Y) + np.fmax(np.abs(X), np.float32(0.5)),
        ),  # fmt: skip
        ("in x: f32; sqrt(abs(x))", lambda: np.sqrt(np.abs(X))),
    ],
)
def test_codegen_f32_values(compiler, source, expected):
    with np.errstate(all="ignore"):
        want = expected().astype(np.float32)
    inputs = [X, Y][: source.count(": f32")]
    got, pad, _ = run(plain(compiler, source).ptx, inputs, np.float32)
    bad = np.flatnonzero(~((got == want) | (np.isnan(got) & np.isnan(want))))
    assert not len(bad), f"{source}: element {bad[0]}: x={X[bad[0]]} got {got[bad[0]]}, expected {want[bad[0]]}"  # fmt: skip
    assert (pad == 77).all(), "threads past n must not store"


def wrap(x: np.ndarray) -> np.ndarray:
    return ((x + 2**31) % 2**32 - 2**31).astype(np.int64)


def test_codegen_i32_values_wrap_and_truncate(compiler):
    src = "in k: i32; (k * 3 + 7) / 5 - k % 7 + abs(k) - min(k, -9) * max(k, 2)"
    got, _, _ = run(plain(compiler, src).ptx, [K], np.int32)
    k = K.astype(np.int64)
    quotient = np.trunc(wrap(k * 3 + 7) / 5).astype(np.int64)  # wraps, then C division (toward 0)
    want = wrap(wrap(quotient - np.fmod(k, 7) + wrap(np.abs(k))) - wrap(np.minimum(k, -9) * np.maximum(k, 2)))  # fmt: skip
    bad = np.flatnonzero(got != want)
    assert not len(bad), f"k={K[bad[0]]}: got {got[bad[0]]}, expected {want[bad[0]]}"


def test_codegen_select_comparisons_and_nan(compiler):
    # NaN compares false with everything, except '!=' (setp.neu), which is true.
    src = "in x: f32, y: f32; (x != y ? 1.0 : 0.0) + (x == x ? 2.0 : 0.0) + (x < y ? 4.0 : 0.0)"
    got, _, _ = run(plain(compiler, src).ptx, [X, Y], np.float32)
    want = (X != Y) * 1.0 + (X == X) * 2.0 + (X < Y) * 4.0
    assert same(got, want.astype(np.float32)), "comparisons (look at the NaN element, the last)"
    got, _, _ = run(plain(compiler, "in k: i32; k >= 0 ? k : -k").ptx, [K], np.int32)
    assert np.array_equal(got, np.where(K >= 0, K, -K)), "i32 select"


def test_codegen_conversions(compiler, semantics):
    big = np.array([1.5, -1.5, 3e9, -3e9, np.nan, np.inf, 2.9, -0.7], np.float32)
    got, _, _ = run(plain(compiler, "in x: f32; i32(x)").ptx, [big], np.int32)
    want = [semantics.call("i32", "f32", [float(v)]) for v in big]
    assert got.tolist() == want, "cvt.rzi.s32.f32: toward zero, saturating, NaN -> 0"
    got, _, _ = run(plain(compiler, "in k: i32; f32(k) * 0.5").ptx, [K], np.float32)
    assert same(got, K.astype(np.float32) * np.float32(0.5))


def test_codegen_math_functions_match_semantics(compiler, semantics):
    src = "in x: f32; sin(x) + cos(x) * exp2(x * 0.1) - log2(abs(x)) + rsqrt(abs(x) + 1.0)"
    got, _, _ = run(plain(compiler, src).ptx, [X], np.float32)
    f32, b, c = semantics.f32, semantics.binary, semantics.call
    for i, v in enumerate(X.tolist()):
        want = b(
            "+",
            "f32",
            b(
                "-",
                "f32",
                b(
                    "+",
                    "f32",
                    c("sin", "f32", [v]),
                    b(
                        "*",
                        "f32",
                        c("cos", "f32", [v]),
                        c("exp2", "f32", [b("*", "f32", v, f32(0.1))]),
                    ),
                ),  # fmt: skip
                c("log2", "f32", [abs(v)]),
            ),
            c("rsqrt", "f32", [b("+", "f32", abs(v), 1.0)]),
        )
        assert same(got[i : i + 1], np.array([want], np.float32)), f"x={v}: got {got[i]}, expected {want}"  # fmt: skip


def test_codegen_bounds_check_and_odd_sizes(compiler):
    ptx = plain(compiler, "in x: f32; x + 1.0").ptx
    for n in (1, 63, 64, 65, len(X)):
        got, pad, stats = run(ptx, [X[:n]], np.float32, n)
        assert same(got, X[:n] + np.float32(1)), f"n={n}"
        assert (pad == 77).all(), f"n={n}: a thread with i >= n stored past the end"
        assert stats.opcodes["st.global.f32"] == n, f"n={n}: one store per element"


def test_codegen_constants_without_inputs(compiler):
    out = np.zeros(5 + PAD, np.int32)
    run_kernel(plain(compiler, "2 * 3 - 10 / 4").ptx, "expr", [out, np.uint32(5)], grid=1, block=BLOCK)  # fmt: skip
    assert out.tolist() == [4] * 5 + [0] * PAD, "a program without inputs writes out[:n] only"


# --------------------------------------------------------------------------- task: ptxas
PTXAS_PROGRAMS = [
    "in x: f32, y: f32; x * y + 2.5",
    "in k: i32; (k * 3 + 7) / 5 - k % 7 + abs(k) - min(k, -9)",
    "in x: f32, k: i32; let s = sin(x) * f32(k); s > 0.0 ? sqrt(s) : i32(x) == k ? 1.0 : -s",
    "1.5 + 2.5",
]


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_ptxas_accepts_the_kernel(compiler, arch):
    for src in PTXAS_PROGRAMS:
        for optimize in (False, True):
            try:
                ptx = compiler.compile_source(src, arch=arch, optimize=optimize, allocate_registers=False).ptx  # fmt: skip
            except NotImplementedError:
                if optimize:
                    continue  # fold not written yet: the unfolded kernel is graded here
                raise
            resources = ptxas_resources(ptx, arch, cache=CACHE)
            assert "expr" in resources, f"ptxas made no kernel 'expr' of {src!r}"


# --------------------------------------------------------------------------- task: fold
@pytest.mark.parametrize(
    "source, folded",
    [
        ("in x: f32; x * (2.0 + 3.0)", "(* x 5.0)"),
        ("in x: f32; let c = 2.0 * 4.0; let d = c - 1.0; x + d * c", "(+ x 56.0)"),
        ("in x: f32; 1 < 2 ? x : -x", "x"),
        ("in k: i32; k + -(7 / 2) * abs(-3)", "(+ k -9)"),
        ("in x: f32; f32(7 % 4) + sqrt(16.0) + x", "(+ 7.0 x)"),
        ("in k: i32; k / (4 - 4)", "(/ k 0)"),
        ("in x: f32; (x + 1.0) + 2.0", "(+ (+ x 1.0) 2.0)"),
        ("in k: i32; 2147483647 + 1 + k", "(+ -2147483648 k)"),
    ],
)
def test_fold_computes_constant_subtrees(compiler, syntax, source, folded):
    program = compiler.compile_source(source).program
    assert syntax.dump(program.result) == folded, f"fold({source!r})"
    constant_lets = [b.name for b in program.lets if isinstance(b.value, syntax.Num)]
    assert not constant_lets, (
        f"lets bound to constants must be substituted and dropped: {constant_lets}"
    )


def test_fold_types_the_new_literals(compiler, syntax):
    r = compiler.compile_source("in x: f32; x + f32(3) * 2.0").program.result
    assert isinstance(r.right, syntax.Num) and r.right.type == "f32" and r.right.value == 6.0
    assert isinstance(r.right.value, float), "an f32 constant is a float"


def test_fold_i32_division_by_zero_is_left_to_run_time(compiler, syntax):
    r = compiler.compile_source("in k: i32; k + 5 / 0").program.result
    assert isinstance(r.right, syntax.Binary), "5 / 0 is undefined: never fold it"


def test_fold_shrinks_the_kernel(compiler):
    pairs = [
        ("in x: f32; x * (2.0 + 3.0) - sqrt(4.0) * exp2(3.0)", "in x: f32; x * 5.0 - 16.0"),
        (
            "in x: f32; let a = 1.5 * 2.0; let b = a * a; x < b ? a : b",
            "in x: f32; x < 9.0 ? 3.0 : 9.0",
        ),  # fmt: skip
        ("in k: i32; f32(k) + (3 > 2 ? f32(7 % 4) : 0.5)", "in k: i32; f32(k) + 3.0"),
    ]
    for source, by_hand in pairs:
        unfolded = instruction_count(compiler.compile_source(source, optimize=False).ptx)
        folded = instruction_count(compiler.compile_source(source).ptx)
        best = instruction_count(compiler.compile_source(by_hand).ptx)
        assert folded < unfolded, f"{source}: folding must remove instructions ({folded} vs {unfolded})"  # fmt: skip
        assert folded == best, f"{source}: {folded} instructions, but {best} once folded by hand ({by_hand})"  # fmt: skip


def test_fold_keeps_the_values(compiler):
    src = "in x: f32, y: f32; let c = 0.1 * 3.0; x * c + min(y, 1.0 / 3.0) - 1e30 * 1e30 * 0.0"
    want, _, _ = run(compiler.compile_source(src, optimize=False).ptx, [X, Y], np.float32)
    got, _, _ = run(compiler.compile_source(src).ptx, [X, Y], np.float32)
    assert same(got, want), "folding changed what the kernel computes"


# --------------------------------------------------------------------------- task: regalloc
def live_ranges(body, instr_type) -> dict:
    """VReg -> (first write, last read) by instruction index (last read = write if never read)."""
    ranges: dict = {}
    for i, ins in enumerate(body):
        if not isinstance(ins, instr_type):
            continue
        for v in ins.uses():
            ranges[v] = (ranges[v][0], i)
        if ins.dst is not None:
            ranges[ins.dst] = (i, i)
    return ranges


def check_allocation(compiled, ir) -> dict[str, int]:
    """Assert no two overlapping values share a register; returns registers used per kind."""
    ranges = live_ranges(compiled.body, ir.Instr)
    names = compiled.names
    assert set(ranges) <= set(names), "every virtual register needs a name"
    by_name: dict[str, list] = {}
    for v, (start, end) in ranges.items():
        assert names[v].startswith(ir.KINDS[v.kind]), f"{v} is a {v.kind}, not {names[v]}"
        by_name.setdefault(names[v], []).append((start, end, v))
    for name, values in by_name.items():
        values.sort()
        for (s1, e1, v1), (s2, _, v2) in zip(values, values[1:], strict=False):
            assert s2 >= e1, f"{v1} (live {s1}..{e1}) and {v2} (written at {s2}) share {name}"
    return {k: len({n for v, n in names.items() if v.kind == k}) for k in ir.KINDS}


def pressure(compiled, ir) -> dict[str, int]:
    """The most values of each kind live at one instruction: the fewest registers possible."""
    ranges = live_ranges(compiled.body, ir.Instr)
    most = dict.fromkeys(ir.KINDS, 0)
    for i, ins in enumerate(compiled.body):
        live = dict.fromkeys(ir.KINDS, 0)
        for v, (s, e) in ranges.items():
            if s < i < e or v == getattr(ins, "dst", None):
                live[v.kind] += 1
        most = {k: max(most[k], live[k]) for k in most}
    return most


def test_regalloc_reuses_registers(compiler, kata):
    ir = kata.module("ir")
    c = compiler.compile_source("in x: f32, y: f32; ((x + y) * x - y) / (x * y)", optimize=False)
    used = check_allocation(c, ir)
    assert used["f32"] == 3, f"3 f32 values are live at most, {used['f32']} registers used"
    assert used["b64"] <= 4, f"out, two inputs and the offset need 4 b64 registers, used {used['b64']}"  # fmt: skip


def test_regalloc_is_minimal_and_correct(compiler, kata):
    ir = kata.module("ir")
    sources = [
        "in a: f32, b: f32, c: f32; let s = a + b; let t = b * c; let u = s - t; u * u + s / t",
        "in k: i32, j: i32; let p = k * j; let q = k - j; (p > q ? p : q) % 7 + min(k, j)",
    ]
    for src in sources:
        c = compiler.compile_source(src, optimize=False)
        used = check_allocation(c, ir)
        least = pressure(c, ir)
        assert used == least, f"{src}: {used} registers per kind, but {least} suffice"
        plain_ptx = compiler.compile_source(src, optimize=False, allocate_registers=False).ptx
        typ = np.float32 if "f32" in src else np.int32
        inputs = [X, Y, X[::-1].copy()] if typ is np.float32 else [K, K[::-1] % 50 + 1]
        want, _, _ = run(plain_ptx, inputs, typ)
        got, _, _ = run(c.ptx, inputs, typ)
        assert same(got, want), f"{src}: allocation changed the values"


# --------------------------------------------------------------------------- task: device
def test_device_kernel_runs_on_the_gpu(compiler):
    # Exact operations only (no .approx functions): the GPU must agree bit for bit.
    src = "in x: f32, k: i32; let s = x * 2.0 + f32(k % 5); s > 1.0 ? sqrt(s) / 3.0 : -s"
    ptx = compiler.compile_source(src).ptx
    n = len(X)
    out = np.full(n + PAD, 77, dtype=np.float32)
    grid = -(-n // BLOCK)
    gpu = run_on_device(ptx, "expr", [out, X, K, np.uint32(n)], grid=grid, block=BLOCK)[0]
    want, _, _ = run(ptx, [X, K], np.float32)
    bad = np.flatnonzero(~((gpu[:n] == want) | (np.isnan(gpu[:n]) & np.isnan(want))))
    assert not len(bad), f"{src}: element {bad[0]}: GPU {gpu[bad[0]]}, interpreter {want[bad[0]]}"
    assert (gpu[n:] == 77).all(), "threads past n stored on the GPU"
