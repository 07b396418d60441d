"""Parser: tokens -> Program (task "parser"). README.md, "Grammar", is the specification."""

from __future__ import annotations

from harness import todo

from .semantics import f32  # noqa: F401  (round float literals with it)
from .syntax import (  # noqa: F401
    COMPARISONS,
    Binary,
    Call,
    CompileError,
    Expr,
    Input,
    Let,
    Name,
    Num,
    Program,
    Select,
    Token,
    Unary,
)


def parse(tokens: list[Token]) -> Program:
    """Parse the tokens of one program.

    One function per grammar rule works well (program, expr, comparison, sum, term, unary,
    primary): each consumes the tokens of its rule and returns a node. Errors are
    ``CompileError(tok.line, tok.col, f"expected {what}, found {found}")`` at the token that
    does not fit, with `found` the token's text in quotes ('3') or "end of input".
    """
    todo("parser.parse")
