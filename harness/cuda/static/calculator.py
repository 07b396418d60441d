"""The occupancy calculator: active blocks and warps per SM, as NVIDIA's cuda_occupancy.h does."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.cuda.static.arch import arch_limits

__all__ = ["Occupancy", "occupancy"]


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
