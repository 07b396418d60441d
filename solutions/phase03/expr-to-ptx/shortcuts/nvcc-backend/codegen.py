"""Code generation: a checked Program -> instructions over virtual registers -> PTX text
(reference solution)."""

from __future__ import annotations

import re
import struct
from pathlib import Path

from .ir import KINDS, Body, Instr, Label, Mem, Operand, VReg
from .syntax import Binary, Call, Expr, Name, Num, Program, Select, Unary

PTX_VERSION = "7.8"  # the oldest PTX ISA that has sm_90
_F32_BINARY = {"+": "add.rn.f32", "-": "sub.rn.f32", "*": "mul.rn.f32", "/": "div.rn.f32"}
_I32_BINARY = {"+": "add.s32", "-": "sub.s32", "*": "mul.lo.s32", "/": "div.s32", "%": "rem.s32"}
_CMP = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
_F32_CALL = {
    "sqrt": "sqrt.rn.f32", "rsqrt": "rsqrt.approx.f32", "exp2": "ex2.approx.f32",
    "log2": "lg2.approx.f32", "sin": "sin.approx.f32", "cos": "cos.approx.f32",
}  # fmt: skip
_SUFFIX = {"f32": "f32", "i32": "s32"}
_KIND = {"f32": "f32", "i32": "b32", "bool": "pred"}


def f32_literal(value: float) -> str:
    """PTX's exact spelling of an f32 immediate: 0f3F800000 for 1.0."""
    return f"0f{struct.unpack('<I', struct.pack('<f', value))[0]:08X}"


def param_name(input_name: str) -> str:
    return f"in_{input_name}"


class _Lowering:
    def __init__(self) -> None:
        self.body: Body = []
        self.counts: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.env: dict[str, Operand] = {}

    def new(self, kind: str) -> VReg:
        v = VReg(kind, self.counts[kind])
        self.counts[kind] += 1
        return v

    def emit(self, opcode: str, kind: str | None, *srcs: Operand, **kw: object) -> VReg | None:
        dst = self.new(kind) if kind is not None else None
        self.body.append(Instr(opcode, dst, tuple(srcs), **kw))  # type: ignore[arg-type]
        return dst

    def global_pointer(self, param: str) -> VReg:
        raw = self.emit("ld.param.u64", "b64", Mem(param))
        return self.emit("cvta.to.global.u64", "b64", raw)

    def expr(self, e: Expr) -> Operand:
        if isinstance(e, Num):
            return f32_literal(e.value) if e.type == "f32" else str(e.value)
        if isinstance(e, Name):
            return self.env[e.id]
        if isinstance(e, Unary):
            return self.emit(f"neg.{_SUFFIX[e.type]}", _KIND[e.type], self.expr(e.operand))
        if isinstance(e, Binary):
            a, b = self.expr(e.left), self.expr(e.right)
            t = e.left.type
            if e.op in _CMP:
                cmp = "neu" if (e.op == "!=" and t == "f32") else _CMP[e.op]
                return self.emit(f"setp.{cmp}.{_SUFFIX[t]}", "pred", a, b)
            table = _F32_BINARY if t == "f32" else _I32_BINARY
            return self.emit(table[e.op], _KIND[t], a, b)
        if isinstance(e, Select):
            c = self.expr(e.cond)
            if not isinstance(c, VReg):  # a constant condition (when folding is off)
                c = self.emit("setp.ne.s32", "pred", "1" if c == "True" else "0", "0")
            a, b = self.expr(e.then), self.expr(e.other)
            return self.emit(f"selp.{'f32' if e.type == 'f32' else 'b32'}", _KIND[e.type], a, b, c)
        if isinstance(e, Call):
            args = [self.expr(a) for a in e.args]
            at = e.args[0].type
            if e.func in _F32_CALL:
                return self.emit(_F32_CALL[e.func], "f32", *args)
            if e.func == "f32":
                return self.emit("cvt.rn.f32.s32", "f32", *args)
            if e.func == "i32":
                return self.emit("cvt.rzi.s32.f32", "b32", *args)
            return self.emit(f"{e.func}.{_SUFFIX[at]}", _KIND[at], *args)  # abs, min, max
        raise TypeError(f"not an expression: {e!r}")


