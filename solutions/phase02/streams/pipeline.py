"""Run schedule.plan on a real GPU with CuPy streams (reference)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .schedule import plan

BLOCK = 256


def run(
    cp: Any,
    kernel: Any,
    x: np.ndarray,
    y: np.ndarray,
    n_chunks: int,
    n_streams: int,
    iters: int,
) -> None:
    """y[:] = work(x), chunk by chunk over n_streams streams, in plan()'s order."""
    rt = cp.cuda.runtime
    d_x = cp.empty(x.size, dtype=np.float32)
    d_y = cp.empty(y.size, dtype=np.float32)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    size = x.itemsize
    for op in plan(x.size, n_chunks, n_streams):
        s = streams[op.stream]
        count = op.stop - op.start
        offset = op.start * size
        if op.kind == "h2d":  # pinned x: a real asynchronous copy on stream s
            rt.memcpyAsync(
                d_x.data.ptr + offset, x.ctypes.data + offset, count * size,
                rt.memcpyHostToDevice, s.ptr,
            )  # fmt: skip
        elif op.kind == "kernel":
            with s:  # CuPy launches on the current stream
                grid = ((count + BLOCK - 1) // BLOCK,)
                kernel(
                    grid, (BLOCK,),
                    (d_x[op.start : op.stop], d_y[op.start : op.stop], np.int32(count),
                     np.int32(iters)),
                )  # fmt: skip
        else:
            rt.memcpyAsync(
                y.ctypes.data + offset, d_y.data.ptr + offset, count * size,
                rt.memcpyDeviceToHost, s.ptr,
            )  # fmt: skip
    for s in streams:
        s.synchronize()
