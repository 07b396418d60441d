"""Constant folding (task "fold"): compute at compile time what does not depend on the inputs."""

from __future__ import annotations

from harness import todo

from . import semantics  # noqa: F401  (binary, negate, call: the run-time results)
from .syntax import Binary, Call, Expr, Let, Name, Num, Program, Select, Unary  # noqa: F401


def fold(program: Program) -> Program:
    """A new, type-annotated Program in which

    - every subexpression whose leaves are all literals is one Num (with its .type), computed by
      `semantics` exactly as the kernel would; i32 division by zero is left alone;
    - a let whose value folds to a Num is substituted into its uses and dropped;
    - ``c ? a : b`` with a constant condition is the chosen branch.

    Never reassociate: ``(x + 1.0) + 2.0`` is not ``x + 3.0`` in floating point.
    """
    todo("fold.fold")
