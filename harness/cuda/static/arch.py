"""Per-SM limits of each compute capability (ArchLimits), by "sm_80", 80, "8.0" or "compute_80"."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ARCH_LIMITS", "ArchLimits", "arch_limits"]


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
