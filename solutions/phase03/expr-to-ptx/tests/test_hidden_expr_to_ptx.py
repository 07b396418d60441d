"""Hidden tests of the expr-to-ptx kata: random well-typed programs against an oracle.

Hypothesis writes programs (1-3 inputs of either type in any order, lets of every type, every
operator and function, selects nested anywhere) as trees that know their own meaning. The
oracle evaluates a tree element by element with the kata's `semantics` module, independently of
the learner's front end; the "folded by hand" program replaces every input-free subtree with
its literal. Each test's docstring names the shortcut it catches. Examples are derandomized, so
a grade never depends on luck; shrinking is off (it can run past the time limit on a broken
compiler), so the first failing program is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cuda.static import CudaCompileError, ptxas_resources
from harness.native.build import default_cache
from harness.ptx import run_kernel
from harness.ptx.device import run_on_device
from harness.testing import hidden_settings, watch_calls

CACHE = default_cache()


BLOCK = 32
N = 45  # two blocks, the second one partly idle
PAD = 7


@pytest.fixture(scope="module")
def sem(kata):
    return kata.module("semantics")


@pytest.fixture(scope="module")
def ir(kata):
    return kata.module("ir")


# --------------------------------------------------------------------------- program trees
@dataclass(frozen=True)
class T:
    """A node of a generated program: it prints itself, evaluates itself and folds itself."""

    kind: str  # num name neg bin sel call
    typ: str  # f32 i32 bool
    op: str = ""  # the operator, function, name; for num the literal's text
    kids: tuple[T, ...] = ()
    value: int | float | None = None  # num only

    def src(self) -> str:
        """Fully parenthesised source."""
        k = self.kids
        if self.kind in ("num", "name"):
            return self.op
        if self.kind == "neg":
            return f"(-{k[0].src()})"
        if self.kind == "bin":
            return f"({k[0].src()} {self.op} {k[1].src()})"
        if self.kind == "sel":
            return f"({k[0].src()} ? {k[1].src()} : {k[2].src()})"
        return f"{self.op}({', '.join(x.src() for x in k)})"

    def pretty(self, level: int = 0) -> str:
        """Source with only the parentheses the grammar needs (levels: README's precedence)."""
        k = self.kids
        if self.kind in ("num", "name"):
            return self.op
        if self.kind == "call":
            return f"{self.op}({', '.join(x.pretty() for x in k)})"
        if self.kind == "neg":
            text, mine = f"-{k[0].pretty(4)}", 4
        elif self.kind == "sel":
            text, mine = f"{k[0].pretty(1)} ? {k[1].pretty(0)} : {k[2].pretty(0)}", 0
        elif self.op in ("<", "<=", ">", ">=", "==", "!="):
            text, mine = f"{k[0].pretty(2)} {self.op} {k[1].pretty(2)}", 1
        elif self.op in ("+", "-"):
            text, mine = f"{k[0].pretty(2)} {self.op} {k[1].pretty(3)}", 2
        else:
            text, mine = f"{k[0].pretty(3)} {self.op} {k[1].pretty(4)}", 3
        return f"({text})" if level > mine else text

    def dump(self) -> str:
        """What syntax.dump prints for the parsed tree."""
        k = self.kids
        if self.kind == "num":
            return repr(self.value)
        if self.kind == "name":
            return self.op
        if self.kind == "neg":
            return f"(neg {k[0].dump()})"
        if self.kind == "bin":
            return f"({self.op} {k[0].dump()} {k[1].dump()})"
        if self.kind == "sel":
            return f"(? {' '.join(x.dump() for x in k)})"
        return f"({self.op} {' '.join(x.dump() for x in k)})"


@dataclass(frozen=True)
class P:
    inputs: tuple[tuple[str, str], ...]
    lets: tuple[tuple[str, T], ...]
    result: T

    def src(self, pretty: bool = False) -> str:
        show = (lambda t: t.pretty()) if pretty else (lambda t: t.src())
        head = f"in {', '.join(f'{n}: {t}' for n, t in self.inputs)};\n" if self.inputs else ""
        lets = "".join(f"let {n} = {show(v)};\n" for n, v in self.lets)
        return head + lets + show(self.result)

    @property
    def types(self) -> dict[str, str]:
        return dict(self.inputs) | {n: v.typ for n, v in self.lets}


def evaluate(sem, t: T, env: dict[str, object]):
    """The value of `t` for one element; `env`: name -> value. Raises ZeroDivisionError."""
    k = t.kids
    if t.kind == "num":
        return t.value
    if t.kind == "name":
        return env[t.op]
    if t.kind == "neg":
        return sem.negate(t.typ, evaluate(sem, k[0], env))
    if t.kind == "bin":
        return sem.binary(t.op, k[0].typ, evaluate(sem, k[0], env), evaluate(sem, k[1], env))
    if t.kind == "sel":
        return evaluate(sem, k[1] if evaluate(sem, k[0], env) else k[2], env)
    return sem.call(t.op, k[0].typ, [evaluate(sem, x, env) for x in k])


def constant(sem, t: T, consts: dict[str, object]):
    """The value of an input-free subtree, or None."""
    if t.kind == "name":
        return consts.get(t.op)
    if t.kind == "sel":
        c = constant(sem, t.kids[0], consts)
        if c is not None:
            return constant(sem, t.kids[1] if c else t.kids[2], consts)
    if t.kind != "num" and any(constant(sem, x, consts) is None for x in t.kids):
        return None
    return evaluate(sem, t, consts)


def literal(typ: str, v) -> str:
    """Source text that parses (and folds) back to exactly `v`."""
    if typ == "i32":
        return "(-2147483647 - 1)" if v == -(2**31) else (f"(-{-v})" if v < 0 else str(v))
    if v != v:
        return "(0.0 / 0.0)"
    if v in (float("inf"), float("-inf")):
        return "1e39" if v > 0 else "(-1e39)"
    if str(v).startswith("-"):
        return f"(-{repr(-v)})"
    return repr(v)


def by_hand(sem, t: T, consts: dict[str, object]) -> str:
    """`t` folded by hand: input-free subtrees are literals, constant selects are one branch."""
    c = constant(sem, t, consts)
    if c is not None:
        return literal(t.typ, c)
    k = t.kids
    if t.kind == "name":
        return t.op
    if t.kind == "sel":
        cond = constant(sem, k[0], consts)
        if cond is not None:
            return by_hand(sem, k[1] if cond else k[2], consts)
    parts = [by_hand(sem, x, consts) for x in k]
    if t.kind == "neg":
        return f"(-{parts[0]})"
    if t.kind == "bin":
        return f"({parts[0]} {t.op} {parts[1]})"
    if t.kind == "sel":
        return f"({parts[0]} ? {parts[1]} : {parts[2]})"
    return f"{t.op}({', '.join(parts)})"


def program_by_hand(sem, p: P) -> tuple[str, bool]:
    """(the folded-by-hand source, whether anything was foldable at all)."""
    consts: dict[str, object] = {}
    lets = []
    for name, value in p.lets:
        c = constant(sem, value, consts)
        if c is not None:
            consts[name] = c
        else:
            lets.append(f"let {name} = {by_hand(sem, value, consts)};\n")
    head = f"in {', '.join(f'{n}: {t}' for n, t in p.inputs)};\n" if p.inputs else ""
    text = head + "".join(lets) + by_hand(sem, p.result, consts)
    return text, text != p.src()


# --------------------------------------------------------------------------- generators
F32_LITERALS = [0.5, 1.0, 2.0, 3.0, 0.1, 1.5, 10.0, 0.001, 100.0, 0.25, 1e8, 16777217.0, 3e9]
F32_FUNCS = ["sqrt", "rsqrt", "exp2", "log2", "sin", "cos"]
CMPS = ["<", "<=", ">", ">=", "==", "!="]


def f32_num(v: float) -> T:
    v = float(np.float32(v))
    return T("num", "f32", repr(v), value=v)


def i32_num(v: int) -> T:
    return T("num", "i32", str(v), value=v)


f32_literals = st.one_of(
    st.sampled_from(F32_LITERALS),
    st.floats(0.0010000000474974513, 1e4, width=32, allow_subnormal=False),
).map(f32_num)
i32_literals = st.one_of(st.integers(0, 20), st.integers(0, 2**31 - 1), st.just(2**31 - 1)).map(
    i32_num
)


@st.composite
def expr(draw, typ: str, env: dict[str, str], depth: int, exact: bool) -> T:
    names = [n for n, t in env.items() if t == typ]
    if typ == "bool":
        if names and draw(st.integers(0, 3)) == 0:
            return T("name", "bool", draw(st.sampled_from(names)))
        t = draw(st.sampled_from(["f32", "i32"]))
        d = max(depth - 1, 0)
        a, b = draw(expr(t, env, d, exact)), draw(expr(t, env, d, exact))
        return T("bin", "bool", draw(st.sampled_from(CMPS)), (a, b))
    if depth <= 0 or draw(st.integers(0, 4)) == 0:
        if names and draw(st.booleans()):
            return T("name", typ, draw(st.sampled_from(names)))
        return draw(f32_literals if typ == "f32" else i32_literals)
    d = depth - 1
    sub = lambda t=typ: expr(t, env, d, exact)  # noqa: E731
    choice = draw(st.sampled_from(["neg", "bin", "bin", "bin", "sel", "call", "call"]))
    if choice == "neg":
        return T("neg", typ, "-", (draw(sub()),))
    if choice == "bin":
        ops = ["+", "-", "*", "/"] + (["/", "%"] if typ == "i32" else [])
        op = draw(st.sampled_from(ops))
        if typ == "i32" and op in ("/", "%"):  # a literal divisor: never zero, never -1
            div = i32_num(draw(st.integers(2, 9)))
            right = T("neg", "i32", "-", (div,)) if draw(st.booleans()) else div
            return T("bin", typ, op, (draw(sub()), right))
        return T("bin", typ, op, (draw(sub()), draw(sub())))
    if choice == "sel":
        return T("sel", typ, "?", (draw(expr("bool", env, d, exact)), draw(sub()), draw(sub())))
    funcs = ["abs", "min", "max", "i32" if typ == "i32" else "f32"]
    if typ == "f32":
        funcs += ["sqrt"] if exact else F32_FUNCS
    func = draw(st.sampled_from(funcs))
    if func in ("min", "max"):
        return T("call", typ, func, (draw(sub()), draw(sub())))
    if func in ("f32", "i32"):
        return T("call", typ, func, (draw(sub("i32" if func == "f32" else "f32")),))
    return T("call", typ, func, (draw(sub()),))


@st.composite
def programs(draw, depth: int = 3, exact: bool = False) -> P:
    count = draw(st.integers(1, 3))
    inputs = tuple((n, draw(st.sampled_from(["f32", "i32"]))) for n in "abc"[:count])
    env = dict(inputs)
    lets = []
    for j in range(draw(st.integers(0, 2))):
        typ = draw(st.sampled_from(["f32", "i32", "bool"]))
        lets.append((f"v{j}", draw(expr(typ, dict(env), depth, exact))))
        env[f"v{j}"] = typ
    result = draw(expr(draw(st.sampled_from(["f32", "i32"])), env, depth, exact))
    return P(inputs, tuple(lets), result)


# --------------------------------------------------------------------------- running
RNG = np.random.default_rng(7)
F32_DATA = np.concatenate(
    [
        RNG.standard_normal(N - 9) * 10,
        [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-40, 3e9],
    ]
).astype(np.float32)
I32_DATA = np.concatenate(
    [RNG.integers(-3000, 3000, N - 5), [0, 1, -1, 2**31 - 1, -(2**31)]]
).astype(np.int32)
DTYPES = {"f32": np.float32, "i32": np.int32}


def inputs_for(p: P) -> list[np.ndarray]:
    # A different rotation per input, so that two inputs of one type differ element by element.
    return [np.roll(F32_DATA if t == "f32" else I32_DATA, 5 * i) for i, (_, t) in enumerate(p.inputs)]  # fmt: skip


def oracle(sem, p: P, arrays: list[np.ndarray]) -> np.ndarray:
    out = []
    for i in range(N):
        env: dict[str, object] = {
            n: a[i].item() for (n, _), a in zip(p.inputs, arrays, strict=True)
        }
        for name, value in p.lets:
            env[name] = evaluate(sem, value, env)
        out.append(evaluate(sem, p.result, env))
    return np.array(out, dtype=DTYPES[p.result.typ])


def launch(ptx: str, p: P, arrays: list[np.ndarray], kernel: str = "expr"):
    out = np.full(N + PAD, 55, dtype=DTYPES[p.result.typ])
    # f32 '/' is IEEE division (README.md): div.approx/div.full are an error, not a near miss
    stats = run_kernel(
        ptx, kernel, [out, *arrays, np.uint32(N)], grid=-(-N // BLOCK), block=BLOCK,
        ieee_division=True,
    )  # fmt: skip
    assert (out[N:] == 55).all(), f"threads past n stored\n{p.src()}"
    return out[:N], stats


def assert_values(got: np.ndarray, want: np.ndarray, p: P, arrays, what: str) -> None:
    ok = got == want
    if got.dtype.kind == "f":
        ok |= np.isnan(got) & np.isnan(want)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        shown = ", ".join(f"{n}={a[i]!r}" for (n, _), a in zip(p.inputs, arrays, strict=True))
        raise AssertionError(
            f"{what}: element {i} ({shown}): got {got[i]!r}, expected {want[i]!r}\n"
            f"program:\n{p.src()}"
        )


def count(ptx: str) -> int:
    body = ptx[ptx.index("{") :]
    return sum(1 for line in body.splitlines() if line.strip().endswith(";") and not line.strip().startswith("."))  # fmt: skip


def compile_error(fn, source: str) -> str:
    """str() of the CompileError fn(source) raises; anything else (a stub's todo) propagates."""
    try:
        fn(source)
    except Exception as e:
        if type(e).__name__ != "CompileError":
            raise
        return str(e)
    raise AssertionError(f"front_end accepted a program it must reject:\n{source}")


# --------------------------------------------------------------------------- lexer
@given(p=programs(depth=2), layout=st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\n\n", " # note: a < b ? (\n"]), min_size=1, max_size=30))  # fmt: skip
@hidden_settings(40)
def test_lexer_hidden_positions_in_random_layouts(kata, p, layout):
    """Every token's line:column points at its text, in programs laid out with tabs, blank lines
    and comments full of operators. Catches: a column that keeps counting across lines, starts
    at 0, or a comment skipped to the wrong place (the public tests use short, tidy layouts)."""
    words = re.findall(r"\d+\.\d+(?:e[+-]?\d+)?|\d+e[+-]?\d+|\d+|\w+|<=|>=|==|!=|\S", p.src())
    source = "".join(w + layout[i % len(layout)] for i, w in enumerate(words))
    lines = source.split("\n")
    toks = kata.module("lexer").tokenize(source)
    assert [t.text for t in toks[:-1]] == words, f"tokens of {source!r}"
    for t in toks[:-1]:
        at = lines[t.line - 1][t.col - 1 :]
        assert at.startswith(t.text), f"token {t.text!r} at {t.line}:{t.col}, but there is {at[:10]!r}\nsource:\n{source}"  # fmt: skip
    eof = toks[-1]
    assert (eof.kind, eof.line) == ("eof", len(lines)), "eof is on the last line"
    assert eof.col == len(lines[-1]) + 1, "eof sits just past the last character"


def test_lexer_hidden_number_corners(kata):
    """Catches: accepting '1.e5' or '.5'-style leftovers, or range-checking floats as ints."""
    lex = kata.module("lexer").tokenize
    assert [(t.kind, t.text) for t in lex("3000000000.0 1e10 007")[:3]] == [
        ("float", "3000000000.0"),
        ("float", "1e10"),
        ("int", "007"),
    ], "floats are never range-checked as i32; leading zeros are fine"
    for bad, col in (("x + 1.e5", 5), ("2 * 3e+", 5), ("1 + 9999999999", 5)):
        msg = compile_error(lex, bad)
        assert msg.startswith(f"1:{col}:"), f"{bad!r}: {msg}"


@st.composite
def number_literal(draw) -> tuple[str, str]:
    """(text, what the lexer makes of it): "int", "float", "malformed" or "range"."""
    digits = st.text("0123456789", min_size=1, max_size=6)
    kind = draw(st.sampled_from(["int", "big", "float", "exp", "dot", "e", "e-sign", "dot-e"]))
    whole = draw(digits)
    if kind == "int":
        return draw(st.sampled_from(["", "0", "00"])) + str(draw(st.integers(0, 2**31 - 1))), "int"
    if kind == "big":
        return str(draw(st.integers(2**31, 10**12))), "range"
    if kind == "float":
        return f"{whole}.{draw(digits)}", "float"
    if kind == "exp":
        frac = draw(st.sampled_from(["", "." + draw(digits)]))
        sign = draw(st.sampled_from(["", "+", "-"]))
        return f"{whole}{frac}{draw(st.sampled_from('eE'))}{sign}{draw(digits)}", "float"
    if kind == "dot":
        return f"{whole}.", "malformed"
    if kind == "e":
        return f"{whole}{draw(st.sampled_from('eE'))}", "malformed"
    if kind == "e-sign":
        return f"{whole}.{draw(digits)}e{draw(st.sampled_from('+-'))}", "malformed"
    return f"{whole}.e{draw(digits)}", "malformed"


@given(number=number_literal(), pad=st.integers(0, 3), data=st.data())
@hidden_settings(60)
@pytest.mark.kata_gate(
    "tokenize gets a random number literal wrong: an int, a float in each README form, an int "
    "above 2**31 - 1 or a malformed '1.', '2e', '1.5e+', '1.e5' (kind, text or error and column)"
)
def test_lexer_hidden_every_number_rule(kata, number, pad, data):
    """Catches: a lexer that never validates numbers (every rule of the README's token table
    for numbers), or checks them only in the public cases. Literals drawn fresh each run."""
    text, want = number
    prefix = "x" + " " * data.draw(st.integers(1, 3)) + "+" + " " * pad
    source = prefix + text + " * y"
    lex = kata.module("lexer").tokenize
    col = len(prefix) + 1
    if want in ("int", "float"):
        got = [(t.kind, t.text, t.col) for t in lex(source)[:4]]
        assert got[2] == (want, text, col), (
            f"tokenize({source!r}): token 3 is {got[2]}, expected {(want, text, col)}"
        )
        return
    msg = compile_error(lex, source)
    expected = (
        f"1:{col}: integer literal {text} is out of range for i32"
        if want == "range"
        else f"1:{col}: malformed number {text!r}"
    )
    assert msg == expected, f"tokenize({source!r}): CompileError {msg!r}, expected {expected!r}"


# --------------------------------------------------------------------------- parser
@given(p=programs(depth=4))
@hidden_settings(30)  # 60 took 15-35 s of the 30 s limit on a loaded 2-core machine
def test_parser_hidden_minimal_parentheses(kata, syntax, p):
    """Random programs printed with only the parentheses the grammar needs must parse to the same
    tree. Catches: a select's then-branch parsed as a comparison (`c ? d ? x : y : z`), a select
    condition that swallows the select, unary minus binding looser than `*`, or right-associative
    `-` and `/` between names (the public cases are mostly literals)."""
    source = p.src(pretty=True)
    program = kata.module("parser").parse(kata.module("lexer").tokenize(source))
    assert syntax.dump(program.result) == p.result.dump(), f"parse of:\n{source}"
    got = [(b.name, syntax.dump(b.value)) for b in program.lets]
    want = [(n, v.dump()) for n, v in p.lets]
    assert got == want, f"parse: the lets are {got}, expected {want}, in:\n{source}"


@pytest.mark.parametrize(
    "source, message",
    [
        ("in x: f32;\n# comment ; (\nlet y = x *;\ny", "3:12: expected an expression, found ';'"),
        ("in x: f32, ;\nx", "1:12: expected a name, found ';'"),
        ("let y = 2;\nlet z = (y + 1;\nz", "2:15: expected ')', found ';'"),
        ("in x: f32;\nmax(x, 1.0,)", "2:12: expected an expression, found ')'"),
        ("in x: f32;\nx ? : 1.0", "2:5: expected an expression, found ':'"),
        ("let in = 3; 1", "1:5: expected a name, found 'in'"),
    ],
)
def test_parser_hidden_errors_on_later_lines(kata, source, message):
    """Catches: positions taken from the start of the input, or the error raised at the previous
    token rather than the one that does not fit."""
    got = compile_error(kata.module("compiler").front_end, source)
    assert got == message, (
        f"front_end's CompileError is {got!r}, expected {message!r}, for:\n{source}"
    )


# --------------------------------------------------------------------------- typecheck
@given(p=programs(depth=3))
@hidden_settings(40)
def test_typecheck_hidden_random_programs_check(kata, p):
    """Every generated program is well-typed; the checker must accept it and give every let and
    the result its type. Catches: rejecting bool lets used as conditions, i32 selects, or
    conversions nested in other calls."""
    program = kata.module("compiler").front_end(p.src())
    assert program.result.type == p.result.typ, p.src()
    assert [b.value.type for b in program.lets] == [v.typ for _, v in p.lets], p.src()


@pytest.mark.parametrize(
    "source, message",
    [
        ("in x: f32;\nlet y = x + 1;\ny", "2:11: '+' needs operands of one type, got f32 and i32"),
        ("let a = b;\nlet b = 1;\na", "1:9: undefined name 'b'"),
        ("in k: i32;\nlet c = k < 1;\nc + 1", "3:3: '+' needs f32 or i32 operands, got bool"),
        ("in x: f32;\nlet c = x < 1.0;\nc", "3:1: the result must be f32 or i32, got bool"),
        ("in x: f32;\nabs(x < 1.0)", "2:1: abs needs an f32 or i32 argument, got bool"),
        (
            "in x: f32, k: i32;\nmin(x, f32(i32(x)) + k)",
            "2:20: '+' needs operands of one type, got f32 and i32",
        ),  # fmt: skip
        (
            "in x: f32;\nlet c = x > 0.0;\nc ? c : c",
            "3:3: the branches of '?' must be f32 or i32, got bool",
        ),  # fmt: skip
        ("in x: f32;\nlet x = 1.0;\nx", "2:5: 'x' is already defined"),
        ("in k: i32;\nmax(k, 2.0)", "2:1: max needs two arguments of one type, got i32 and f32"),
    ],
)
def test_typecheck_hidden_errors_inside_lets_and_calls(kata, source, message):
    """Catches: a checker that only looks at the result expression, or reports at the let or
    the statement instead of the offending node."""
    got = compile_error(kata.module("compiler").front_end, source)
    assert got == message, (
        f"front_end's CompileError is {got!r}, expected {message!r}, for:\n{source}"
    )


@given(p=programs(depth=2), data=st.data())
@hidden_settings(30)
@pytest.mark.kata_gate(
    "front_end accepts, or reports elsewhere, a random program that defines a name twice "
    "(an input repeated, or a let naming an input or an earlier let)"
)
def test_typecheck_hidden_every_redefinition_is_refused(kata, p, data):
    """Catches: no 'already defined' check, or one for inputs only or lets only. The second
    definition is drawn at random among the program's names; the error is at its name."""
    names = [n for n, _ in p.inputs] + [n for n, _ in p.lets]
    if not names:
        return
    name = data.draw(st.sampled_from(names), label="defined twice")
    as_input = data.draw(st.booleans(), label="as an input") and name in dict(p.inputs)
    if as_input:
        kinds = dict(p.inputs)
        inputs = (*p.inputs, (name, kinds.get(name, "f32")))
        twice = P(inputs, p.lets, p.result)
        head = twice.src().split("\n", 1)[0]
        line, col = 1, head.rindex(f"{name}:") + 1
    else:
        at = data.draw(st.integers(0, len(p.lets)), label="let position")
        if name in [n for n, _ in p.lets[:at]] or name in dict(p.inputs):
            pass  # defined before the new let
        else:
            at = len(p.lets)  # after its own definition
        value = T("num", "i32", "1", value=1)
        twice = P(p.inputs, (*p.lets[:at], (name, value), *p.lets[at:]), p.result)
        line, col = (1 if p.inputs else 0) + at + 1, 5
    source = twice.src()
    got = compile_error(kata.module("compiler").front_end, source)
    want = f"{line}:{col}: '{name}' is already defined"
    assert got == want, f"front_end's CompileError is {got!r}, expected {want!r}, for:\n{source}"


# --------------------------------------------------------------------------- codegen
@given(p=programs(depth=3))
@hidden_settings(45)
def test_codegen_hidden_random_programs_compute_the_oracle(compiler, sem, p):
    """Unfolded, unallocated kernels of random programs on the interpreter, against the oracle,
    with NaN, infinities, -0.0, subnormals and INT_MIN in the inputs. Catches: parameters
    ordered by type instead of as declared, i32 inputs loaded or computed as f32, NaN-unsafe
    min/max (setp + selp), and lets lowered in the wrong order."""
    arrays = inputs_for(p)
    ptx = compiler.compile_source(p.src(), optimize=False, allocate_registers=False).ptx
    got, _ = launch(ptx, p, arrays)
    assert_values(got, oracle(sem, p, arrays), p, arrays, "unfolded kernel")


def test_codegen_hidden_min_max_nan_and_bra_uni(compiler, sem):
    """min/max return the operand that is not NaN, whichever side it is on, and the bounds check
    diverges (the interpreter reports a divergent bra.uni). Catches: min/max built from
    setp.lt + selp (right only when the NaN is the first operand), and `@p bra.uni $done`."""
    p = P((("a", "f32"), ("b", "f32")), (), T("bin", "f32", "+", (
        T("call", "f32", "min", (T("name", "f32", "a"), T("name", "f32", "b"))),
        T("call", "f32", "max", (T("name", "f32", "b"), T("name", "f32", "a"))),
    )))  # fmt: skip
    a = np.resize(np.array([1.0, np.nan, 2.0, np.nan, -3.0], np.float32), N)
    b = np.resize(np.array([np.nan, 1.0, 5.0, np.nan, 4.0], np.float32), N)
    got, _ = launch(compiler.compile_source(p.src(), optimize=False).ptx, p, [a, b])
    assert_values(got, oracle(sem, p, [a, b]), p, [a, b], "min/max with NaN")


@pytest.mark.kata_gate(
    "compile_source starts another program or calls harness.cuda / harness.native (nvcc, the "
    "grader's CUDA compiler) while it compiles: the PTX must come from your instruction selection"
)
def test_codegen_hidden_generated_not_compiled_by_nvcc(compiler):
    """Catches: codegen writing the program out as CUDA C and returning nvcc's PTX (the
    kernel computes, but nothing was selected), through subprocess or harness.cuda.static."""
    with watch_calls("harness.cuda", "harness.native") as log:
        compiler.compile_source("in x: f32, k: i32; let y = x * 2.0; y + f32(k % 3)")
    assert not log, f"compile_source called {log}"


# x = y = 1 + 2**-12: x * y = 1 + 2**-11 + 2**-24 exactly, a tie in f32 that rounds to even, so
# x * y - 1.0 is 2**-11 with IEEE arithmetic and 2**-11 + 2**-24 when a multiply and an add are
# fused; x / y with y = 3 + 0.1 k lands one ulp off under div.approx for some k.
IEEE_PROGRAMS = ["in x: f32, y: f32; x * y - 1.0", "in x: f32, y: f32; 1.0 - x * y + x / y"]
_UNROUNDED = re.compile(r"\b(add|sub|mul)(\.ftz)?\.f32\b|\bdiv\.(approx|full)\b")


@pytest.mark.kata_gate(
    "f32 + - * / are not IEEE: without .rn ptxas may fuse a multiply and an add into one fma, "
    "and div.approx/div.full are within 2 ulp, not correctly rounded (write add.rn.f32 ... div.rn.f32)"
)
def test_codegen_hidden_ieee_rounding(compiler, sem):
    """Catches: `add.f32`/`mul.f32` without .rn (ptxas may contract them into an fma: another
    result on a GPU than the language's) and div.approx.f32 (what nvcc's fast math emits)."""
    x = np.full(N, 1 + 2.0**-12, np.float32)
    y = np.where(np.arange(N) % 2 == 0, x, np.float32(3) + np.float32(0.1) * np.arange(N))
    y = y.astype(np.float32)
    for src in IEEE_PROGRAMS:
        ptx = compiler.compile_source(src).ptx
        body = ptx[ptx.index("{") :]
        found = sorted({m.group(0) for m in _UNROUNDED.finditer(body)})
        assert not found, f"{src}: {', '.join(found)} in the kernel; README.md asks for .rn"
        p = P((("x", "f32"), ("y", "f32")), (), T("name", "f32", "x"))
        out, _ = launch(ptx, p, [x, y])
        one = np.float32(1)
        want = x * y - one if "/" not in src else (one - x * y) + x / y  # f32, rounded each step
        assert np.array_equal(out, want), f"{src}: not IEEE f32 arithmetic"


SQRT_PROGRAMS = [
    "in x: f32; sqrt(x)",
    "in x: f32, y: f32; sqrt(x * y) + sqrt(y)",
    "in x: f32, n: i32; let s = sqrt(x); n > 3 ? s : -sqrt(f32(n))",
]


@pytest.mark.kata_gate(
    "sqrt is not lowered to the correctly rounded sqrt.rn.f32 the README's table asks for "
    "(sqrt.approx.f32 is within ulps on hardware; the interpreter computes it exactly)"
)
def test_codegen_hidden_sqrt_is_correctly_rounded(compiler):
    """Catches: sqrt lowered to sqrt.approx.f32 (what fast math emits). The interpreter runs
    .approx functions in float64 and rounds them, so values alone cannot tell it from
    sqrt.rn.f32 here: the instruction is the property."""
    for src in SQRT_PROGRAMS:
        for optimize in (False, True):
            ptx = compiler.compile_source(src, optimize=optimize).ptx
            body = ptx[ptx.index("{") :]
            roots = re.findall(r"\bsqrt(?:\.\w+)*\b", body)
            assert roots, f"{src} (optimize={optimize}): no sqrt instruction in the kernel"
            wrong = sorted({r for r in roots if r != "sqrt.rn.f32"})
            assert not wrong, (
                f"{src} (optimize={optimize}): {', '.join(wrong)} in the kernel; README.md's "
                f"table lowers sqrt to sqrt.rn.f32"
            )


# --------------------------------------------------------------------------- ptxas
def _assemble(ptxs: list[tuple[str, str]], arch: str) -> None:
    """One ptxas run over many kernels: every module's body after the first one's header."""
    header_end = re.compile(r"^\.address_size.*$", re.M)
    parts, owner = [], []
    for i, (source, text) in enumerate(ptxs):
        m = header_end.search(text)
        assert m, f"no .address_size line in the PTX of:\n{source}"
        chunk = text if i == 0 else text[m.end() :]
        owner += [source] * chunk.count("\n")
        parts.append(chunk)
    module = "\n".join(parts)
    try:
        kernels = ptxas_resources(module, arch, cache=CACHE)
    except CudaCompileError as e:
        line = re.search(r"line (\d+)", str(e))
        culprit = owner[min(int(line.group(1)), len(owner)) - 1] if line else "(unknown)"
        raise AssertionError(
            f"ptxas -arch={arch} rejected the kernel of:\n{culprit}\n{e}"
        ) from None
    assert len(kernels) == len(ptxs), f"ptxas built {len(kernels)} kernels of {len(ptxs)}"


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_ptxas_hidden_random_programs_assemble(compiler, arch):
    """Thirty random programs (unfolded, unallocated) in one ptxas run per architecture.
    Catches: a fixed `.reg` count that suffices for the small public programs, immediates where
    ptxas wants registers, or a `.version` too old for sm_90."""
    found: list[P] = []

    @given(p=programs(depth=3))
    @hidden_settings(30)
    def collect(p):
        found.append(p)

    collect()
    ptxs = []
    for i, p in enumerate(found):
        text = compiler.compile_source(p.src(), arch=arch, kernel=f"k{i}", optimize=False, allocate_registers=False).ptx  # fmt: skip
        ptxs.append((p.src(), text))
    _assemble(ptxs, arch)


@pytest.mark.kata_gate(
    "the kernel handed to ptxas is not the program's kernel: on the PTX interpreter it does not "
    "compute the program's values (random programs, both architectures)"
)
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_ptxas_hidden_assembles_the_programs_kernel(compiler, sem, arch):
    """Eight random programs: the PTX that ptxas assembles is run on the interpreter against
    the oracle. Catches: a kernel that ptxas accepts because its body is empty (a lone `ret;`)
    or is not the program's, so that assembling it proves nothing."""
    found: list[P] = []

    @given(p=programs(depth=3))
    @hidden_settings(8)
    def collect(p):
        found.append(p)

    collect()
    ptxs = []
    for i, p in enumerate(found):
        text = compiler.compile_source(p.src(), arch=arch, kernel=f"k{i}", optimize=False, allocate_registers=False).ptx  # fmt: skip
        ptxs.append((p.src(), text))
        arrays = inputs_for(p)
        got, _ = launch(text, p, arrays, kernel=f"k{i}")
        assert_values(got, oracle(sem, p, arrays), p, arrays, f"the kernel assembled for {arch}")
    _assemble(ptxs, arch)


# --------------------------------------------------------------------------- fold
@given(p=programs(depth=3))
@hidden_settings(45)
@pytest.mark.kata_gate(
    "the folded program of a random program keeps a constant subtree (arithmetic, a call or "
    "conversion, a select with a constant condition), is larger than the program folded by "
    "hand, or computes other values"
)
def test_fold_hidden_as_small_as_folding_by_hand(compiler, sem, syntax, p):
    """The folded kernel has exactly as many instructions as the program folded by hand, and the
    same values as the oracle. Catches: folding only literal-with-literal operations (not
    through lets, conversions, calls or selects), and folding in double precision."""
    arrays = inputs_for(p)
    hand, foldable = program_by_hand(sem, p)
    folded = compiler.compile_source(p.src())
    best = compiler.compile_source(hand)
    assert count(folded.ptx) == count(best.ptx), (
        f"{count(folded.ptx)} instructions, but {count(best.ptx)} when folded by hand\n"
        f"program:\n{p.src()}\nby hand:\n{hand}"
    )
    if foldable:
        unfolded = compiler.compile_source(p.src(), optimize=False)
        assert count(folded.ptx) <= count(unfolded.ptx), "folding added instructions"
    left = [n for n in _nodes(syntax, folded.program) if _foldable(syntax, n)]
    assert not left, f"left unfolded: {syntax.dump(left[0])}\nprogram:\n{p.src()}"
    got, _ = launch(folded.ptx, p, arrays)
    assert_values(got, oracle(sem, p, arrays), p, arrays, "folded kernel")


def _nodes(syntax, program):
    todo = [b.value for b in program.lets] + [program.result]
    while todo:
        n = todo.pop()
        yield n
        for attr in ("operand", "left", "right", "cond", "then", "other"):
            if hasattr(n, attr):
                todo.append(getattr(n, attr))
        todo += getattr(n, "args", [])


def _foldable(syntax, n) -> bool:
    kids = [getattr(n, a) for a in ("operand", "left", "right", "cond") if hasattr(n, a)]
    kids += getattr(n, "args", [])
    if isinstance(n, syntax.Select):
        return isinstance(n.cond, syntax.Num)
    if isinstance(n, syntax.Binary) and n.op in "/%" and n.type == "i32" and isinstance(n.right, syntax.Num) and n.right.value == 0:  # fmt: skip
        return False
    return bool(kids) and all(isinstance(k, syntax.Num) for k in kids)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("in x: f32; x + ((1e8 + 1.0) - 1e8)", "(+ x 0.0)"),  # f32: 1e8 + 1 == 1e8
        ("in x: f32; x * (0.1 * 3.0)", "(* x 0.30000001192092896)"),
        ("in x: f32; x + f32(16777217)", "(+ x 16777216.0)"),
        ("in k: i32; k + i32(3e9)", "(+ k 2147483647)"),
        ("in k: i32; k + 2147483647 * 2", "(+ k -2)"),
        ("in k: i32; k + -7 / 2 + -7 % 2", "(+ (+ k -3) -1)"),
        ("in x: f32; (x + 1e8) - 1e8", "(- (+ x 100000000.0) 100000000.0)"),
        ("in x: f32; x * 2.0 * 3.0", "(* (* x 2.0) 3.0)"),
        ("in x: f32; min(x, 0.0 / 0.0)", "(min x nan)"),
    ],
)
def test_fold_hidden_f32_arithmetic_and_no_algebra(compiler, syntax, source, expected):
    """Catches: folding with Python's double-precision arithmetic, Python's floor division and
    modulo for i32, no wrap-around, no saturation in i32(), and 'folding' by reassociating
    (x + a) + b into x + (a + b), which changes f32 results."""
    assert syntax.dump(compiler.compile_source(source).program.result) == expected, source


# --------------------------------------------------------------------------- regalloc
def _ranges(body, instr_type) -> dict:
    ranges: dict = {}
    for i, ins in enumerate(body):
        if isinstance(ins, instr_type):
            for v in ins.uses():
                ranges[v] = (ranges[v][0], i)
            if ins.dst is not None:
                ranges[ins.dst] = (i, i)
    return ranges


@given(p=programs(depth=3))
@hidden_settings(40)
def test_regalloc_hidden_valid_minimal_and_correct(compiler, sem, ir, p):
    """Random programs: no two values that are live at once share a register, each kind uses
    exactly as many registers as the most values live at one point, and the kernel still
    computes the oracle. Catches: freeing a register at the first use instead of the last,
    forgetting selp's third operand or a branch guard as a use, one number space for every
    kind, and 'minimal' counts that only hold for the public chain-shaped expressions."""
    c = compiler.compile_source(p.src())
    ranges = _ranges(c.body, ir.Instr)
    holders: dict[str, list] = {}
    for v, (s, e) in ranges.items():
        name = c.names[v]
        assert re.fullmatch(re.escape(ir.KINDS[v.kind]) + r"\d+", name), f"{v} named {name!r}"
        holders.setdefault(name, []).append((s, e, v))
    for name, spans in holders.items():
        spans.sort()
        for (s1, e1, v1), (s2, _, v2) in zip(spans, spans[1:], strict=False):
            assert s2 >= e1, f"{v1} (live {s1}..{e1}) and {v2} (written at {s2}) share {name}\n{p.src()}"  # fmt: skip
    used = {k: len({n for v, n in c.names.items() if v.kind == k}) for k in ir.KINDS}
    most = dict.fromkeys(ir.KINDS, 0)
    for i, ins in enumerate(c.body):
        live = dict.fromkeys(ir.KINDS, 0)
        for v, (s, e) in ranges.items():
            if s < i < e or v == getattr(ins, "dst", None):
                live[v.kind] += 1
        most = {k: max(most[k], live[k]) for k in most}
    assert used == most, f"registers per kind {used}, but {most} suffice\n{p.src()}"
    arrays = inputs_for(p)
    got, _ = launch(c.ptx, p, arrays)
    assert_values(got, oracle(sem, p, arrays), p, arrays, "allocated kernel")


# --------------------------------------------------------------------------- device (gpu tier)
def test_device_hidden_random_exact_programs_on_the_gpu(compiler, sem):
    """Random programs with exact operations only (no .approx functions) on the GPU against the
    oracle, bit for bit (NaN payloads aside). Catches: PTX that the interpreter forgives but
    the hardware does not (the JIT is a different ptxas, registers are real, memory is not
    bounds-checked)."""
    found: list[P] = []

    @given(p=programs(depth=3, exact=True))
    @hidden_settings(12)
    def collect(p):
        found.append(p)

    collect()
    for p in found:
        arrays = inputs_for(p)
        ptx = compiler.compile_source(p.src()).ptx
        out = np.full(N + PAD, 55, dtype=DTYPES[p.result.typ])
        res = run_on_device(ptx, "expr", [out, *arrays, np.uint32(N)], grid=-(-N // BLOCK), block=BLOCK)  # fmt: skip
        assert (res[0][N:] == 55).all(), f"threads past n stored on the GPU\n{p.src()}"
        assert_values(res[0][:N], oracle(sem, p, arrays), p, arrays, "on the GPU")


def test_device_hidden_approximate_functions_within_ulps(compiler):
    """sin/cos/ex2/lg2/rsqrt on hardware are approximations: within a small absolute (sin, cos)
    or relative error of the exact values. Catches: the wrong function behind a name."""
    src = "in x: f32; sin(x) + 2.0 * cos(x) + exp2(x * 0.25) + log2(abs(x) + 1.0) + rsqrt(abs(x) + 1.0)"  # fmt: skip
    x = np.linspace(-3.0, 3.0, N).astype(np.float32)
    out = np.zeros(N, np.float32)
    ptx = compiler.compile_source(src).ptx
    got = run_on_device(ptx, "expr", [out, x, np.uint32(N)], grid=-(-N // BLOCK), block=BLOCK)[0]
    xd = x.astype(np.float64)
    want = np.sin(xd) + 2 * np.cos(xd) + np.exp2(xd * 0.25) + np.log2(np.abs(xd) + 1) + 1 / np.sqrt(np.abs(xd) + 1)  # fmt: skip
    err = np.abs(got - want)
    assert err.max() < 1e-4, f"largest error {err.max():.2e} at x={x[err.argmax()]}"
