"""Public tests of the streams kata's pipeline task (gpu tier): pipeline.run on a real GPU with
CuPy. Skipped without the gpu tier, with the probe's reason.

- test_pipeline_results: y equals the serial baseline's (the same kernel, one stream, one
  chunk) exactly, for a size that does not divide into the chunks.
- test_pipeline_overlaps: 64 M floats (256 MiB each way), `iters` chosen so that the kernel
  takes about as long as the copy in. Your pipeline (8 chunks, 4 streams) must take at most
  0.75 x the serial baseline's wall time; three balanced stages allow 10 / 24 = 0.42. Each
  timed run gets a fresh x and a NaN-filled y (outside the timer) and must give the serial
  result.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

BLOCK = 256
LIMIT = 0.75  # pipelined / serial wall time


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy", reason="the pipeline task needs CuPy: pip install cupy")


@pytest.fixture(scope="module")
def kernel(cp, kata):
    return cp.RawKernel(kata.source("work.cu").read_text(encoding="utf-8"), "work")


@pytest.fixture(scope="module")
def pipeline(kata):
    return kata.module("pipeline")


def pinned(n: int, fill: float | None = None) -> np.ndarray:
    """A float32 array in page-locked host memory (what asynchronous copies need)."""
    import cupyx

    a = cupyx.empty_pinned((n,), dtype=np.float32)
    if fill is None:
        a[...] = np.random.default_rng(n).random(n, dtype=np.float32)
    else:
        a.fill(fill)
    return a


def serial(cp, kernel, x: np.ndarray, y: np.ndarray, iters: int) -> list[float]:
    """The baseline: copy in, kernel, copy out, one after another on one stream. Returns the
    three stages' times in seconds (CUDA events)."""
    rt, n = cp.cuda.runtime, x.size
    d_x, d_y = cp.empty(n, dtype=np.float32), cp.empty(n, dtype=np.float32)
    s = cp.cuda.Stream(non_blocking=True)
    ev = [cp.cuda.Event() for _ in range(4)]
    ev[0].record(s)
    rt.memcpyAsync(d_x.data.ptr, x.ctypes.data, x.nbytes, rt.memcpyHostToDevice, s.ptr)
    ev[1].record(s)
    with s:
        kernel(((n + BLOCK - 1) // BLOCK,), (BLOCK,), (d_x, d_y, np.int32(n), np.int32(iters)))
    ev[2].record(s)
    rt.memcpyAsync(y.ctypes.data, d_y.data.ptr, y.nbytes, rt.memcpyDeviceToHost, s.ptr)
    ev[3].record(s)
    s.synchronize()
    return [cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) / 1e3 for i in range(3)]


def best_wall_s(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


@pytest.mark.parametrize(("n", "n_chunks", "n_streams"), [(1_000_003, 7, 2), (4096, 4, 4)])
def test_pipeline_results(cp, kernel, pipeline, n, n_chunks, n_streams):
    x, want, got = pinned(n), pinned(n, np.nan), pinned(n, np.nan)
    iters = 16
    serial(cp, kernel, x, want, iters)
    v = x[:1000].copy()  # the baseline itself, against numpy (FMA vs two roundings: 1e-5)
    for _ in range(iters):
        v = v * np.float32(0.999) + np.float32(0.001)
    np.testing.assert_allclose(want[:1000], v, rtol=1e-5)
    pipeline.run(cp, kernel, x, got, n_chunks, n_streams, iters)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"run(n={n}, n_chunks={n_chunks}, n_streams={n_streams}): {bad.size} of {n} elements "
        f"differ from the serial result, first y[{bad[0]}] = {got[bad[0]]}, want {want[bad[0]]} "
        "(NaN: never copied back -- did every stream finish before run returned?)"
    )


def test_pipeline_overlaps(cp, kernel, pipeline, kata_metrics):
    n = 1 << 26
    x, want, got = pinned(n), pinned(n, np.nan), pinned(n, np.nan)
    serial(cp, kernel, x, want, 1)  # warm-up: the kernel compiles on its first launch
    iters = 64
    for _ in range(2):  # make the kernel take about as long as the copy in
        h2d_s, kernel_s, _ = serial(cp, kernel, x, want, iters)
        iters = int(np.clip(round(iters * h2d_s / kernel_s), 1, 1_000_000))
    stages = serial(cp, kernel, x, want, iters)
    t_serial = best_wall_s(lambda: serial(cp, kernel, x, want, iters))
    pipeline.run(cp, kernel, x, got, 8, 4, iters)  # warm-up: streams, memory pool
    np.testing.assert_array_equal(got, want, err_msg="pipelined result vs serial")
    t_pipe = float("inf")
    for seed in range(3):  # each timed run on fresh x and a NaN y, checked against the serial one
        x[...] = np.random.default_rng(seed).random(n, dtype=np.float32)
        serial(cp, kernel, x, want, iters)
        got.fill(np.nan)
        t0 = time.perf_counter()
        pipeline.run(cp, kernel, x, got, 8, 4, iters)
        t_pipe = min(t_pipe, time.perf_counter() - t0)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (
            f"run(n={n}, 8 chunks, 4 streams), timed run {seed + 1} on fresh x: {bad.size} "
            f"elements differ from the serial result, first y[{bad[0]}] = {got[bad[0]]}, want "
            f"{want[bad[0]]}"
        )
    a, b, c = (s / 8 for s in stages)
    ideal = a + b + c + 7 * max(a, b, c)
    kata_metrics.update(
        {
            "serial ms": round(t_serial * 1e3, 2),
            "pipelined ms": round(t_pipe * 1e3, 2),
            "h2d / kernel / d2h ms": " / ".join(f"{s * 1e3:.2f}" for s in stages),
            "model's pipelined ms": round(ideal * 1e3, 2),
            "speed-up": round(t_serial / t_pipe, 2),
        }
    )
    assert t_pipe <= LIMIT * t_serial, (
        f"8 chunks on 4 streams took {t_pipe * 1e3:.2f} ms, the serial baseline "
        f"{t_serial * 1e3:.2f} ms: {t_pipe / t_serial:.2f} x, budget {LIMIT} x (the model "
        f"predicts {ideal * 1e3:.2f} ms from the stages {kata_metrics['h2d / kernel / d2h ms']} ms)"
    )
