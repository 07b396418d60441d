"""YOUR FILE. Occupancy calculator: how many blocks of a launch fit on one SM at once.

Replace the ``todo(...)`` in block_limits (task "calculator"); occupancy() below is given.

The same rules as NVIDIA's cuda_occupancy.h (what cudaOccupancyMaxActiveBlocksPerMultiprocessor
and the Nsight Compute "Occupancy" section use), for the architectures in specs.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness import todo

from .specs import limits

RESOURCES = ("warps", "blocks", "registers", "shared_memory")


def block_limits(
    arch: str, threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int = 0
) -> dict[str, int | None]:
    """Blocks per SM that each resource allows on its own; None for a resource the launch does
    not use at all. `shared_bytes_per_block` is static plus dynamic shared memory.

    Returns {"warps": .., "blocks": .., "registers": .., "shared_memory": ..}; 0 means the
    launch cannot run at all (too many threads, registers or bytes for one block). Raises
    ValueError for threads_per_block <= 0 or negative registers/bytes; specs.limits(arch)
    raises for an unknown arch. README.md ("The four limits") has the rules and a worked example.
    """
    todo("block_limits: blocks per SM allowed by warps, blocks, registers and shared memory")


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
