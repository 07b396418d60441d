"""`ptxas -v` reports: each kernel's registers, shared memory, spills and barriers (Resources)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.cuda.static.compiling import cubin_entry
from harness.cuda.static.names import KernelMap, demangle_one
from harness.native.cache import ArtefactCache

__all__ = ["Resources", "parse_ptxas_verbose", "ptxas_resources"]


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
        return demangle_one(self.name)

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
    entry = cubin_entry(source_or_ptx, arch, options, cache)
    return parse_ptxas_verbose((entry / "compile.log").read_text(encoding="utf-8"))
