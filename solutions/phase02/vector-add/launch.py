"""Launch configuration: how many blocks to launch for n elements (reference)."""

from __future__ import annotations

from typing import NamedTuple

MAX_GRID_X = 2**31 - 1  # gridDim.x limit since compute capability 3.0
MAX_BLOCK = 1024  # threads per block, every architecture since 2.0


class Device(NamedTuple):
    sms: int
    max_threads_per_sm: int


# Given: the two GPUs of this phase (see the occupancy kata for the rest of their limits).
DEVICES = {"T4": Device(sms=40, max_threads_per_sm=1024), "H200": Device(132, 2048)}


def _check(n: int, block_size: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if isinstance(block_size, bool) or not isinstance(block_size, int):
        raise ValueError(f"block_size must be an int, got {block_size!r}")
    if not 1 <= block_size <= MAX_BLOCK:
        raise ValueError(f"block_size must be 1..{MAX_BLOCK}, got {block_size}")


def grid_size(n: int, block_size: int) -> int:
    """Blocks needed for one thread per element: ceil(n / block_size), in integers (a float
    division loses exactness past 2**53). 0 for n == 0: there is nothing to launch."""
    _check(n, block_size)
    grid = (n + block_size - 1) // block_size
    if grid > MAX_GRID_X:
        raise ValueError(
            f"n={n} needs {grid} blocks of {block_size}, more than gridDim.x allows "
            f"({MAX_GRID_X}); use launch_config() and a grid-stride loop"
        )
    return grid


def launch_config(n: int, block_size: int = 256, device: str = "T4") -> tuple[int, int]:
    """(grid, block) for a grid-stride kernel: one thread per element, but never more blocks
    than the device holds at once (SMs x blocks per SM at full occupancy); the loop covers
    the rest. At least 1 block when n > 0, (0, block_size) when n == 0."""
    _check(n, block_size)
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; known: {', '.join(DEVICES)}")
    dev = DEVICES[device]
    resident = dev.sms * max(1, dev.max_threads_per_sm // block_size)
    needed = (n + block_size - 1) // block_size
    return min(needed, resident), block_size
