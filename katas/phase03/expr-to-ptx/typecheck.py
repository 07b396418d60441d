"""Type checker (task "typecheck"): README.md, "Types", lists every rule and message."""

from __future__ import annotations

from harness import todo

from .syntax import (  # noqa: F401
    COMPARISONS,
    FUNCTIONS,
    Binary,
    Call,
    CompileError,
    Expr,
    Name,
    Num,
    Program,
    Select,
    Unary,
)


def check(program: Program) -> Program:
    """Set ``.type`` ("f32", "i32" or "bool") on every expression of `program`, in place, and
    return it; raise CompileError at the node's position for the first error found."""
    todo("typecheck.check")
