"""Reading microbenchmark sweeps: the cache-line size and the cache levels (reference solution)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Level", "cache_levels", "line_size"]


class Level(NamedTuple):
    """One plateau of a latency sweep: a cache level, or memory for the last one (given)."""

    capacity: int  # bytes: the largest working set still on this plateau
    latency_ns: float  # the median latency of the plateau's points
    spill: int | None  # bytes: the first size past the plateau (None for the last level)


def _check(xs: Sequence[float], ys: Sequence[float], what: str) -> None:
    if len(xs) != len(ys):
        raise ValueError(f"{what}: {len(xs)} sizes but {len(ys)} timings")
    if len(xs) < 2:
        raise ValueError(f"{what}: a sweep needs at least two points, got {len(xs)}")
    for a, b in zip(xs, xs[1:], strict=False):
        if b <= a:
            raise ValueError(f"{what}: sizes must increase strictly, got {a} then {b}")
    for x, y in zip(xs, ys, strict=True):
        if not y > 0:
            raise ValueError(f"{what}: the timing at {x} must be positive, got {y!r}")


def line_size(offsets: Sequence[int], ns_per_pair: Sequence[float]) -> int:
    """The smallest offset whose pair costs at least the geometric mean of the one-miss cost
    (the smallest offset's) and the two-miss cost (the largest offset's)."""
    _check(offsets, ns_per_pair, "line_size")
    low, high = ns_per_pair[0], ns_per_pair[-1]
    if high < 1.5 * low:
        raise ValueError(
            f"line_size: no step in the sweep: the largest offset costs {high:.3g} ns, the "
            f"smallest {low:.3g} ns (less than 1.5x): is the buffer larger than the caches?"
        )
    middle = math.sqrt(low * high)  # halfway between one and two misses, by ratio
    return next(int(o) for o, t in zip(offsets, ns_per_pair, strict=True) if t >= middle)


def cache_levels(
    sizes: Sequence[int], latency_ns: Sequence[float], jump: float = 1.5, rise: float = 1.2
) -> list[Level]:
    """The plateaus of a pointer-chase sweep: each ends before a point more than `jump` times
    slower than the plateau's first point; a transition lasts while steps rise by > `rise`."""
    _check(sizes, latency_ns, "cache_levels")
    if not (jump > 1 and rise > 1):
        raise ValueError(f"cache_levels: jump and rise must be > 1, got {jump!r} and {rise!r}")
    levels: list[Level] = []
    n = len(sizes)
    start = 0  # the first point of the current plateau
    i = 1
    while i < n:
        if latency_ns[i] > jump * latency_ns[start]:  # a knee: i no longer fits
            plateau = latency_ns[start:i]
            levels.append(Level(int(sizes[i - 1]), statistics.median(plateau), int(sizes[i])))
            while i + 1 < n and latency_ns[i + 1] > rise * latency_ns[i]:
                i += 1  # still rising steeply: the same transition
            start = i
        i += 1
    levels.append(Level(int(sizes[-1]), statistics.median(latency_ns[start:]), None))
    return levels
