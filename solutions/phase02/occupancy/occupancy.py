"""Occupancy calculator: how many blocks of a launch fit on one SM at once (reference).

The same rules as NVIDIA's cuda_occupancy.h (what cudaOccupancyMaxActiveBlocksPerMultiprocessor
and the Nsight Compute "Occupancy" section use), for the architectures in specs.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from .specs import limits

RESOURCES = ("warps", "blocks", "registers", "shared_memory")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def block_limits(
    arch: str, threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int = 0
) -> dict[str, int | None]:
    """Blocks per SM that each resource allows on its own; None for a resource the launch does
    not use at all. `shared_bytes_per_block` is static plus dynamic shared memory."""
    lim = limits(arch)
    if threads_per_block <= 0:
        raise ValueError(f"threads_per_block must be positive, got {threads_per_block}")
    if registers_per_thread < 0 or shared_bytes_per_block < 0:
        raise ValueError("registers_per_thread and shared_bytes_per_block cannot be negative")
    warps = -(-threads_per_block // lim.warp_size)  # a partial warp still takes a whole slot

    by_warps = 0 if threads_per_block > lim.max_threads_per_block else lim.max_warps_per_sm // warps

    # Registers go to whole warps in 256-register units, and each of the 4 schedulers' quarter
    # of the register file holds whole warps: a warp cannot straddle two quarters.
    by_regs: int | None
    regs_per_warp = _round_up(registers_per_thread * lim.warp_size, lim.register_allocation_unit)
    if registers_per_thread > lim.max_registers_per_thread:
        by_regs = 0
    elif regs_per_warp == 0:
        by_regs = None
    else:
        per_partition = (lim.registers_per_sm // lim.sub_partitions) // regs_per_warp
        by_regs = per_partition * lim.sub_partitions // warps

    # Shared memory: the driver's per-block reservation first, then the allocation unit.
    by_smem: int | None
    smem = _round_up(
        shared_bytes_per_block + lim.reserved_shared_per_block, lim.shared_allocation_unit
    )
    if smem > lim.max_shared_per_block + lim.reserved_shared_per_block:
        by_smem = 0
    elif smem == 0:
        by_smem = None
    else:
        by_smem = lim.shared_per_sm // smem

    return {
        "warps": by_warps,
        "blocks": lim.max_blocks_per_sm,
        "registers": by_regs,
        "shared_memory": by_smem,
    }


# ----------------------------------------------------------------------- given (not a task)
@dataclass(frozen=True)
class Occupancy:
    arch: str
    threads_per_block: int
    warps_per_block: int
    active_blocks_per_sm: int
    active_warps_per_sm: int
    occupancy: float  # active warps / the SM's maximum, 0.0 .. 1.0
    limiters: tuple[str, ...]  # every resource whose limit equals active_blocks_per_sm
    block_limits: dict[str, int | None]


def occupancy(
    arch: str, threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int = 0
) -> Occupancy:
    """The launch's occupancy: the tightest of block_limits()."""
    per = block_limits(arch, threads_per_block, registers_per_thread, shared_bytes_per_block)
    lim = limits(arch)
    active = min(v for v in per.values() if v is not None)
    warps = -(-threads_per_block // lim.warp_size)
    return Occupancy(
        arch=arch,
        threads_per_block=threads_per_block,
        warps_per_block=warps,
        active_blocks_per_sm=active,
        active_warps_per_sm=active * warps,
        occupancy=active * warps / lim.max_warps_per_sm,
        limiters=tuple(k for k in RESOURCES if per[k] == active),
        block_limits=per,
    )
