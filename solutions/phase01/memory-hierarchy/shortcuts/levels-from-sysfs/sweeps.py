"""Reading microbenchmark sweeps (shortcut levels-from-sysfs: the knees are where Linux says)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
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


def _misfit(log_costs: Sequence[float]) -> float:
    """How far a group of points is from being one flat level: the sum of their distances (in
    log, so by ratio) from the group's median. The median, not the mean: one outlier (a
    measurement a busy machine slowed down) barely moves it."""
    middle = statistics.median(log_costs)
    return sum(abs(c - middle) for c in log_costs)


def line_size(offsets: Sequence[int], ns_per_hop: Sequence[float]) -> int:
    """The offset where a flush probe's sweep steps down from misses to hits: the split k
    (1 <= k < n) that makes offsets[:k] and offsets[k:] each closest to flat (the smallest total
    misfit; the first k on a tie), provided the misses' median is at least `STEP` times the hits'."""
    _check(offsets, ns_per_hop, "line_size")
    logs = [math.log(t) for t in ns_per_hop]
    k = min(range(1, len(logs)), key=lambda k: _misfit(logs[:k]) + _misfit(logs[k:]))
    misses, hits = statistics.median(ns_per_hop[:k]), statistics.median(ns_per_hop[k:])
    if misses < STEP * hits:
        raise ValueError(
            f"line_size: no step down in the sweep: the best split, at offset {offsets[k]}, has "
            f"{misses:.3g} ns per hop before it and {hits:.3g} ns from it on (less than "
            f"{STEP}x): did the flush evict anything?"
        )
    return int(offsets[k])


def _cache_sizes() -> list[int]:
    """cpu0's data and unified cache sizes, in bytes, from sysfs."""
    sizes = []
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        if (d / "type").read_text().strip() != "Instruction":
            text = (d / "size").read_text().strip()
            sizes.append(int(text[:-1]) << 10 if text.endswith("K") else int(text))
    return sorted(sizes)


def cache_levels(
    sizes: Sequence[int], latency_ns: Sequence[float], jump: float = 1.5, rise: float = 1.2
) -> list[Level]:
    """One level per cache Linux reports (the sweep's sizes around it), memory after them."""
    _check(sizes, latency_ns, "cache_levels")
    if not (jump > 1 and rise > 1):
        raise ValueError(f"cache_levels: jump and rise must be > 1, got {jump!r} and {rise!r}")
    levels: list[Level] = []
    lo = 0
    for cache in _cache_sizes():
        inside = [i for i in range(lo, len(sizes)) if sizes[i] <= cache]
        if not inside or inside[-1] + 1 >= len(sizes):
            break
        last = inside[-1]
        levels.append(
            Level(
                int(sizes[last]), statistics.median(latency_ns[lo : last + 1]), int(sizes[last + 1])
            )
        )
        lo = last + 1
    levels.append(Level(int(sizes[-1]), statistics.median(latency_ns[lo:]), None))
    return levels
