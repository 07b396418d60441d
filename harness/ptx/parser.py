"""Parse a PTX module into kernels, register declarations and decoded instructions.

Only the syntax the interpreter runs is understood: module directives (``.version``,
``.target``, ``.address_size``), ``.global``/``.const`` variables, ``.entry`` kernels with scalar
``.param`` lists, ``.reg`` declarations (``%r<30>``), labels, ``{ }`` scopes, predicated
instructions and ``.loc``/``.file``/``.pragma`` (ignored). Anything else raises
:class:`PtxSyntaxError` or :class:`PtxUnsupportedError` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .ptxtypes import TYPE_BITS, PtxError, PtxSyntaxError, PtxUnsupportedError, parse_int
from .values import imm_bits

__all__ = [
    "Address",
    "Imm",
    "Instruction",
    "Kernel",
    "Module",
    "Neg",
    "Param",
    "PredPair",
    "PtxError",
    "PtxSyntaxError",
    "PtxUnsupportedError",
    "Reg",
    "Symbol",
    "TYPE_BITS",
    "Variable",
    "Vector",
    "parse_module",
]


# --------------------------------------------------------------------------- operands
@dataclass(frozen=True)
class Reg:
    name: str  # "%r1", or a special register "%tid.x"


@dataclass(frozen=True)
class Imm:
    text: str  # "42", "-1", "0x10", "0f3F800000", "0d3FF0000000000000", "1.5"


@dataclass(frozen=True)
class Symbol:
    name: str  # a label, a parameter or a module variable


@dataclass(frozen=True)
class Address:
    base: Reg | Symbol | None
    offset: int = 0


@dataclass(frozen=True)
class Vector:
    items: tuple[Reg | Imm, ...]


@dataclass(frozen=True)
class PredPair:
    """``%p|%q``: setp writes the result to p and its complement to q."""

    p: Reg
    q: Reg


@dataclass(frozen=True)
class Neg:
    """``!%p`` as a source operand."""

    reg: Reg


Operand = Reg | Imm | Symbol | Address | Vector | PredPair | Neg


@dataclass(frozen=True)
class Instruction:
    opcode: str  # "ld.global.f32"
    operands: tuple[Operand, ...]
    line: int
    text: str  # the statement as written, for messages
    guard: str | None = None  # predicate register of "@%p" / "@!%p"
    guard_negated: bool = False

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # "u64", "f32", ...
    offset: int  # byte offset in the parameter buffer

    @property
    def size(self) -> int:
        return TYPE_BITS[self.type] // 8


@dataclass
class Kernel:
    name: str
    params: list[Param]
    registers: dict[str, str]  # "%r1" -> "b32"
    instructions: list[Instruction]
    labels: dict[str, int]  # label -> index of the instruction it precedes
    line: int

    @property
    def param_bytes(self) -> int:
        return max((p.offset + p.size for p in self.params), default=0)


@dataclass
class Variable:
    """A module-scope ``.global`` or ``.const`` array."""

    name: str
    space: str
    type: str
    count: int
    init: bytes
    align: int


@dataclass
class Module:
    version: str
    target: str
    address_size: int
    kernels: dict[str, Kernel] = field(default_factory=dict)
    variables: dict[str, Variable] = field(default_factory=dict)
    functions: list[str] = field(default_factory=list)  # .func names (not executable)


# --------------------------------------------------------------------------- scanning helpers
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_IDENT = r"[A-Za-z_$%][\w$]*"
_LABEL = re.compile(rf"({_IDENT})\s*:(?!:)")
_REG_DECL = re.compile(r"^\.reg\s+\.(\w+)\s+(.+)$", re.S)
_RANGE = re.compile(rf"^({_IDENT})<(\d+)>$")
_SPECIAL = re.compile(
    r"^%(tid|ntid|ctaid|nctaid)\.[xyz]$|^%(laneid|warpid|nwarpid|smid|clock|clock64|warpsize)$"
)
_INT = re.compile(r"^-?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9]\d*)U?$")
_FLOAT = re.compile(r"^-?(0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}|\d+\.\d*(e[+-]?\d+)?)$")


def _blank_comments(text: str) -> str:
    """Comments become spaces, keeping newlines so offsets still give line numbers."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


