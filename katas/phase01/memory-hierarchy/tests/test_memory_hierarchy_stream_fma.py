"""Public tests of tasks bandwidth and peak-flops: the STREAM kernels and their byte counts, FMA
chains; rates are compared with baselines measured in the same run, never with fixed numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.physics import cpu_peak, impossible

MB_OK, MB_BAD_ARGS = 0, -2
COPY, SCALE, ADD, TRIAD = range(4)
NAMES = ["copy", "scale", "add", "triad"]
BIG = 4 << 20  # doubles per array: 32 MiB, more than an L2 and most of a shared L3's share


def dptr(lib: Any, x: np.ndarray) -> Any:
    return lib.ffi.cast("double *", lib.ffi.from_buffer(x))


def fptr(lib: Any, x: np.ndarray) -> Any:
    return lib.ffi.cast("float *", lib.ffi.from_buffer(x))


def stream_call(lib: Any, kernel: int, a: Any, b: Any, c: Any, q: float, n: int) -> int:
    if kernel == COPY:
        return lib.stream_copy(c, a, n)
    if kernel == SCALE:
        return lib.stream_scale(b, c, q, n)
    if kernel == ADD:
        return lib.stream_add(c, a, b, n)
    return lib.stream_triad(a, b, c, q, n)


def chains(x0: np.ndarray, m: float, a: float, iters: int) -> np.ndarray:
    """x = x * m + a in float32, `iters` times (the product is exact in float64, so this differs
    from one fused rounding by at most an ulp now and then)."""
    x = np.asarray(x0, dtype=np.float32)
    for _ in range(iters):
        x = (x.astype(np.float64) * m + a).astype(np.float32)
    return x


# --------------------------------------------------------------------------- task bandwidth
@pytest.mark.parametrize("n", [0, 1, 7, 1000, 4099])
def test_bandwidth_kernels_compute_their_formulas(lib: Any, bench: Any, n: int) -> None:
    rng = np.random.default_rng(n)
    a, b, c = (rng.standard_normal(n + 1) for _ in range(3))
    q = 3.0
    written = {COPY: "c", SCALE: "b", ADD: "c", TRIAD: "a"}
    for kernel in (COPY, SCALE, ADD, TRIAD):
        before = {"a": a.copy(), "b": b.copy(), "c": c.copy()}
        rc = stream_call(lib, kernel, dptr(lib, a), dptr(lib, b), dptr(lib, c), q, n)
        bench.started(rc, f"stream_{NAMES[kernel]}")
        assert rc == MB_OK
        x = before
        expect = {
            COPY: x["a"][:n],
            SCALE: q * x["c"][:n],
            ADD: x["a"][:n] + x["b"][:n],
            TRIAD: x["b"][:n] + q * x["c"][:n],
        }[kernel]
        name = written[kernel]
        out = {"a": a, "b": b, "c": c}[name]
        np.testing.assert_allclose(
            out[:n], expect, rtol=1e-14, err_msg=f"stream_{NAMES[kernel]}: {name} is wrong"
        )
        assert out[n] == x[name][n], f"stream_{NAMES[kernel]} wrote past element n-1 of {name}"
        for other in "abc":
            if other != name:
                assert np.array_equal({"a": a, "b": b, "c": c}[other], x[other]), (
                    f"stream_{NAMES[kernel]} changed {other}: it should only write {name}"
                )


def test_bandwidth_bytes_of_copy_and_scale(lib: Any, bench: Any) -> None:
    bench.started(lib.stream_bytes(COPY, 10), "stream_bytes")
    for kernel in (COPY, SCALE):
        for n in (0, 1, 1000, 10**10):
            got = lib.stream_bytes(kernel, n)
            assert got == 16 * n, (
                f"stream_bytes({NAMES[kernel]}, {n}) = {got}: one array read, one written, 8 bytes each"
            )
    for kernel, n in [(-1, 10), (4, 10), (COPY, -1)]:
        assert lib.stream_bytes(kernel, n) == MB_BAD_ARGS, f"stream_bytes({kernel}, {n})"
        assert lib.stream_traffic_bytes(kernel, n) == MB_BAD_ARGS, (
            f"stream_traffic_bytes({kernel}, {n})"
        )


def test_bandwidth_traffic_adds_a_read_for_ownership(lib: Any, bench: Any) -> None:
    bench.started(lib.stream_traffic_bytes(COPY, 10), "stream_traffic_bytes")
    for kernel in (COPY, SCALE, ADD, TRIAD):
        for n in (0, 3, 1 << 20):
            extra = lib.stream_traffic_bytes(kernel, n) - lib.stream_bytes(kernel, n)
            assert extra == 8 * n, (
                f"{NAMES[kernel]}, n={n}: the traffic should exceed STREAM's count by one read "
                f"of the one written array (8n = {8 * n} bytes), not {extra}"
            )


@pytest.mark.kata_budget  # a measurement: it runs alone, not beside other tests under -n
def test_bandwidth_bandwidth_of_this_machine(
    lib: Any, bench: Any, kata_metrics: dict[str, Any]
) -> None:
    """Each kernel's bandwidth (STREAM's count of bytes over your time) against numpy's copy of
    the same arrays, run in turn with it: within a generous band of it."""
    a, b, c = np.full(BIG, 1.0), np.full(BIG, 2.0), np.full(BIG, 0.5)
    pa, pb, pc = dptr(lib, a), dptr(lib, b), dptr(lib, c)
    rates = {}
    for kernel in (COPY, SCALE, ADD, TRIAD):
        bench.started(stream_call(lib, kernel, pa, pb, pc, 0.5, 16), f"stream_{NAMES[kernel]}")
        nbytes = bench.started(lib.stream_bytes(kernel, BIG), "stream_bytes")
        mine = lambda k=kernel: stream_call(lib, k, pa, pb, pc, 0.5, BIG)  # noqa: E731
        for _ in range(3):  # a busy machine can upset one measurement; three chances
            ratio = nbytes / (16 * BIG) * bench.paired(mine, lambda: np.copyto(c, a))
            if 0.4 <= ratio <= 2.5:
                break
        t_mine, t_base = bench.interleaved(mine, lambda: np.copyto(c, a), rounds=3)
        rates[NAMES[kernel]] = {
            "GB/s": round(nbytes / t_mine / 1e9, 2),
            "vs numpy copy": round(ratio, 2),
        }
        # Faster than this machine's cores can load and store: the kernel skipped the bytes.
        why = impossible(cpu_peak(), bytes_moved=nbytes, seconds=t_mine)
        assert why is None, f"stream_{NAMES[kernel]} over {BIG} doubles: {why}"
        assert 0.4 <= ratio <= 2.5, (
            f"stream_{NAMES[kernel]}: {nbytes / t_mine / 1e9:.2f} GB/s by your byte count, "
            f"numpy's copy {16 * BIG / t_base / 1e9:.2f} GB/s: {ratio:.2f}x (the median of "
            "rounds timed in turn), outside 0.4x..2.5x"
        )
    kata_metrics["bandwidth"] = rates


# --------------------------------------------------------------------------- task peak-flops
def test_peak_flops_chain_computes(lib: Any, bench: Any) -> None:
    for x, m, a, iters in [(1.0, 0.5, 1.0, 0), (1.0, 0.5, 1.0, 1), (3.0, 0.999, 0.25, 1000)]:
        got = bench.started(lib.fma_chain(x, m, a, iters), "fma_chain")
        want = float(chains(np.float32([x]), m, a, iters)[0])
        assert got == pytest.approx(want, rel=1e-5), f"fma_chain({x}, {m}, {a}, {iters})"


def test_peak_flops_peak_runs_independent_chains(lib: Any, bench: Any) -> None:
    out = np.full(256, np.nan, dtype=np.float32)
    x0, m, a, iters = 1.0, 0.99, 0.25, 100
    k = bench.started(lib.fma_peak(fptr(lib, out), x0, m, a, iters), "fma_peak")
    assert 1 <= k <= 256, f"fma_peak returned K = {k}: 1 <= K <= FMA_MAX_ACCUMULATORS"
    want = chains(x0 + np.arange(k, dtype=np.float32), m, a, iters)
    np.testing.assert_allclose(
        out[:k], want, rtol=1e-5, err_msg="out[k] should be chain k's result"
    )


@pytest.mark.kata_budget  # a measurement: it runs alone, not beside other tests under -n
def test_peak_flops_peak_beats_one_chain(
    lib: Any, bench: Any, kata_metrics: dict[str, Any]
) -> None:
    """One chain waits for each FMA (latency); independent vector chains keep the FMA units busy
    (throughput). 8 scalar chains can be at most ~8x faster; at least 16x needs vectors."""
    out = np.zeros(256, dtype=np.float32)
    iters = 2_000_000
    k = bench.started(lib.fma_peak(fptr(lib, out), 1.0, 0.999, 0.001, 1), "fma_peak")
    bench.started(lib.fma_chain(1.0, 0.999, 0.001, 1), "fma_chain")
    run_peak = lambda: lib.fma_peak(fptr(lib, out), 1.0, 0.999, 0.001, iters)  # noqa: E731
    run_chain = lambda: lib.fma_chain(1.0, 0.999, 0.001, iters)  # noqa: E731
    for _ in range(3):  # a busy machine can upset one measurement; three chances
        speedup = k * bench.paired(run_peak, run_chain)
        if speedup >= 16:
            break
    peak, chain = bench.interleaved(run_peak, run_chain, rounds=3)
    kata_metrics["chain GFLOP/s"] = round(2 * iters / chain / 1e9, 2)
    kata_metrics["peak GFLOP/s"] = round(2 * k * iters / peak / 1e9, 2)
    kata_metrics["speedup"] = round(speedup, 1)
    bound = cpu_peak()
    kata_metrics["this CPU's bound GFLOP/s"] = round(bound.flops_per_s / 1e9, 1)
    why = impossible(bound, flops=2 * k * iters, seconds=peak)  # more than the FMA units can do
    assert why is None, f"fma_peak ({k} chains, {iters} iterations): {why}"
    assert speedup >= 16, (
        f"fma_peak ({k} chains) does {2 * k * iters / peak / 1e9:.2f} GFLOP/s, one chain "
        f"{2 * iters / chain / 1e9:.2f}: only {speedup:.1f}x faster, 16x expected"
    )
