"""Code generation (tasks "codegen" and "ptxas"): Program -> virtual-register PTX -> text."""

from __future__ import annotations

from harness import todo

from .ir import KINDS, Body, Instr, Label, Mem, Operand, VReg, render  # noqa: F401
from .syntax import Binary, Call, Expr, Name, Num, Program, Select, Unary  # noqa: F401

PTX_VERSION = "7.8"  # the oldest PTX ISA version that knows sm_90


def lower(program: Program) -> Body:
    """The kernel body for ``out[i] = result`` over virtual registers.

    README.md, "The kernel", gives the shape: load the parameters, compute
    i = ctaid.x * ntid.x + tid.x, branch to ``$done`` when i >= n, load each input's element i,
    compute the lets in order and then the result, store it to out[i], ``$done: ret``. Use a
    new VReg for every value you write; "Instructions" in the README says which PTX
    instruction implements each operation of the language.
    """
    todo("codegen.lower")


def emit(kernel: str, program: Program, body: Body, names: dict[VReg, str], arch: str) -> str:
    """The whole PTX module as text: ``.version``, ``.target <arch>``, ``.address_size 64``,
    the ``.visible .entry`` with parameters (out, one per input in order, n), one ``.reg``
    declaration per kind used (``.reg .f32 %f<3>;`` declares %f0..%f2), then every line of
    the body (ir.render(instr, names))."""
    todo("codegen.emit")
