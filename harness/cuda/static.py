"""Static analysis of CUDA kernels, no GPU needed.

nvcc/ptxas compile to PTX and cubins on any machine: `ptxas -v` reports each kernel's registers,
shared memory, spills and barriers; `cuobjdump --dump-sass` shows the machine code. With those
numbers and the per-architecture limits below, `occupancy()` does what NVIDIA's occupancy
calculator (and `cudaOccupancyMaxActiveBlocksPerMultiprocessor`) does.

Compilations go through the same content-addressed cache as harness.native, so a kata's static
checks cost one nvcc run per distinct source, not one per test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.native.build import BuildError, default_cache
from harness.native.cache import ArtefactCache, hash_parts
from harness.native.diagnostics import trim_compiler_output
from harness.toolchain import find_tool, require_tool, tool_version_text

__all__ = [
    "ARCH_LIMITS",
    "ArchLimits",
    "CudaCompileError",
    "KernelMap",
    "Occupancy",
    "Resources",
    "SassInstruction",
    "arch_limits",
    "compile_cubin",
    "compile_ptx",
    "demangle",
    "occupancy",
    "parse_ptx",
    "parse_ptxas_verbose",
    "parse_sass",
    "ptx_instruction_counts",
    "ptxas_resources",
    "sass",
    "sass_instruction_counts",
]

FORMAT_VERSION = "cuda-static-1"
_TIMEOUT_S = 300


class CudaCompileError(BuildError):
    """nvcc/ptxas rejected the code; `str(err)` is the trimmed diagnostics."""


# --------------------------------------------------------------------------- kernel names
_DEMANGLED: dict[str, str] = {}


def _demangle_one(name: str) -> str:
    return demangle([name])[name]


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled -> readable names via cu++filt or c++filt (one process for all new names,
    remembered); identity when neither is installed or a name is not mangled (`extern "C"`)."""
    names = list(dict.fromkeys(names))
    todo = [n for n in names if n.startswith("_Z") and n not in _DEMANGLED]
    tool = find_tool("cu++filt") or find_tool("c++filt")
    if todo and tool is not None:
        proc = subprocess.run(
            [str(tool)], input="\n".join(todo) + "\n", capture_output=True, text=True
        )
        lines = proc.stdout.splitlines()
        if proc.returncode == 0 and len(lines) == len(todo):
            _DEMANGLED.update(zip(todo, lines, strict=True))
    return {n: _DEMANGLED.get(n, n) for n in names}


def _base_name(readable: str) -> str:
    """`void tk<3>(float*)` -> `tk`; `ns::scale(float*, int)` -> `ns::scale` and `scale`."""
    head = readable.split("(", 1)[0].strip()
    head = re.sub(r"<.*>$", "", head)  # template arguments
    return head.split()[-1] if head else readable


class KernelMap(dict):
    """kernel name -> value, keyed by the mangled name (as ptxas and cuobjdump print it).

    Lookups also accept the demangled signature ("scale(float*, int)") or the bare function name
    ("scale", "tk") when that is unambiguous, so katas need not spell `_Z5scalePfi`.
    """

    def _aliases(self) -> dict[str, list[str]]:
        readable = demangle(self.keys())
        aliases: dict[str, list[str]] = {}
        for key, full in readable.items():
            base = _base_name(full)
            for alias in {full, base, base.split("::")[-1]}:
                aliases.setdefault(alias, []).append(key)
        return aliases

    def __missing__(self, name: str) -> Any:
        keys = self._aliases().get(name, [])
        if len(keys) == 1:
            return self[keys[0]]
        if len(keys) > 1:
            raise KeyError(f"{name!r} is ambiguous: {', '.join(sorted(keys))}")
        raise KeyError(f"no kernel {name!r}; kernels: {', '.join(self.readable_names()) or '-'}")

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or (
            isinstance(name, str) and len(self._aliases().get(name, [])) == 1
        )

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def readable_names(self) -> list[str]:
        return [demangle(self.keys())[k] for k in self]


