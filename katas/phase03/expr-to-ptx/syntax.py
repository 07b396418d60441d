"""Tokens, the syntax tree and CompileError: the data every stage of the compiler shares.

Given code: the stages you write (lexer, parser, typecheck, fold, codegen, regalloc) produce and
consume these types. README.md has the grammar and the error-message format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

TYPES = ("f32", "i32", "bool")
KEYWORDS = ("in", "let")
# Every operator and punctuation token, longest first (so "<=" wins over "<").
OPERATORS = ("<=", ">=", "==", "!=", "+", "-", "*", "/", "%", "<", ">", "?", ":", "(", ")", ",", ";", "=")  # fmt: skip
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
ARITHMETIC = ("+", "-", "*", "/", "%")
# name -> number of arguments. min/max/abs work on f32 or i32; the others on f32 only;
# f32(x) converts i32 -> f32 (round to nearest), i32(x) converts f32 -> i32 (toward zero).
FUNCTIONS = {
    "sqrt": 1, "rsqrt": 1, "exp2": 1, "log2": 1, "sin": 1, "cos": 1,
    "abs": 1, "min": 2, "max": 2, "f32": 1, "i32": 1,
}  # fmt: skip


class CompileError(Exception):
    """A diagnostic at a source position: ``str(err)`` is ``"line:col: message"`` (1-based)."""

    def __init__(self, line: int, col: int, message: str) -> None:
        self.line, self.col, self.message = line, col, message
        super().__init__(f"{line}:{col}: {message}")


class Token(NamedTuple):
    kind: str  # "int", "float", "name", "keyword", "op" or "eof"
    text: str  # as written ("" for eof)
    line: int
    col: int


# --------------------------------------------------------------------------- syntax tree
@dataclass(eq=False)
class Expr:
    line: int
    col: int
    type: str | None = field(default=None, kw_only=True)  # set by typecheck: f32, i32 or bool


@dataclass(eq=False)
class Num(Expr):
    value: int | float  # i32 literals are ints, f32 literals floats (already rounded to f32)


@dataclass(eq=False)
class Name(Expr):
    id: str


@dataclass(eq=False)
class Unary(Expr):
    op: str  # "-"
    operand: Expr


@dataclass(eq=False)
class Binary(Expr):  # line/col: the operator's position
    op: str  # one of ARITHMETIC or COMPARISONS
    left: Expr
    right: Expr


@dataclass(eq=False)
class Select(Expr):  # cond ? then : other; line/col: the '?'
    cond: Expr
    then: Expr
    other: Expr


@dataclass(eq=False)
class Call(Expr):  # line/col: the function name
    func: str
    args: list[Expr]


@dataclass(eq=False)
class Input:
    name: str
    type: str  # "f32" or "i32"
    line: int
    col: int


@dataclass(eq=False)
class Let:
    name: str
    value: Expr
    line: int
    col: int  # position of the name


@dataclass(eq=False)
class Program:
    inputs: list[Input]
    lets: list[Let]
    result: Expr


def dump(node: object) -> str:
    """A compact s-expression of a tree, for test messages: (+ a (* b 2.0))."""
    if isinstance(node, Program):
        parts = [f"(in {' '.join(f'{i.name}:{i.type}' for i in node.inputs)})"]
        parts += [f"(let {b.name} {dump(b.value)})" for b in node.lets]
        return " ".join([*parts, dump(node.result)])
    if isinstance(node, Num):
        return repr(node.value)
    if isinstance(node, Name):
        return node.id
    if isinstance(node, Unary):
        return f"(neg {dump(node.operand)})"
    if isinstance(node, Binary):
        return f"({node.op} {dump(node.left)} {dump(node.right)})"
    if isinstance(node, Select):
        return f"(? {dump(node.cond)} {dump(node.then)} {dump(node.other)})"
    if isinstance(node, Call):
        return f"({node.func} {' '.join(dump(a) for a in node.args)})"
    raise TypeError(f"not a syntax node: {node!r}")