def lower(program: Program) -> Body:
    """Instruction selection for ``out[i] = result`` with a bounds check ``i < n``."""
    lo = _Lowering()
    out = lo.global_pointer("out")
    bases = [lo.global_pointer(param_name(i.name)) for i in program.inputs]
    n = lo.emit("ld.param.u32", "b32", Mem("n"))
    ctaid = lo.emit("mov.u32", "b32", "%ctaid.x")
    ntid = lo.emit("mov.u32", "b32", "%ntid.x")
    tid = lo.emit("mov.u32", "b32", "%tid.x")
    i = lo.emit("mad.lo.s32", "b32", ctaid, ntid, tid)
    past = lo.emit("setp.ge.u32", "pred", i, n)
    lo.emit("bra", None, "$done", guard=past)  # divergent: not bra.uni
    offset = lo.emit("mul.wide.u32", "b64", i, "4")
    for inp, base in zip(program.inputs, bases, strict=True):
        addr = lo.emit("add.s64", "b64", base, offset)
        lo.env[inp.name] = lo.emit(f"ld.global.{_SUFFIX[inp.type]}", _KIND[inp.type], Mem(addr))
    for let in program.lets:
        lo.env[let.name] = lo.expr(let.value)
    value = lo.expr(program.result)
    addr = lo.emit("add.s64", "b64", out, offset)
    lo.body.append(Instr(f"st.global.{_SUFFIX[program.result.type]}", None, (Mem(addr), value)))
    lo.body.append(Label("$done"))
    lo.body.append(Instr("ret"))
    return lo.body


def _declarations(names: dict[VReg, str]) -> list[str]:
    top: dict[str, int] = {}
    for v, name in names.items():
        m = re.fullmatch(r"(%[a-z]+?)(\d+)", name)
        prefix = KINDS[v.kind]
        if m is None or m.group(1) != prefix:
            raise ValueError(f"{v} is allocated to {name!r}, not a {prefix}N register")
        top[v.kind] = max(top.get(v.kind, 0), int(m.group(2)) + 1)
    return [f"\t.reg .{kind} \t{KINDS[kind]}<{count}>;" for kind, count in top.items()]


_C_CALL = {
    "sqrt": "sqrtf", "rsqrt": "rsqrtf", "exp2": "__exp2f_fast", "log2": "__log2f",
    "sin": "__sinf", "cos": "__cosf",
}  # fmt: skip
_PRELUDE = (
    "__device__ float __exp2f_fast(float x) { float r; "
    'asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }\n'
)


def _c(e: Expr) -> str:
    """The expression in CUDA C: nvcc knows how to compile it."""
    if isinstance(e, Num):
        return f"{float(e.value)!r}f" if e.type == "f32" else f"({int(e.value)})"
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Unary):
        return f"(-{_c(e.operand)})"
    if isinstance(e, Binary):
        return f"({_c(e.left)} {e.op} {_c(e.right)})"
    if isinstance(e, Select):
        return f"({_c(e.cond)} ? {_c(e.then)} : {_c(e.other)})"
    if isinstance(e, Call):
        args = ", ".join(_c(a) for a in e.args)
        if e.func == "f32":
            return f"((float){args})"
        if e.func == "i32":
            return f"((int){args})"
        if e.func in ("min", "max", "abs"):
            f32 = e.args[0].type == "f32"
            return f"{('f' if f32 else '') + e.func}{'f' if f32 else ''}({args})"
        return f"{_C_CALL[e.func]}({args})"
    raise TypeError(e)


def emit(kernel: str, program: Program, body: Body, names: dict[VReg, str], arch: str) -> str:
    """The complete PTX module, from nvcc: the program as a CUDA C kernel."""
    import subprocess
    import tempfile

    ctype = {"f32": "float", "i32": "int"}
    params = [f"{ctype[program.result.type]} *out"]
    params += [f"const {ctype[i.type]} *{param_name(i.name)}" for i in program.inputs]
    lines = [_PRELUDE, f'extern "C" __global__ void {kernel}({", ".join(params)}, unsigned n) {{']
    lines.append("  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;")
    lines.append("  if (i >= n) return;")
    for inp in program.inputs:
        lines.append(f"  {ctype[inp.type]} {inp.name} = {param_name(inp.name)}[i];")
    for let in program.lets:
        lines.append(f"  {ctype[let.value.type]} {let.name} = {_c(let.value)};")
    lines.append(f"  out[i] = {_c(program.result)};")
    lines.append("}")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "expr.cu"
        src.write_text("\n".join(lines) + "\n")
        subprocess.run(
            ["nvcc", "-ptx", f"-arch={arch}", "-fmad=false", "-o", str(src.with_suffix(".ptx")), str(src)],
            check=True, capture_output=True,
        )  # fmt: skip
        return src.with_suffix(".ptx").read_text()
