"""Task `sass`: parse `cuobjdump --dump-sass` and count instructions by class.

    Fatbin elf code:                 <- one section per cubin in a fatbin (an object or binary)
    ================
    arch = sm_75
    ...
        code for sm_75
            Function : _Z9block_sumPKfPfi
        .headerflags    @"EF_CUDA_SM75 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM75)"
            /*0000*/                   MOV R1, c[0x0][0x28] ;         /* 0x00000a0000017a02 */
                                                                      /* 0x000fc40000000f00 */
            /*0080*/               @P0 EXIT ;                         /* 0x000000000000094d */

An instruction line is `/*address*/ [@predicate] OPCODE[.MODIFIERS] operands ;` followed by its
encoding in comments; the encoding's second half sits alone on the next line.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = [
    "CLASSES",
    "Function",
    "Instruction",
    "classify",
    "count_classes",
    "parse_sass",
    "trim_padding",
]


# Opcode families (base opcodes) of Volta..Hopper SASS, from NVIDIA's "CUDA Binary Utilities"
# instruction-set tables; an opcode in none of them is "other".
CLASSES: dict[str, frozenset[str]] = {
    "global_memory": frozenset(
        [
            "ATOM",
            "ATOMG",
            "CCTL",
            "CCTLL",
            "LD",
            "LDG",
            "LDGDEPBAR",
            "LDGSTS",
            "RED",
            "ST",
            "STG",
            "UBLKCP",
            "UTMALDG",
            "UTMASTG",
        ]
    ),
    "shared_memory": frozenset(["ATOMS", "LDS", "LDSM", "STS", "STSM"]),
    "local_memory": frozenset(["LDL", "STL"]),
    "constant_memory": frozenset(["LDC", "ULDC"]),
    "texture": frozenset(
        ["SUATOM", "SULD", "SURED", "SUST", "TEX", "TLD", "TLD4", "TMML", "TXD", "TXQ"]
    ),
    "float": frozenset(
        [
            "DADD",
            "DFMA",
            "DMNMX",
            "DMUL",
            "DSETP",
            "FADD",
            "FADD32I",
            "FCHK",
            "FFMA",
            "FFMA32I",
            "FMNMX",
            "FMUL",
            "FMUL32I",
            "FRND",
            "FSEL",
            "FSET",
            "FSETP",
            "FSWZADD",
            "HADD2",
            "HFMA2",
            "HMNMX2",
            "HMUL2",
            "HSET2",
            "HSETP2",
            "MUFU",
        ]
    ),
    "integer": frozenset(
        [
            "BMSK",
            "BREV",
            "FLO",
            "IABS",
            "IADD",
            "IADD3",
            "IADD32I",
            "IDP",
            "IDP4A",
            "IMAD",
            "IMNMX",
            "IMUL",
            "ISCADD",
            "ISETP",
            "LEA",
            "LOP",
            "LOP3",
            "LOP32I",
            "POPC",
            "SHF",
            "SHL",
            "SHR",
            "UBREV",
            "UFLO",
            "UIADD3",
            "UIMAD",
            "UISETP",
            "ULEA",
            "ULOP3",
            "UPOPC",
            "USEL",
            "USHF",
            "VABSDIFF",
            "VABSDIFF4",
        ]
    ),
    "conversion": frozenset(["F2F", "F2FP", "F2I", "F2IP", "I2F", "I2FP", "I2I"]),
    "move": frozenset(
        [
            "CS2R",
            "MATCH",
            "MOV",
            "MOV32I",
            "P2R",
            "PLOP3",
            "PRMT",
            "PSETP",
            "R2P",
            "R2UR",
            "REDUX",
            "S2R",
            "S2UR",
            "SEL",
            "SHFL",
            "UMOV",
            "UPRMT",
            "VOTE",
            "VOTEU",
        ]
    ),
    "tensor": frozenset(["BGMMA", "BMMA", "DMMA", "HGMMA", "HMMA", "IGMMA", "IMMA", "QGMMA"]),
    "sync": frozenset(
        [
            "ARRIVES",
            "BAR",
            "BSSY",
            "BSYNC",
            "DEPBAR",
            "ERRBAR",
            "FENCE",
            "MEMBAR",
            "SYNCS",
            "WARPGROUP",
            "WARPSYNC",
        ]
    ),
    "control": frozenset(
        [
            "ACQBULK",
            "BPT",
            "BRA",
            "BREAK",
            "BRX",
            "BRXU",
            "CALL",
            "EXIT",
            "JMP",
            "JMX",
            "JMXU",
            "KILL",
            "NANOSLEEP",
            "NOP",
            "RET",
            "YIELD",
        ]
    ),
}


@dataclass(frozen=True)
class Instruction:
    address: int  # byte offset in the function: /*0080*/ -> 0x80
    opcode: str  # with modifiers: "LDG.E.SYS"
    operands: str  # "R4, [R2+-0x10]" (stripped; "" when there are none)
    predicate: str = ""  # "@P0", "@!PT", or ""

    @property
    def base(self) -> str:
        """The opcode without modifiers: "LDG"."""
        return self.opcode.split(".", 1)[0]


@dataclass
class Function:
    arch: str  # "sm_75", from the `code for sm_75` line above it
    name: str  # as cuobjdump prints it (mangled)
    instructions: list[Instruction] = field(default_factory=list)


_CODE_FOR = re.compile(r"^\s*code for (sm_\w+)")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSN = re.compile(
    r"^\s*/\*([0-9a-fA-F]+)\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\s*([^;]*);"
)


def parse_sass(text: str) -> list[Function]:
    """Every function of a dump, in order; one per (arch, name): a fatbin with sm_75 and sm_90
    cubins lists each kernel twice."""
    functions: list[Function] = []
    arch = ""
    for line in text.splitlines():
        if m := _CODE_FOR.match(line):
            arch = m.group(1)
        elif m := _FUNCTION.match(line):
            functions.append(Function(arch, m.group(1)))
        elif (m := _INSN.match(line)) and functions:
            address, predicate, opcode, operands = m.groups()
            functions[-1].instructions.append(
                Instruction(int(address, 16), opcode, operands.strip(), (predicate or "").strip())
            )
    return functions


def trim_padding(instructions: list[Instruction]) -> list[Instruction]:
    """Drop the assembler's padding at the end of a function: trailing NOPs, and the `BRA` to
    itself that stops a warp running past the last EXIT."""
    end = len(instructions)
    while end and instructions[end - 1].base == "NOP":
        end -= 1
    if (
        end
        and instructions[end - 1].base == "BRA"
        and _target(instructions[end - 1]) == (instructions[end - 1].address)
    ):
        end -= 1
    return instructions[:end]


def _target(insn: Instruction) -> int | None:
    m = re.search(r"0x([0-9a-fA-F]+)\s*$", insn.operands)
    return int(m.group(1), 16) if m else None


def classify(opcode: str) -> str:
    """The class of an opcode: what the harness's SASS classifier says."""
    from harness.cuda import static

    return static.classify_sass(opcode)


def count_classes(function: Function) -> Counter[str]:
    """Instructions per class, padding excluded."""
    return Counter(classify(i.opcode) for i in trim_padding(function.instructions))
