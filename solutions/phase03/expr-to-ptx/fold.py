"""Constant folding: evaluate at compile time what does not depend on the inputs (reference)."""

from __future__ import annotations

from . import semantics
from .syntax import Binary, Call, Expr, Let, Name, Num, Program, Select, Unary


def fold(program: Program) -> Program:
    """A new Program where every subexpression without inputs is a Num, lets bound to constants
    are substituted (and dropped), and selects with constant conditions keep one branch."""
    consts: dict[str, Num] = {}
    lets: list[Let] = []
    for let in program.lets:
        value = fold_expr(let.value, consts)
        if isinstance(value, Num):
            consts[let.name] = value
        else:
            lets.append(Let(let.name, value, let.line, let.col))
    return Program(list(program.inputs), lets, fold_expr(program.result, consts))


def _num(e: Expr, value: int | float | bool) -> Num:
    typ = "bool" if isinstance(value, bool) else e.type
    return Num(e.line, e.col, value, type=typ)


def fold_expr(e: Expr, consts: dict[str, Num]) -> Expr:
    if isinstance(e, Num):
        return e
    if isinstance(e, Name):
        c = consts.get(e.id)
        return _num(e, c.value) if c is not None else e
    if isinstance(e, Unary):
        x = fold_expr(e.operand, consts)
        if isinstance(x, Num):
            return _num(e, semantics.negate(e.type, x.value))
        return Unary(e.line, e.col, e.op, x, type=e.type)
    if isinstance(e, Binary):
        a, b = fold_expr(e.left, consts), fold_expr(e.right, consts)
        if isinstance(a, Num) and isinstance(b, Num):
            try:
                return _num(e, semantics.binary(e.op, a.type, a.value, b.value))
            except ZeroDivisionError:
                pass  # undefined: leave it to run time
        return Binary(e.line, e.col, e.op, a, b, type=e.type)
    if isinstance(e, Select):
        c = fold_expr(e.cond, consts)
        if isinstance(c, Num):
            return fold_expr(e.then if c.value else e.other, consts)
        return Select(
            e.line, e.col, c, fold_expr(e.then, consts), fold_expr(e.other, consts), type=e.type
        )
    if isinstance(e, Call):
        args = [fold_expr(a, consts) for a in e.args]
        if all(isinstance(a, Num) for a in args):
            return _num(e, semantics.call(e.func, args[0].type, [a.value for a in args]))
        return Call(e.line, e.col, e.func, args, type=e.type)
    raise TypeError(f"not an expression: {e!r}")
