"""Tasks "ring", "pipeline", "small" and "faults": all-reduce between real processes.

Every function here runs in each rank's process at once, with that rank's `comm` (comm.py) and
its input `x` (a 1-D numpy array, float32, float16 or int32), and returns the reduced array:
every rank returns the same bits. The README gives the exact schedule and wire format.

Task "faults", for every collective here: a timeout, an EOF or reset, or an ABORT frame ends the
collective with RankFailure(the failed rank, reason). Before raising, tell every other rank
whom you were waiting on (an ABORT naming that rank), read their ABORTs for comm.timeout / 2,
and name the rank at the end of the chain of waits: the first one that sent no ABORT (or whose
connection is gone). README, "Faults".
"""

from __future__ import annotations

import numpy as np

from harness import todo

from .comm import ABORT, DATA, HEADER, Comm, RankFailure  # noqa: F401  (you will need them)
from .wire import recv_exact, recv_frame, send_frame  # noqa: F401

SLICE_ELEMS = 1 << 16  # elements per frame of the ring (256 KiB of float32)
THRESHOLD_BYTES = 1 << 15  # all_reduce: below this many bytes, recursive doubling


def reduce_op(op: str, received: np.ndarray, local: np.ndarray) -> np.ndarray:
    """op(received, local) elementwise, in the arrays' dtype: "sum" or "max" (ValueError for
    any other op)."""
    todo("reduce_op")


def chunk_bounds(count: int, n: int) -> list[tuple[int, int]]:
    """[start, end) of each of the n chunks of `count` elements: the first count % n chunks
    have one element more than the others."""
    todo("chunk_bounds")


def ring_allreduce(
    comm: Comm, x: np.ndarray, op: str = "sum", slice_elems: int = SLICE_ELEMS
) -> np.ndarray:
    """Reduce-scatter then all-gather around the ring (README, "The ring, exactly").

    Chunk c (chunk_bounds) is reduced in the order rank c, c+1, ..., c+n-1: at reduce-scatter
    step s (0..n-2) rank r sends chunk (r - s) % n to its right and receives chunk
    (r - s - 1) % n from its left, storing op(received, its own); at all-gather step s it sends
    chunk (r + 1 - s) % n and receives chunk (r - s) % n, storing it. Every chunk travels as
    frames of at most slice_elems elements (an empty chunk as one empty frame).

    Task "pipeline": forward each slice as soon as you have it, and keep receiving while your
    earlier slices are still being sent. Task "faults": RankFailure naming the rank that failed
    (module docstring)."""
    todo("ring_allreduce")


def recursive_doubling_allreduce(comm: Comm, x: np.ndarray, op: str = "sum") -> np.ndarray:
    """Task "small": all-reduce in log2(n) exchange rounds (+2 when n is not a power of two).

    p = the largest power of two <= n. Ranks r >= p first send x to rank r - p, which keeps
    op(received, its own). Then for d = 1, 2, 4, ... < p: ranks r and r ^ d exchange their
    values and both keep op(value of the lower rank, value of the higher rank). Last, rank
    r - p sends the result to rank r for every r >= p. Each message is one DATA frame."""
    todo("recursive_doubling_allreduce")


def all_reduce(
    comm: Comm, x: np.ndarray, op: str = "sum", threshold_bytes: int = THRESHOLD_BYTES
) -> np.ndarray:
    """Task "small": recursive doubling for messages of fewer than threshold_bytes bytes
    (x.nbytes < threshold_bytes), the ring (default slice_elems) from there on."""
    todo("all_reduce")
