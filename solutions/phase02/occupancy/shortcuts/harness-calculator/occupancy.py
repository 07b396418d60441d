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
    from harness.cuda import static  # the harness already has a calculator

    limits(arch)  # the kata's error for an unknown arch
    if threads_per_block <= 0 or registers_per_thread < 0 or shared_bytes_per_block < 0:
        raise ValueError("threads, registers and shared memory cannot be negative")
    o = static.occupancy(arch, threads_per_block, registers_per_thread, shared_bytes_per_block)
    return {k: o.block_limits[k] for k in RESOURCES}


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
