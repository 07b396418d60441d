"""Reading microbenchmark sweeps: the cache-line size and the cache levels.

YOUR FILE. The tests run the sweeps with your C kernels (membench.c) and hand the timings to
these functions; they also feed them made-up sweeps whose answers are known. Neither function
may look at the machine: everything comes from the numbers passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from harness import todo

__all__ = ["Level", "cache_levels", "line_size"]


class Level(NamedTuple):
    """One plateau of a latency sweep: a cache level, or memory for the last one (given)."""

    capacity: int  # bytes: the largest working set still on this plateau
    latency_ns: float  # the median latency of the plateau's points
    spill: int | None  # bytes: the first size past the plateau (None for the last level)


def line_size(offsets: Sequence[int], ns_per_pair: Sequence[float]) -> int:
    """The cache-line size from a pair-chase sweep (task line-size).

    `offsets` (bytes, increasing) are the distances between the two loads of a pair, and
    `ns_per_pair[i]` what one pair cost at `offsets[i]`. A pair costs one miss while its second
    load is in the first load's line, and two misses once it is not. Return the line size: the
    smallest offset whose cost is at least the geometric mean of the one-miss cost (the
    smallest offset's) and the two-miss cost (the largest offset's).

    Raise ValueError when the lengths differ, there are fewer than two points, the offsets do not
    increase, a cost is not positive, or there is no step at all (the largest offset costs less
    than 1.5x the smallest).
    """
    todo("sweeps.line_size")


def cache_levels(
    sizes: Sequence[int], latency_ns: Sequence[float], jump: float = 1.5, rise: float = 1.2
) -> list[Level]:
    """The plateaus of a pointer-chase sweep (task capacities).

    `sizes` are working sets in bytes (increasing), `latency_ns[i]` the time per dependent load
    at `sizes[i]`. A plateau starts at some point p; it ends before the first later point whose
    latency is more than `jump` times p's: that point is a knee. The steps after a knee that
    still rise by more than `rise` times over the previous point belong to the same transition;
    the next plateau starts at the top of the transition (its last point). Each plateau gives a
    Level: capacity = its last size, latency_ns = the median of its points, spill = the size of
    its knee. The last plateau is memory (or the largest level measured): capacity = the
    largest size, spill = None.

    Example: sizes 1..6 KiB with latencies [2, 2, 2, 3.5, 6, 6.2] -> two levels:
    Level(3072, 2.0, 4096) and Level(6144, 6.1, None) -- 3.5 is part of the transition, on
    neither plateau.

    Raise ValueError on the malformed input line_size rejects (except the step), or jump or rise <= 1.
    """
    todo("sweeps.cache_levels")
