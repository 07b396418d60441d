"""YOUR FILE. Launch configuration: how many blocks to launch for n elements (task "launch")."""

from __future__ import annotations

from typing import NamedTuple

from harness import todo

MAX_GRID_X = 2**31 - 1  # gridDim.x limit since compute capability 3.0
MAX_BLOCK = 1024  # threads per block, every architecture since 2.0


class Device(NamedTuple):
    sms: int
    max_threads_per_sm: int


# Given: the two GPUs of this phase (see the occupancy kata for the rest of their limits).
DEVICES = {"T4": Device(sms=40, max_threads_per_sm=1024), "H200": Device(132, 2048)}


def grid_size(n: int, block_size: int) -> int:
    """Blocks needed for one thread per element: ceil(n / block_size), in integers (a float
    division loses exactness past 2**53). 0 for n == 0: there is nothing to launch.

    ValueError, naming the argument and its value, for n < 0 or not an int, block_size outside
    1..MAX_BLOCK, or a grid larger than MAX_GRID_X.
    """
    todo("grid_size: ceil(n / block_size) with integer arithmetic, and the argument checks")


def launch_config(n: int, block_size: int = 256, device: str = "T4") -> tuple[int, int]:
    """(grid, block) for a grid-stride kernel: one thread per element, but never more blocks
    than the device holds at once (SMs x blocks per SM at full occupancy, where blocks per SM
    = max_threads_per_sm // block_size, at least 1); the loop covers the rest. At least 1 block
    when n > 0, (0, block_size) when n == 0. Same ValueErrors as grid_size (but no grid limit:
    the grid is capped), and one for an unknown device listing the known ones.
    """
    todo("launch_config: min(blocks needed, blocks resident on the device)")
