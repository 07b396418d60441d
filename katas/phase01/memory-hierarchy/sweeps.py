"""Reading microbenchmark sweeps: the cache-line size and the cache levels.

YOUR FILE. The tests run the sweeps with your C kernels (membench.c) and hand the timings to
these functions; they also feed them made-up sweeps whose answers are known. Neither function
may look at the machine: everything comes from the numbers passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from harness import todo

__all__ = ["STEP", "Level", "cache_levels", "line_size"]

STEP = 1.5  # a step is a drop to 1 / STEP of the cost or more (given)


class Level(NamedTuple):
    """One plateau of a latency sweep: a cache level, or memory for the last one (given)."""

    capacity: int  # bytes: the largest working set still on this plateau
    latency_ns: float  # the median latency of the plateau's points
    spill: int | None  # bytes: the first size past the plateau (None for the last level)


def line_size(offsets: Sequence[int], ns_per_hop: Sequence[float]) -> int:
    """The cache-line size from a flush-probe sweep (task line-size).

    `offsets` (bytes, increasing) are where the probe flushed a line in every chunk, and
    `ns_per_hop[i]` what a walk through the chunks' first words then cost per hop. While
    `offsets[i]` is inside the first word's line the flush evicted it and every hop misses
    (slow); from the line size on, the flushed line is another one and every hop hits (fast).
    Return the first offset of the fast side.

    Measurements are noisy and a busy machine can slow one of them down a lot, so find the step
    robustly: for every split k = 1 .. n-1 (misses offsets[:k], hits offsets[k:]), the misfit of
    each side is the sum over its points of |log(cost / median of that side's costs)|; take the
    k with the smallest total misfit (the smallest k on a tie) and return offsets[k].

    Raise ValueError when the lengths differ, there are fewer than two points, the offsets do not
    increase, a cost is not positive, or there is no step: the median cost before the split is
    less than STEP times the median cost from it on.
    """
    todo("sweeps.line_size")


def cache_levels(
    sizes: Sequence[int], latency_ns: Sequence[float], jump: float = 1.5, rise: float = 1.2
) -> list[Level]:
    """The plateaus of a pointer-chase sweep (task capacities).

    `sizes` are working sets in bytes (increasing), `latency_ns[i]` the time per dependent load
    at `sizes[i]`. A plateau starts at some point p; it ends before the first later point i whose
    latency is more than `jump` times the median of the plateau's points so far (p .. i-1) and
    whose next point's is too (or that is the sweep's last point): i is a knee. One point above
    the bar with the next one below it is an outlier (a busy moment), part of the plateau. The
    steps after a knee that still rise by more than `rise` times over the previous point belong
    to the same transition; the next plateau starts at the top of the transition (its last
    point). Each plateau gives a Level: capacity = its last size, latency_ns = the median of its
    points, spill = the size of its knee. The last plateau is memory (or the largest level
    measured): capacity = the largest size, spill = None.

    Example: sizes 1..6 KiB with latencies [2, 2, 2, 3.5, 6, 6.2] -> two levels:
    Level(3072, 2.0, 4096) and Level(6144, 6.1, None) -- 3.5 is part of the transition, on
    neither plateau.

    Raise ValueError on the malformed input line_size rejects (except the step), or jump or rise <= 1.
    """
    todo("sweeps.cache_levels")