# --------------------------------------------------------------------------- compiling
def _source(source: str | os.PathLike[str]) -> tuple[str, str]:
    """(text, file name) of a source given as a path or as CUDA/PTX text."""
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and "\n" not in source and source.endswith((".cu", ".ptx"))
    ):
        path = Path(source)
        return path.read_text(encoding="utf-8"), path.name
    return str(source), "kernel.cu"


def _is_ptx(text: str) -> bool:
    return bool(re.search(r"^\s*\.version\s+\d", text, re.M)) and ".target" in text


def _check_arch(arch: str) -> str:
    if not re.fullmatch(r"(sm|compute)_\d+[af]?", arch):
        raise ValueError(f"arch must look like 'sm_80', not {arch!r}")
    return arch


def _compile(
    text: str,
    filename: str,
    *,
    tool: str,
    args: Sequence[str],
    out_name: str,
    cache: ArtefactCache | None,
) -> Path:
    """Run `tool args... filename -o out` in a cache entry; returns the entry directory."""
    exe = require_tool(tool)
    store = cache if cache is not None else default_cache()
    key = hash_parts(
        [FORMAT_VERSION, tool, str(exe), tool_version_text(tool), *args, filename, text]
    )

    def produce(tmp: Path) -> None:
        (tmp / filename).write_text(text, encoding="utf-8")
        cmd = [str(exe), *args, filename, "-o", out_name]
        proc = subprocess.run(
            cmd,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            env={**os.environ, "LC_ALL": "C"},
            check=False,
        )
        (tmp / "compile.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
        meta = {"ok": proc.returncode == 0, "returncode": proc.returncode, "command": cmd[1:]}
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    entry = store.get_or_create(key, produce, label=f"{tool} {filename} {' '.join(args)}")
    meta = json.loads((entry.path / "meta.json").read_text(encoding="utf-8"))
    if not meta["ok"]:
        log = (entry.path / "compile.log").read_text(encoding="utf-8")
        message = trim_compiler_output(log) or f"{tool} exited with {meta['returncode']}"
        raise CudaCompileError(message, log=log, command=[tool, *meta["command"]])
    return entry.path


def compile_ptx(
    source: str | os.PathLike[str],
    arch: str = "sm_75",
    options: Sequence[str] = (),
    *,
    cache: ArtefactCache | None = None,
) -> str:
    """PTX text of a CUDA source (path or text): `nvcc -ptx -arch=<arch>`."""
    text, name = _source(source)
    arch = _check_arch(arch)
    entry = _compile(
        text, name, tool="nvcc", args=["-ptx", f"-arch={arch}", *options], out_name="out.ptx",
        cache=cache,
    )  # fmt: skip
    return (entry / "out.ptx").read_text(encoding="utf-8")


def compile_cubin(
    source: str | os.PathLike[str],
    arch: str = "sm_75",
    options: Sequence[str] = (),
    *,
    cache: ArtefactCache | None = None,
) -> Path:
    """Path of a cached cubin for a CUDA source, or for PTX text (assembled with ptxas).

    Built with `-Xptxas -v`; the resource report is kept beside it for ptxas_resources.
    """
    return _cubin_entry(source, arch, options, cache) / "out.cubin"


def _cubin_entry(
    source: str | os.PathLike[str],
    arch: str,
    options: Sequence[str],
    cache: ArtefactCache | None,
) -> Path:
    text, name = _source(source)
    arch = _check_arch(arch).replace("compute_", "sm_")
    if _is_ptx(text):
        if not name.endswith(".ptx"):
            name = "kernel.ptx"
        args = [f"-arch={arch}", "-v", *options]
        return _compile(text, name, tool="ptxas", args=args, out_name="out.cubin", cache=cache)
    args = ["-cubin", f"-arch={arch}", "-Xptxas", "-v", *options]
    return _compile(text, name, tool="nvcc", args=args, out_name="out.cubin", cache=cache)


# --------------------------------------------------------------------------- ptxas -v
@dataclass(frozen=True)
class Resources:
    """One kernel's resources as `ptxas -v` reports them (bytes unless named otherwise)."""

    name: str  # mangled, as ptxas prints it
    arch: str = ""
    registers: int = 0
    shared_bytes: int = 0  # static __shared__ (dynamic shared memory is a launch parameter)
    const_bytes: int = 0  # cmem[0]: kernel parameters and compiler constants
    local_bytes: int = 0  # lmem, when ptxas reports it separately
    stack_bytes: int = 0  # stack frame per thread
    spill_stores: int = 0  # bytes spilled to local memory
    spill_loads: int = 0
    barriers: int = 0
    cumulative_stack_bytes: int = 0
    extra: Mapping[str, int] = field(default_factory=dict)  # other "N bytes X" fields

    @property
    def demangled(self) -> str:
        return _demangle_one(self.name)

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


_PTXAS_FUNC = re.compile(r"(?:Compiling entry function|Function properties for) '?([^'\s]+)'?")
_PTXAS_FOR = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PTXAS_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_BYTES = re.compile(r"(\d+) bytes (cumulative stack size|[a-z]+(?:\[\d+\])?)")


def parse_ptxas_verbose(text: str) -> KernelMap:
    """Parse `ptxas -v` / `nvcc -Xptxas -v` output into KernelMap[name -> Resources].

    Only entry functions (kernels) are returned; device functions' property lines are skipped.
    """
    found: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        m = _PTXAS_FOR.search(line)
        if m:
            current = m.group(1)
            found.setdefault(current, {"name": current, "arch": m.group(2)})
            continue
        m = _PTXAS_PROPS.search(line)
        if m:
            current = m.group(1) if m.group(1) in found else None
            continue
        if current is None:
            continue
        rec = found[current]
        m = _STACK.search(line)
        if m:
            rec["stack_bytes"], rec["spill_stores"], rec["spill_loads"] = map(int, m.groups())
            continue
        m = _USED.search(line)
        if m:
            rec["registers"] = int(m.group(1))
            b = _BARRIERS.search(line)
            rec["barriers"] = int(b.group(1)) if b else 0
            extra: dict[str, int] = {}
            for amount, what in _BYTES.findall(line):
                n = int(amount)
                if what == "smem":
                    rec["shared_bytes"] = n
                elif what == "cmem[0]":
                    rec["const_bytes"] = n
                elif what == "lmem":
                    rec["local_bytes"] = n
                elif what == "cumulative stack size":
                    rec["cumulative_stack_bytes"] = n
                else:
                    extra[what] = n
            rec["extra"] = extra
            current = None  # the "Used" line closes a kernel's report
    return KernelMap({name: Resources(**rec) for name, rec in found.items()})


def ptxas_resources(
    source_or_ptx: str | os.PathLike[str],
    arch: str = "sm_75",
    options: Sequence[str] = (),
    *,
    cache: ArtefactCache | None = None,
) -> KernelMap:
    """Per-kernel Resources of a CUDA source or PTX (path or text), for `arch`."""
    entry = _cubin_entry(source_or_ptx, arch, options, cache)
    return parse_ptxas_verbose((entry / "compile.log").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- SASS
@dataclass(frozen=True)
class SassInstruction:
    address: int
    opcode: str  # "LDG.E.SYS"
    operands: str  # "R0, [R2.64]"
    predicate: str = ""  # "@P0", "@!PT"

    @property
    def base(self) -> str:
        """The opcode without modifiers: "LDG"."""
        return self.opcode.split(".", 1)[0]

    @property
    def kind(self) -> str:
        return classify_sass(self.opcode)


# Opcode families of Volta-Hopper SASS (see NVIDIA's "CUDA Binary Utilities" instruction-set
# tables); anything unlisted is "other".
_SASS_CLASSES: dict[str, frozenset[str]] = {
    "global_memory": frozenset(
        {
            "LDG",
            "STG",
            "LD",
            "ST",
            "ATOM",
            "ATOMG",
            "RED",
            "LDGSTS",
            "LDGDEPBAR",
            "UBLKCP",
            "UTMALDG",
            "UTMASTG",
            "CCTL",
            "CCTLL",
        }
    ),
    "shared_memory": frozenset({"LDS", "STS", "ATOMS", "LDSM", "STSM"}),
    "local_memory": frozenset({"LDL", "STL"}),
    "constant_memory": frozenset({"LDC", "ULDC"}),
    "texture": frozenset(
        {"TEX", "TLD", "TLD4", "TXQ", "TMML", "TXD", "SULD", "SUST", "SUATOM", "SURED"}
    ),
    "float": frozenset(
        {
            "FADD",
            "FMUL",
            "FFMA",
            "FMNMX",
            "FSET",
            "FSETP",
            "FSEL",
            "FCHK",
            "MUFU",
            "FRND",
            "FSWZADD",
            "HADD2",
            "HMUL2",
            "HFMA2",
            "HMNMX2",
            "HSET2",
            "HSETP2",
            "DADD",
            "DMUL",
            "DFMA",
            "DSETP",
            "DMNMX",
            "FADD32I",
            "FMUL32I",
            "FFMA32I",
        }
    ),
    "integer": frozenset(
        {
            "IADD3",
            "IADD",
            "IADD32I",
            "IMAD",
            "IMUL",
            "IMNMX",
            "IABS",
            "ISETP",
            "ISCADD",
            "LEA",
            "LOP3",
            "LOP",
            "LOP32I",
            "SHF",
            "SHL",
            "SHR",
            "POPC",
            "FLO",
            "BREV",
            "BMSK",
            "IDP",
            "IDP4A",
            "VABSDIFF",
            "VABSDIFF4",
            "UIADD3",
            "UIMAD",
            "ULEA",
            "ULOP3",
            "USHF",
            "UISETP",
            "UFLO",
            "UPOPC",
            "UBREV",
            "USEL",
        }
    ),
    "conversion": frozenset({"F2F", "F2I", "I2F", "I2I", "I2FP", "F2IP", "F2FP"}),
    "move": frozenset(
        {
            "MOV",
            "MOV32I",
            "UMOV",
            "SEL",
            "PRMT",
            "UPRMT",
            "SHFL",
            "S2R",
            "S2UR",
            "CS2R",
            "R2P",
            "P2R",
            "R2UR",
            "PLOP3",
            "PSETP",
            "VOTE",
            "VOTEU",
            "MATCH",
            "REDUX",
        }
    ),
    "tensor": frozenset({"HMMA", "IMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA"}),
    "sync": frozenset(
        {
            "BAR",
            "MEMBAR",
            "WARPSYNC",
            "DEPBAR",
            "ERRBAR",
            "FENCE",
            "SYNCS",
            "ARRIVES",
            "BSSY",
            "BSYNC",
            "WARPGROUP",
        }
    ),
    "control": frozenset(
        {
            "BRA",
            "BRX",
            "JMP",
            "JMX",
            "CALL",
            "RET",
            "EXIT",
            "BREAK",
            "BPT",
            "KILL",
            "YIELD",
            "NOP",
            "NANOSLEEP",
            "JMXU",
            "BRXU",
            "ACQBULK",
        }
    ),
}
_SASS_CLASS_OF = {op: cls for cls, ops in _SASS_CLASSES.items() for op in ops}


def classify_sass(opcode: str) -> str:
    """Instruction class of a SASS opcode: global_memory, shared_memory, local_memory,
    constant_memory, texture, float, integer, conversion, move, tensor, sync, control, other."""
    return _SASS_CLASS_OF.get(opcode.split(".", 1)[0], "other")


_SASS_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
_SASS_INSN = re.compile(
    r"^\s*/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?P<pred>@!?U?P\w+\s+)?(?P<op>[A-Z][A-Z0-9_.]*)"
    r"(?P<args>[^;]*);"
)


def sass(cubin_or_source: str | os.PathLike[str] | bytes, arch: str = "sm_75") -> str:
    """`cuobjdump --dump-sass` of a cubin (path or bytes); a CUDA source is compiled first."""
    exe = require_tool("cuobjdump")
    if isinstance(cubin_or_source, bytes):
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
            fh.write(cubin_or_source)
            fh.flush()
            return _run_cuobjdump(exe, Path(fh.name))
    p = Path(os.fspath(cubin_or_source)) if not _looks_like_text(cubin_or_source) else None
    if p is not None and p.suffix in (".cubin", ".o", ".fatbin") and p.is_file():
        return _run_cuobjdump(exe, p)
    return _run_cuobjdump(exe, compile_cubin(cubin_or_source, arch))


def _looks_like_text(value: str | os.PathLike[str]) -> bool:
    return isinstance(value, str) and ("\n" in value or "__global__" in value)


def _run_cuobjdump(exe: Path, path: Path) -> str:
    proc = subprocess.run(
        [str(exe), "--dump-sass", str(path)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump failed on {path.name}: {proc.stderr.strip()}")
    return proc.stdout


def parse_sass(text: str) -> KernelMap:
    """cuobjdump SASS text -> KernelMap[kernel -> list[SassInstruction]]."""
    kernels = KernelMap()
    current: list[SassInstruction] | None = None
    for line in text.splitlines():
        m = _SASS_FUNC.match(line)
        if m:
            current = kernels.setdefault(m.group(1), [])
            continue
        m = _SASS_INSN.match(line)
        if m and current is not None:
            current.append(
                SassInstruction(
                    address=int(m.group("addr"), 16),
                    opcode=m.group("op"),
                    operands=m.group("args").strip(),
                    predicate=(m.group("pred") or "").strip(),
                )
            )
    return kernels


def sass_instruction_counts(
    cubin_or_source: str | os.PathLike[str] | bytes,
    arch: str = "sm_75",
    *,
    by: str = "class",
) -> KernelMap:
    """Per kernel, a Counter of SASS instructions by "class" (classify_sass), "base" opcode
    ("LDG") or full "opcode" ("LDG.E.SYS"). Padding NOPs after EXIT are not counted."""
    if by not in ("class", "base", "opcode"):
        raise ValueError("by must be 'class', 'base' or 'opcode'")
    text = cubin_or_source
    if not (isinstance(text, str) and "Function :" in text):
        text = sass(cubin_or_source, arch)
    out = KernelMap()
    for name, insns in parse_sass(text).items():
        out[name] = _count(_trim_padding(insns), by)
    return out


def _trim_padding(insns: list[SassInstruction]) -> list[SassInstruction]:
    # The assembler pads each function with `BRA self` + NOPs to an alignment boundary.
    end = len(insns)
    while end and insns[end - 1].base == "NOP":
        end -= 1
    if end >= 2 and insns[end - 1].base == "BRA" and insns[end - 2].base == "EXIT":
        end -= 1
    return insns[:end]


def _count(insns: Iterable[SassInstruction], by: str) -> Counter[str]:
    if by == "class":
        return Counter(i.kind for i in insns)
    if by == "base":
        return Counter(i.base for i in insns)
    return Counter(i.opcode for i in insns)


# --------------------------------------------------------------------------- PTX
_PTX_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\(")
_PTX_INSN = re.compile(r"^\s*(?:@!?%?\w+\s+)?([a-z][\w.]*)[\s;]")
_PTX_CLASS_OF = {
    **dict.fromkeys(("ld", "st", "ldu", "atom", "red", "cp", "prefetch", "prefetchu", "tex",
                     "tld4", "suld", "sust", "sured", "isspacep"), "memory"),
    **dict.fromkeys(("bar", "barrier", "membar", "fence", "mbarrier"), "sync"),
    **dict.fromkeys(("bra", "brx", "call", "ret", "exit", "trap"), "control"),
    **dict.fromkeys(("cvt", "cvta"), "convert"),
    **dict.fromkeys(("mov", "shfl", "selp", "prmt", "vote", "activemask", "match"), "move"),
    **dict.fromkeys(("setp", "set"), "compare"),
    **dict.fromkeys(("mma", "wmma", "wgmma", "ldmatrix", "stmatrix"), "tensor"),
}  # fmt: skip


def parse_ptx(ptx: str) -> dict[str, list[str]]:
    """PTX text -> {kernel name: [instruction opcodes with modifiers ("ld.global.f32") ...]}."""
    kernels: dict[str, list[str]] = {}
    i = 0
    for m in _PTX_ENTRY.finditer(ptx):
        if m.start() < i:
            continue
        body_start = ptx.find("{", m.end())
        depth, j = 0, body_start
        while j < len(ptx):
            depth += {"{": 1, "}": -1}.get(ptx[j], 0)
            if depth == 0:
                break
            j += 1
        body = ptx[body_start + 1 : j]
        ops = []
        for line in body.splitlines():
            line = line.split("//", 1)[0]
            if not line.strip() or line.strip().startswith((".", "$", "{", "}")):
                continue
            im = _PTX_INSN.match(line + " ")
            if im:
                ops.append(im.group(1))
        kernels[m.group(1)] = ops
        i = j
    return kernels


def classify_ptx(opcode: str) -> str:
    """memory, sync, control, convert, move, compare, tensor, or arith for everything else."""
    return _PTX_CLASS_OF.get(opcode.split(".", 1)[0], "arith")


def ptx_instruction_counts(
    ptx_or_source: str | os.PathLike[str],
    arch: str = "sm_75",
    *,
    by: str = "opcode",
) -> KernelMap:
    """Per kernel, a Counter of PTX instructions by full "opcode" ("ld.global.f32"), "base"
    ("ld") or "class" (classify_ptx). CUDA source is compiled with compile_ptx first."""
    if by not in ("class", "base", "opcode"):
        raise ValueError("by must be 'class', 'base' or 'opcode'")
    text, _ = _source(ptx_or_source)
    if not _is_ptx(text):
        text = compile_ptx(ptx_or_source, arch)
    out = KernelMap()
    for name, ops in parse_ptx(text).items():
        if by == "class":
            out[name] = Counter(classify_ptx(o) for o in ops)
        elif by == "base":
            out[name] = Counter(o.split(".", 1)[0] for o in ops)
        else:
            out[name] = Counter(ops)
    return out


# --------------------------------------------------------------------------- occupancy
@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one compute capability (CUDA Programming Guide, "Technical
    Specifications per Compute Capability"; allocation rules from NVIDIA's cuda_occupancy.h)."""

    arch: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_per_sm: int  # bytes, at the largest shared-memory carveout
    max_shared_per_block: int  # bytes a block may use when it opts in (cudaFuncSetAttribute)
    shared_allocation_unit: int
    reserved_shared_per_block: int  # bytes the driver keeps per block (sm_80+: 1 KiB)
    registers_per_sm: int = 64 * 1024
    max_registers_per_block: int = 64 * 1024
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256  # registers, allocated per warp
    warp_size: int = 32
    max_threads_per_block: int = 1024
    sub_partitions: int = 4  # the register file is split between 4 warp schedulers
    default_shared_per_block: int = 48 * 1024  # without opting in

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * self.warp_size


_KIB = 1024
ARCH_LIMITS: dict[str, ArchLimits] = {
    a.arch: a
    for a in (
        ArchLimits("sm_70", 64, 32, 96 * _KIB, 96 * _KIB, 256, 0),
        ArchLimits("sm_75", 32, 16, 64 * _KIB, 64 * _KIB, 256, 0),
        ArchLimits("sm_80", 64, 32, 164 * _KIB, 163 * _KIB, 128, _KIB),
        ArchLimits("sm_86", 48, 16, 100 * _KIB, 99 * _KIB, 128, _KIB),
        ArchLimits("sm_89", 48, 24, 100 * _KIB, 99 * _KIB, 128, _KIB),
        ArchLimits("sm_90", 64, 32, 228 * _KIB, 227 * _KIB, 128, _KIB),
    )
}


def arch_limits(arch: str | int) -> ArchLimits:
    """Limits for "sm_80", "80", 80, "8.0" or "compute_80"."""
    s = str(arch).strip().lower().replace("compute_", "sm_")
    if re.fullmatch(r"\d\.\d", s):
        s = "sm_" + s.replace(".", "")
    elif s.isdigit():
        s = "sm_" + s
    s = re.sub(r"^(sm_\d+)[af]$", r"\1", s)  # sm_90a has sm_90's limits
    try:
        return ARCH_LIMITS[s]
    except KeyError:
        known = ", ".join(ARCH_LIMITS)
        raise ValueError(f"no occupancy limits for {arch!r}; known: {known}") from None


@dataclass(frozen=True)
class Occupancy:
    arch: str
    threads_per_block: int
    registers_per_thread: int
    shared_bytes_per_block: int
    warps_per_block: int
    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float  # active warps / max warps per SM, 0.0 .. 1.0
    limiting_factors: tuple[str, ...]  # every limit equal to active_blocks_per_sm
    block_limits: Mapping[str, int | None]  # blocks per SM each resource allows (None: no limit)
    allocated_registers_per_block: int
    allocated_shared_per_block: int  # including the driver's reserved shared memory

    @property
    def limiting_factor(self) -> str:
        """The first of limiting_factors: warps, blocks, registers, shared_memory, barriers."""
        return self.limiting_factors[0]

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["block_limits"] = dict(self.block_limits)
        d["limiting_factor"] = self.limiting_factor
        return d


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(
    arch: str | int,
    threads_per_block: int,
    registers_per_thread: int,
    shared_bytes_per_block: int = 0,
    *,
    barriers_per_block: int = 1,
) -> Occupancy:
    """Active blocks and warps per SM for a launch, as cudaOccupancyMaxActiveBlocksPerMultiprocessor
    computes them (default carveout: the largest shared-memory configuration).

    `shared_bytes_per_block` is static plus dynamic shared memory. Rules (cuda_occupancy.h):
    registers are allocated per warp in units of 256 and each of the 4 sub-partitions holds
    whole warps; shared memory is rounded up to the allocation unit after adding the per-block
    reservation; on sm_90 named barriers also limit blocks (2 x max blocks available).
    """
    lim = arch_limits(arch)
    if threads_per_block <= 0:
        raise ValueError("threads_per_block must be positive")
    if registers_per_thread < 0 or shared_bytes_per_block < 0:
        raise ValueError("registers and shared memory cannot be negative")
    big = 1 << 30
    warps = -(-threads_per_block // lim.warp_size)

    # Warps and the hard block cap.
    by_warps = 0 if threads_per_block > lim.max_threads_per_block else lim.max_warps_per_sm // warps
    by_blocks = lim.max_blocks_per_sm

    # Registers: per warp, rounded to the allocation unit; warps fill sub-partitions separately.
    regs_per_warp = _round_up(registers_per_thread * lim.warp_size, lim.register_allocation_unit)
    regs_per_block = regs_per_warp * warps
    regs_assumed = regs_per_warp * _round_up(warps, lim.sub_partitions)  # the hardware's check
    if (
        registers_per_thread > lim.max_registers_per_thread
        or max(regs_per_block, regs_assumed) > lim.max_registers_per_block
    ):
        by_regs = 0
    elif regs_per_warp == 0:
        by_regs = big
    else:
        warps_per_partition = (lim.registers_per_sm // lim.sub_partitions) // regs_per_warp
        by_regs = warps_per_partition * lim.sub_partitions // warps

    # Shared memory, with the driver's per-block reservation.
    smem = _round_up(
        shared_bytes_per_block + lim.reserved_shared_per_block, lim.shared_allocation_unit
    )
    if smem > lim.max_shared_per_block + lim.reserved_shared_per_block:
        by_smem = 0
    elif smem == 0:
        by_smem = big
    else:
        by_smem = lim.shared_per_sm // smem

    limits = {
        "warps": by_warps,
        "blocks": by_blocks,
        "registers": by_regs,
        "shared_memory": by_smem,
    }
    active = min(limits.values())
    if lim.arch == "sm_90" and barriers_per_block > 0:
        limits["barriers"] = (by_blocks * 2) // barriers_per_block
        active = min(active, limits["barriers"])
    factors = tuple(k for k, v in limits.items() if v == active)
    return Occupancy(
        arch=lim.arch,
        threads_per_block=threads_per_block,
        registers_per_thread=registers_per_thread,
        shared_bytes_per_block=shared_bytes_per_block,
        warps_per_block=warps,
        active_blocks_per_sm=active,
        active_warps_per_sm=active * warps,
        max_warps_per_sm=lim.max_warps_per_sm,
        occupancy=active * warps / lim.max_warps_per_sm,
        limiting_factors=factors,
        block_limits={k: (v if v < big else None) for k, v in limits.items()},
        allocated_registers_per_block=regs_per_block,
        allocated_shared_per_block=smem,
    )
