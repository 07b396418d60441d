"""Reading microbenchmark sweeps (shortcut first-last-threshold: a threshold between the ends)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["STEP", "Level", "cache_levels", "line_size"]

STEP = 1.5  # a step is a drop to 1 / STEP of the cost or more (given)


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


def line_size(offsets: Sequence[int], ns_per_hop: Sequence[float]) -> int:
    """The first offset whose cost is below the geometric mean of the first and the last."""
    _check(offsets, ns_per_hop, "line_size")
    first, last = ns_per_hop[0], ns_per_hop[-1]
    if first < STEP * last:
        raise ValueError("line_size: no step down in the sweep")
    middle = math.sqrt(first * last)
    return next(int(o) for o, t in zip(offsets, ns_per_hop, strict=True) if t < middle)


def cache_levels(
    sizes: Sequence[int], latency_ns: Sequence[float], jump: float = 1.5, rise: float = 1.2
) -> list[Level]:
    """The plateaus of a pointer-chase sweep: a plateau ends before a knee, a point more than
    `jump` times the plateau's median so far whose next point is too (one slow point alone is an
    outlier, not a knee); the transition after a knee lasts while points rise by > `rise`."""
    _check(sizes, latency_ns, "cache_levels")
    if not (jump > 1 and rise > 1):
        raise ValueError(f"cache_levels: jump and rise must be > 1, got {jump!r} and {rise!r}")
    levels: list[Level] = []
    n = len(sizes)
    start = 0  # the first point of the current plateau
    i = 1
    while i < n:
        level = jump * statistics.median(latency_ns[start:i])
        if latency_ns[i] > level and (i + 1 == n or latency_ns[i + 1] > level):  # a knee
            plateau = latency_ns[start:i]
            levels.append(Level(int(sizes[i - 1]), statistics.median(plateau), int(sizes[i])))
            while i + 1 < n and latency_ns[i + 1] > rise * latency_ns[i]:
                i += 1  # still rising steeply: the same transition
            start = i
        i += 1
    levels.append(Level(int(sizes[-1]), statistics.median(latency_ns[start:]), None))
    return levels
