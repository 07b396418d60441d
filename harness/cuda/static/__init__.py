"""Static analysis of CUDA kernels, no GPU needed.

nvcc/ptxas compile to PTX and cubins on any machine: `ptxas -v` reports each kernel's registers,
shared memory, spills and barriers; `cuobjdump --dump-sass` shows the machine code. With those
numbers and the per-architecture limits, `occupancy()` does what NVIDIA's occupancy calculator
(and `cudaOccupancyMaxActiveBlocksPerMultiprocessor`) does.

Compilations go through the same content-addressed cache as harness.native, so a kata's static
checks cost one nvcc run per distinct source, not one per test.

One job per module; import from here (``from harness.cuda.static import occupancy``):
  names        demangling, in c++filt's spelling whichever tool ran (gnu_spelling); KernelMap
               (kernel names as ptxas, cuobjdump and people write them)
  compiling    nvcc/ptxas runs through the artefact cache: compile_ptx, compile_cubin
  ptxas        `ptxas -v` reports: Resources, parse_ptxas_verbose, ptxas_resources
  opcodes      instruction classes of SASS and PTX opcodes (the table: opcodes.toml)
  disassembly  cuobjdump's SASS: sass, parse_sass, sass_instruction_counts
  ptx          PTX text: parse_ptx, ptx_instruction_counts
  arch         per-SM limits of each compute capability: ArchLimits, arch_limits
  calculator   the occupancy calculator: occupancy, Occupancy

It is the graders' oracle: harness.sandbox.fence refuses learner imports of this package and of
every module in it.
"""

from __future__ import annotations

from harness.cuda.static.arch import ARCH_LIMITS, ArchLimits, arch_limits
from harness.cuda.static.calculator import Occupancy, occupancy
from harness.cuda.static.compiling import (
    FORMAT_VERSION,
    CudaCompileError,
    compile_cubin,
    compile_ptx,
)
from harness.cuda.static.disassembly import (
    SassInstruction,
    parse_sass,
    sass,
    sass_instruction_counts,
)
from harness.cuda.static.names import KernelMap, demangle, gnu_spelling
from harness.cuda.static.opcodes import classify_ptx, classify_sass
from harness.cuda.static.ptx import parse_ptx, ptx_instruction_counts
from harness.cuda.static.ptxas import Resources, parse_ptxas_verbose, ptxas_resources

__all__ = [
    "ARCH_LIMITS",
    "FORMAT_VERSION",
    "ArchLimits",
    "CudaCompileError",
    "KernelMap",
    "Occupancy",
    "Resources",
    "SassInstruction",
    "arch_limits",
    "classify_ptx",
    "classify_sass",
    "compile_cubin",
    "compile_ptx",
    "demangle",
    "gnu_spelling",
    "occupancy",
    "parse_ptx",
    "parse_ptxas_verbose",
    "parse_sass",
    "ptx_instruction_counts",
    "ptxas_resources",
    "sass",
    "sass_instruction_counts",
]
