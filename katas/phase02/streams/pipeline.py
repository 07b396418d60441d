"""YOUR FILE (task "pipeline", gpu tier). Run schedule.plan on a real GPU with CuPy streams.

The tests pass the CuPy module as `cp` (so this file imports no CUDA library itself), the
kernel of work.cu as a cupy.RawKernel, and x and y in pinned (page-locked) host memory: an
asynchronous copy from pageable memory is not asynchronous at all.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness import todo

from .schedule import plan  # noqa: F401 - the order to issue the operations in


def run(
    cp: Any,
    kernel: Any,
    x: np.ndarray,
    y: np.ndarray,
    n_chunks: int,
    n_streams: int,
    iters: int,
) -> None:
    """y[:] = work(x) on the GPU, chunk by chunk over n_streams streams, in the order
    plan(x.size, n_chunks, n_streams) gives. Returns when y holds the result."""
    todo("pipeline.run")
