"""Type checker: sets ``.type`` on every expression, or raises CompileError (reference)."""

from __future__ import annotations

from .syntax import (
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

_F32_ONLY = ("sqrt", "rsqrt", "exp2", "log2", "sin", "cos")


def check(program: Program) -> Program:
    """Type-check `program` in place and return it."""
    env: dict[str, str] = {}
    for inp in program.inputs:
        if inp.name in env:
            raise CompileError(inp.line, inp.col, f"'{inp.name}' is already defined")
        env[inp.name] = inp.type
    for let in program.lets:
        typ = _expr(let.value, env)
        if let.name in env:
            raise CompileError(let.line, let.col, f"'{let.name}' is already defined")
        env[let.name] = typ
    typ = _expr(program.result, env)
    if typ == "bool":
        r = program.result
        raise CompileError(r.line, r.col, "the result must be f32 or i32, got bool")
    return program


def _expr(e: Expr, env: dict[str, str]) -> str:
    e.type = _infer(e, env)
    return e.type


def _infer(e: Expr, env: dict[str, str]) -> str:
    if isinstance(e, Num):
        if isinstance(e.value, bool):
            return "bool"
        return "i32" if isinstance(e.value, int) else "f32"
    if isinstance(e, Name):
        if e.id not in env:
            raise CompileError(e.line, e.col, f"undefined name '{e.id}'")
        return env[e.id]
    if isinstance(e, Unary):
        t = _expr(e.operand, env)
        if t == "bool":
            raise CompileError(e.line, e.col, f"'{e.op}' needs an f32 or i32 operand, got bool")
        return t
    if isinstance(e, Binary):
        lt, rt = _expr(e.left, env), _expr(e.right, env)
        for t in (lt, rt):
            if t == "bool":
                raise CompileError(e.line, e.col, f"'{e.op}' needs f32 or i32 operands, got bool")
        if lt != rt:
            raise CompileError(
                e.line, e.col, f"'{e.op}' needs operands of one type, got {lt} and {rt}"
            )
        if e.op == "%" and lt != "i32":
            raise CompileError(e.line, e.col, f"'%' needs i32 operands, got {lt}")
        return "bool" if e.op in COMPARISONS else lt
    if isinstance(e, Select):
        ct = _expr(e.cond, env)
        if ct != "bool":
            raise CompileError(e.line, e.col, f"the condition of '?' must be bool, got {ct}")
        tt, ot = _expr(e.then, env), _expr(e.other, env)
        if "bool" in (tt, ot):
            raise CompileError(e.line, e.col, "the branches of '?' must be f32 or i32, got bool")
        if tt != ot:
            raise CompileError(
                e.line, e.col, f"the branches of '?' have different types: {tt} and {ot}"
            )
        return tt
    if isinstance(e, Call):
        if e.func not in FUNCTIONS:
            raise CompileError(e.line, e.col, f"unknown function '{e.func}'")
        want = FUNCTIONS[e.func]
        if len(e.args) != want:
            raise CompileError(
                e.line, e.col, f"{e.func} takes {want} argument(s), got {len(e.args)}"
            )
        ts = [_expr(a, env) for a in e.args]
        if e.func in _F32_ONLY or e.func == "i32":
            if ts[0] != "f32":
                raise CompileError(e.line, e.col, f"{e.func} needs an f32 argument, got {ts[0]}")
            return "f32" if e.func != "i32" else "i32"
        if e.func == "f32":
            if ts[0] != "i32":
                raise CompileError(e.line, e.col, f"f32 needs an i32 argument, got {ts[0]}")
            return "f32"
        if e.func == "abs":
            if ts[0] == "bool":
                raise CompileError(e.line, e.col, "abs needs an f32 or i32 argument, got bool")
            return ts[0]
        if ts[0] != ts[1] or "bool" in ts:
            raise CompileError(
                e.line, e.col, f"{e.func} needs two arguments of one type, got {ts[0]} and {ts[1]}"
            )
        return ts[0]
    raise TypeError(f"not an expression: {e!r}")
