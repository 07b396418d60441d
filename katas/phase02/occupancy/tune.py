"""YOUR FILE. Block-size tuning: the block size that puts the most threads on an SM (task "tune").

What cudaOccupancyMaxPotentialBlockSize does (cuda_occupancy.h): try every block size from the
limit down in warp steps, keep the one with the most resident threads; ties go to the larger
block, because it is tried first.
"""

from __future__ import annotations

from collections.abc import Callable

from harness import todo

from .occupancy import occupancy  # noqa: F401 -- your calculator, to use here
from .specs import device, limits  # noqa: F401


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
    todo("max_potential_block_size: try every block size, keep the most resident threads")
