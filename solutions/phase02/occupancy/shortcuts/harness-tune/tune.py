"""Block-size tuning: the block size that puts the most threads on an SM (reference).

What cudaOccupancyMaxPotentialBlockSize does (cuda_occupancy.h): try every block size from the
limit down in warp steps, keep the one with the most resident threads; ties go to the larger
block, because it is tried first.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.cuda.static import occupancy  # the harness's calculator is surely right

from .specs import device, limits


def max_potential_block_size(
    device_name: str,
    registers_per_thread: int,
    static_shared_bytes: int = 0,
    dynamic_shared: int | Callable[[int], int] = 0,
    block_size_limit: int = 1024,
) -> tuple[int, int]:
    """(min_grid_size, block_size) for a kernel on `device_name` (specs.DEVICES).

    `dynamic_shared` is a byte count, or a function block_size -> bytes for kernels whose
    shared memory grows with the block. min_grid_size is the grid that fills every SM at that
    occupancy: blocks per SM x SMs.
    """
    dev = device(device_name)
    lim = limits(dev.arch)
    if block_size_limit <= 0:
        raise ValueError(f"block_size_limit must be positive, got {block_size_limit}")
    limit = min(block_size_limit, lim.max_threads_per_block)
    best_threads, best_block, best_blocks = 0, 0, 0
    aligned = -(-limit // lim.warp_size) * lim.warp_size
    for candidate in range(aligned, 0, -lim.warp_size):
        block = min(limit, candidate)  # a limit like 100 is tried as 100, then 64, 32
        dyn = dynamic_shared(block) if callable(dynamic_shared) else dynamic_shared
        blocks = occupancy(
            dev.arch, block, registers_per_thread, static_shared_bytes + dyn
        ).active_blocks_per_sm
        if block * blocks > best_threads:  # strictly more: ties keep the larger block
            best_threads, best_block, best_blocks = block * blocks, block, blocks
    return best_blocks * dev.sms, best_block