class _Source:
    def __init__(self, text: str) -> None:
        self.text = _blank_comments(text)
        self._nl = [i for i, c in enumerate(self.text) if c == "\n"]

    def line_of(self, pos: int) -> int:
        import bisect

        return bisect.bisect_right(self._nl, pos - 1) + 1

    def matching(self, pos: int, open_: str, close: str) -> int:
        """Index of the bracket closing the one at `pos`."""
        depth = 0
        for j in range(pos, len(self.text)):
            c = self.text[j]
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return j
        raise PtxSyntaxError(self.line_of(pos), f"unbalanced {open_!r}: no matching {close!r}")


def is_number(text: str) -> bool:
    return bool(_INT.match(text) or _FLOAT.match(text))


# --------------------------------------------------------------------------- operands
def _split_operands(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _operand(text: str, line: int) -> Operand:
    t = text.strip()
    if not t:
        raise PtxSyntaxError(line, "empty operand")
    if t.startswith("["):
        if not t.endswith("]"):
            raise PtxSyntaxError(line, f"bad address operand {t!r}")
        return _address(t[1:-1].strip(), line)
    if t.startswith("{"):
        if not t.endswith("}"):
            raise PtxSyntaxError(line, f"bad vector operand {t!r}")
        items = []
        for part in _split_operands(t[1:-1]):
            op = _operand(part, line)
            if not isinstance(op, (Reg, Imm)):
                raise PtxSyntaxError(line, f"vector elements must be registers: {t!r}")
            items.append(op)
        return Vector(tuple(items))
    if "|" in t:
        p, q = (s.strip() for s in t.split("|", 1))
        return PredPair(Reg(p), Reg(q))
    if t.startswith("!"):
        inner = _operand(t[1:], line)
        if not isinstance(inner, Reg):
            raise PtxSyntaxError(line, f"'!' applies to a predicate register, not {t!r}")
        return Neg(inner)
    if t.startswith("%"):
        if not re.fullmatch(r"%[\w$]+(\.[xyz])?", t):
            raise PtxSyntaxError(line, f"bad register name {t!r}")
        return Reg(t)
    if is_number(t):
        return Imm(t)
    if re.fullmatch(r"[A-Za-z_$][\w$]*", t):
        return Symbol(t)
    raise PtxSyntaxError(line, f"cannot parse operand {t!r}")


def _address(inner: str, line: int) -> Address:
    m = re.fullmatch(r"([%\w$.]+)?\s*(?:([+-])\s*(-?\w+))?", inner)
    if not m or (m.group(1) is None and m.group(3) is None):
        raise PtxSyntaxError(line, f"bad address [{inner}]")
    base_text, sign, off_text = m.groups()
    if base_text is not None and is_number(base_text) and sign is None:
        return Address(None, parse_int(base_text))
    offset = 0
    if off_text is not None:
        if not _INT.match(off_text):
            raise PtxSyntaxError(line, f"bad address offset in [{inner}]")
        offset = parse_int(off_text) * (-1 if sign == "-" else 1)
    base: Reg | Symbol | None = None
    if base_text is not None:
        base = Reg(base_text) if base_text.startswith("%") else Symbol(base_text)
    return Address(base, offset)


# --------------------------------------------------------------------------- module
def parse_module(text: str) -> Module:
    """Parse PTX text. Raises PtxSyntaxError (with a line number) on what it cannot read."""
    src = _Source(text)
    s = src.text
    pos = 0
    header: dict[str, str] = {}
    module: Module | None = None
    pending: list[str] = []  # qualifiers before a declaration: .visible .extern .weak
    while True:
        m = re.compile(r"\s*").match(s, pos)
        pos = m.end()
        if pos >= len(s):
            break
        tok_m = re.compile(r"[^\s(;{]+").match(s, pos)
        if tok_m is None:
            raise PtxSyntaxError(src.line_of(pos), f"unexpected {s[pos]!r} at module scope")
        tok = tok_m.group(0)
        line = src.line_of(pos)
        if tok in (".version", ".target", ".address_size", ".file"):
            end = s.find("\n", pos)
            end = len(s) if end < 0 else end
            header[tok] = s[tok_m.end() : end].strip()
            pos = end
            continue
        if module is None:
            missing = [d for d in (".version", ".target") if d not in header]
            if missing:
                raise PtxSyntaxError(line, f"a PTX module starts with {' and '.join(missing)}")
            size = header.get(".address_size", "32")
            if size != "64":
                raise PtxUnsupportedError(f".address_size {size}: only 64-bit PTX is supported")
            module = Module(header[".version"], header[".target"].split(",")[0].strip(), 64)
        if tok in (".visible", ".extern", ".weak"):
            pending.append(tok)
            pos = tok_m.end()
            continue
        if tok == ".entry":
            pos = _parse_entry(src, tok_m.end(), module)
        elif tok == ".func":
            pos = _skip_func(src, tok_m.end(), module, ".extern" in pending)
        elif tok in (".global", ".const"):
            end = s.find(";", pos)
            if end < 0:
                raise PtxSyntaxError(line, f"{tok} declaration without ';'")
            var = _parse_variable(s[pos:end], line)
            module.variables[var.name] = var
            pos = end + 1
        elif tok in (".section",):
            brace = s.find("{", pos)
            pos = src.matching(brace, "{", "}") + 1
        elif tok == ".pragma":
            pos = s.find(";", pos) + 1
        else:
            raise PtxSyntaxError(line, f"unexpected {tok!r} at module scope")
        pending = []
    if module is None:
        raise PtxSyntaxError(1, "empty module: a PTX module starts with .version and .target")
    return module


def _skip_func(src: _Source, pos: int, module: Module, extern: bool) -> int:
    s = src.text
    m = re.compile(r"\s*(\([^)]*\)\s*)?([\w$]+)").match(s, pos)
    if m is None:
        raise PtxSyntaxError(src.line_of(pos), ".func without a name")
    module.functions.append(m.group(2))
    semi, brace = s.find(";", m.end()), s.find("{", m.end())
    if extern or (semi >= 0 and (brace < 0 or semi < brace)):
        return semi + 1
    return src.matching(brace, "{", "}") + 1


def _parse_variable(text: str, line: int) -> Variable:
    decl, _, init_text = text.partition("=")
    words = decl.split()
    space = words[0][1:]
    align, vtype, name, count = 0, None, None, 1
    i = 1
    while i < len(words):
        w = words[i]
        if w == ".align":
            align = int(words[i + 1])
            i += 2
            continue
        if w.startswith(".") and w[1:] in TYPE_BITS:
            vtype = w[1:]
        elif not w.startswith("."):
            nm = re.fullmatch(r"([\w$]+)(?:\[(\d*)\])?", w)
            if nm is None:
                raise PtxSyntaxError(line, f"bad variable declaration {text.strip()!r}")
            name = nm.group(1)
            count = int(nm.group(2)) if nm.group(2) else 1
        i += 1
    if vtype is None or name is None:
        raise PtxSyntaxError(line, f"bad variable declaration {text.strip()!r}")
    size = TYPE_BITS[vtype] // 8
    data = b""
    if init_text.strip():
        import numpy as np

        items = [x.strip() for x in init_text.strip().strip("{}").split(",") if x.strip()]
        raw = [imm_bits(x, vtype) for x in items]
        data = np.array(raw, dtype=f"u{size}").tobytes()
        if count == 1 and len(items) > 1:
            count = len(items)
    return Variable(name, space, vtype, count, data.ljust(size * count, b"\0"), align or size)


def _parse_entry(src: _Source, pos: int, module: Module) -> int:
    s = src.text
    m = re.compile(r"\s*([\w$]+)\s*").match(s, pos)
    if m is None:
        raise PtxSyntaxError(src.line_of(pos), ".entry without a kernel name")
    name, line = m.group(1), src.line_of(m.start(1))
    pos = m.end()
    params: list[Param] = []
    if pos < len(s) and s[pos] == "(":
        close = src.matching(pos, "(", ")")
        params = _parse_params(s[pos + 1 : close], src.line_of(pos))
        pos = close + 1
    brace = s.find("{", pos)
    if brace < 0:
        raise PtxSyntaxError(line, f"kernel {name} has no body")
    between = s[pos:brace].strip()
    if between and not re.fullmatch(r"((\.maxntid|\.reqntid|\.minnctapersm|\.maxnreg|\.maxclusterrank|\.reqnctapercluster|\.explicitcluster|\.noreturn)\b[\s\d,]*)*", between):  # fmt: skip
        raise PtxSyntaxError(src.line_of(pos), f"unexpected {between!r} before the kernel body")
    end = src.matching(brace, "{", "}")
    module.kernels[name] = _parse_body(src, brace + 1, end, name, params, line)
    return end + 1


def _parse_params(text: str, line: int) -> list[Param]:
    params: list[Param] = []
    offset = 0
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        words = part.split()
        if words[0] != ".param":
            raise PtxSyntaxError(line, f"kernel parameters are .param declarations, not {part!r}")
        types = [w[1:] for w in words[1:] if w.startswith(".") and w[1:] in TYPE_BITS]
        names = [w for w in words[1:] if not w.startswith(".") and not w.isdigit()]
        if "[" in part or not types or not names:
            raise PtxUnsupportedError(f"line {line}: only scalar kernel parameters: {part!r}")
        ptype = types[0]
        size = TYPE_BITS[ptype] // 8
        offset = (offset + size - 1) // size * size
        params.append(Param(names[-1], ptype, offset))
        offset += size
    return params


def _parse_body(
    src: _Source, start: int, end: int, name: str, params: list[Param], kline: int
) -> Kernel:
    s = src.text
    registers: dict[str, str] = {}
    instructions: list[Instruction] = []
    labels: dict[str, int] = {}
    # Directives that end at the line's end rather than at ';'.
    body = re.sub(r"^[ \t]*\.(loc|file)\b[^\n]*", lambda m: " " * len(m.group(0)), s[start:end], flags=re.M)  # fmt: skip
    pos = 0
    while pos < len(body):
        semi = body.find(";", pos)
        chunk_end = len(body) if semi < 0 else semi
        chunk = body[pos:chunk_end]
        cpos = 0
        while True:
            while cpos < len(chunk) and chunk[cpos] in " \t\r\n{}":
                cpos += 1  # scope braces
            lm = _LABEL.match(chunk, cpos)
            if lm is None:
                break
            label = lm.group(1)
            if label in labels:
                raise PtxSyntaxError(src.line_of(start + pos + lm.start(1)), f"duplicate label {label}")  # fmt: skip
            labels[label] = len(instructions)
            cpos = lm.end()
        stmt = chunk[cpos:].strip()
        line = src.line_of(start + pos + cpos)
        if stmt:
            if semi < 0:
                raise PtxSyntaxError(line, f"missing ';' after {stmt.splitlines()[0]!r}")
            _statement(stmt, line, registers, instructions)
        if semi < 0:
            break
        pos = semi + 1
    return Kernel(name, params, registers, instructions, labels, kline)


def _statement(
    stmt: str, line: int, registers: dict[str, str], instructions: list[Instruction]
) -> None:
    lines = [x.strip() for x in stmt.splitlines() if x.strip()]
    for here, after in zip(lines, lines[1:], strict=False):
        if not here.endswith((",", "(", "{", "[", "|")) and re.match(r"[@a-z$]", after):
            raise PtxSyntaxError(line, f"missing ';' after {here!r}")
    stmt = " ".join(stmt.split())
    if stmt.startswith(".reg"):
        m = _REG_DECL.match(stmt)
        if m is None or m.group(1) not in TYPE_BITS:
            raise PtxSyntaxError(line, f"bad register declaration {stmt!r}")
        rtype = m.group(1)
        for item in (x.strip() for x in m.group(2).split(",")):
            rm = _RANGE.match(item)
            names = [f"{rm.group(1)}{i}" for i in range(int(rm.group(2)))] if rm else [item]
            for n in names:
                if not re.fullmatch(r"%[\w$]+", n):
                    raise PtxSyntaxError(line, f"bad register name {n!r}")
                if n in registers and registers[n] != rtype:
                    raise PtxSyntaxError(line, f"{n} declared twice with different types")
                registers[n] = rtype
        return
    if stmt.startswith((".pragma", ".maxntid", ".reqntid")):
        return
    if stmt.startswith((".local", ".shared")):
        raise PtxUnsupportedError(
            f"line {line}: {stmt.split()[0]} memory is not supported by the interpreter"
        )
    if stmt.startswith("."):
        raise PtxSyntaxError(line, f"unexpected directive {stmt.split()[0]!r} in a kernel body")
    guard, negated = None, False
    if stmt.startswith("@"):
        gm = re.match(r"@(!?)(%[\w$]+)\s+", stmt)
        if gm is None:
            raise PtxSyntaxError(line, f"bad guard predicate in {stmt!r}")
        negated, guard = gm.group(1) == "!", gm.group(2)
        stmt = stmt[gm.end() :]
    op_m = re.match(r"([a-z][\w.]*)\s*(.*)$", stmt)
    if op_m is None:
        raise PtxSyntaxError(line, f"cannot parse {stmt!r}")
    opcode, rest = op_m.groups()
    operands = tuple(_operand(p, line) for p in _split_operands(rest)) if rest else ()
    instructions.append(Instruction(opcode, operands, line, stmt, guard, negated))


def is_special(name: str) -> bool:
    return bool(_SPECIAL.match(name))
