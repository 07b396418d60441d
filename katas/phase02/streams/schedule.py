"""YOUR FILE. The plan of a chunked copy/kernel pipeline over several CUDA streams.

An array of n floats goes to the device, through a kernel and back. Split into n_chunks
contiguous chunks, chunk i's three operations (copy in, kernel, copy out) go to stream
i % n_streams; operations of one stream run in order, those of different streams may overlap.
See README.md and timeline.py (the model the tests run your plan on).
"""

from __future__ import annotations

from typing import NamedTuple

from harness import todo

KINDS = ("h2d", "kernel", "d2h")


class Op(NamedTuple):
    stream: int  # 0 .. n_streams - 1
    kind: str  # "h2d" (copy x[start:stop] in), "kernel", "d2h" (copy y[start:stop] out)
    start: int
    stop: int


def chunk_bounds(n: int, n_chunks: int) -> list[tuple[int, int]]:
    """Task "plan": `n_chunks` contiguous (start, stop) ranges covering range(n) in order, sizes
    differing by at most one (the longer ones first). ValueError unless 1 <= n_chunks <= n."""
    todo("chunk_bounds")


def plan(n: int, n_chunks: int, n_streams: int) -> list[Op]:
    """Task "plan": the operations in the order the host issues them: for each chunk i in
    order, h2d, kernel, d2h, all three on stream i % n_streams. ValueError if n_streams < 1."""
    todo("plan")


def pipelined_time(h2d_s: float, kernel_s: float, d2h_s: float, n_chunks: int) -> float:
    """Task "model": the makespan of the pipeline on timeline.py's model with enough streams
    (one per chunk) and no overhead. h2d_s, kernel_s, d2h_s: each stage over the WHOLE array;
    a chunk's stage takes 1 / n_chunks of it. ValueError if n_chunks < 1."""
    todo("pipelined_time")
