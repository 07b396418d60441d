"""Public tests of tasks roofline (pure Python, exact) and your-roofline (your fma_sweep measured
on this machine and placed on its roofline, which the HTML report shows)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest

from harness.physics import cpu_peak, impossible

SVG = "{http://www.w3.org/2000/svg}"
MB_OK, MB_BAD_ARGS = 0, -2
PEAK, BW = 100e9, 10e9  # a machine with a ridge point at 10 FLOP/byte


def points(polyline: ET.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in polyline.get("points", "").split()]  # type: ignore[misc]


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg", f"the root element should be <svg xmlns={SVG[1:-1]}>"
    return root


# --------------------------------------------------------------------------- task roofline
def test_roofline_intensity_and_ridge(roofline: Any) -> None:
    assert roofline.arithmetic_intensity(100.0, 50.0) == 2.0
    assert roofline.arithmetic_intensity(0.0, 8.0) == 0.0
    assert roofline.ridge_point(PEAK, BW) == pytest.approx(10.0)
    for bad in (0.0, -8.0):
        with pytest.raises(ValueError):
            roofline.arithmetic_intensity(1.0, bad)
    for peak, bw in [(0.0, BW), (PEAK, 0.0), (-1.0, BW)]:
        with pytest.raises(ValueError):
            roofline.ridge_point(peak, bw)


def test_roofline_attainable_below_and_above_the_ridge(roofline: Any) -> None:
    assert roofline.attainable(1.0, PEAK, BW) == pytest.approx(10e9)  # memory roof: 1 x 10 GB/s
    assert roofline.attainable(10.0, PEAK, BW) == pytest.approx(PEAK)  # the ridge point
    assert roofline.attainable(50.0, PEAK, BW) == pytest.approx(PEAK)  # compute roof
    assert roofline.attainable(0.0, PEAK, BW) == 0.0
    with pytest.raises(ValueError):
        roofline.attainable(-1.0, PEAK, BW)


def test_roofline_bound_flips_at_the_ridge(roofline: Any) -> None:
    assert roofline.bound(0.25, PEAK, BW) == "memory"
    assert roofline.bound(9.99, PEAK, BW) == "memory"
    assert roofline.bound(10.0, PEAK, BW) == "compute"
    assert roofline.bound(1e3, PEAK, BW) == "compute"


def test_roofline_place_a_compute_bound_kernel(roofline: Any) -> None:
    k = roofline.Kernel("dgemm-ish", flops=8e9, bytes=1e8, seconds=0.2)  # 80 FLOP/B, 40 GFLOP/s
    p = roofline.place(k, PEAK, BW)
    assert p.kernel == k
    assert p.ai == pytest.approx(80.0)
    assert p.achieved == pytest.approx(40e9)
    assert p.attainable == pytest.approx(PEAK)
    assert p.efficiency == pytest.approx(0.4)
    assert p.bound == "compute"


def test_roofline_svg_draws_the_roof_and_the_kernels(roofline: Any) -> None:
    kernels = [
        roofline.Kernel("triad", flops=2e8, bytes=2.4e9, seconds=0.3),
        roofline.Kernel("blocked", flops=6.4e10, bytes=1e9, seconds=1.0),
    ]
    root = parse(roofline.roofline_svg(PEAK, BW, kernels, title="test machine"))
    roofs = [e for e in root.iter(f"{SVG}polyline") if "roof" in e.get("class", "").split()]
    assert len(roofs) == 1, 'one <polyline class="roof">'
    (x0, y0), (x1, y1), (x2, y2) = points(roofs[0])
    assert x0 < x1 < x2, "the roof's vertices go left to right"
    assert y1 == pytest.approx(y2, abs=0.01), "the compute roof is flat"
    assert y0 > y1, "the memory roof rises to the ridge point (SVG's y grows downwards)"
    width, height = float(root.get("width", 0)), float(root.get("height", 0))
    dots = [e for e in root.iter(f"{SVG}circle") if "kernel" in e.get("class", "").split()]
    assert len(dots) == len(kernels), 'one <circle class="kernel"> per kernel'
    for dot, k in zip(dots, kernels, strict=True):
        title = dot.find(f"{SVG}title")
        assert title is not None and (title.text or "").startswith(k.name)
        assert 0 < float(dot.get("cx", -1)) < width and 0 < float(dot.get("cy", -1)) < height
    texts = " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))
    for label in ("arithmetic intensity (FLOP/byte)", "performance (GFLOP/s)", "triad", "blocked"):
        assert label in texts, f"no text label {label!r}"
    assert float(dots[0].get("cx")) < float(dots[1].get("cx")), "lower intensity is further left"


# --------------------------------------------------------------------------- task your-roofline
@pytest.mark.parametrize("rounds", [0, 1, 5])
def test_your_roofline_fma_sweep_computes(lib: Any, bench: Any, rounds: int) -> None:
    n = 1000 + 7  # not a multiple of any vector block
    x = np.linspace(-2.0, 2.0, n + 1, dtype=np.float32)
    want = x[:n].astype(np.float64)
    for _ in range(rounds):
        want = (want * 0.9 + 0.5).astype(np.float32).astype(np.float64)
    guard = x[n]
    rc = bench.started(
        lib.fma_sweep(lib.ffi.cast("float *", lib.ffi.from_buffer(x)), n, 0.9, 0.5, rounds),
        "fma_sweep",
    )
    assert rc == MB_OK
    np.testing.assert_allclose(
        x[:n], want, rtol=1e-5, atol=1e-6, err_msg=f"fma_sweep, {rounds} rounds"
    )
    assert x[n] == guard, "fma_sweep wrote past element n-1"
    assert (
        lib.fma_sweep(lib.ffi.cast("float *", lib.ffi.from_buffer(x)), n, 0.9, 0.5, -1)
        == MB_BAD_ARGS
    )


@pytest.mark.kata_budget  # a measurement: it runs alone, not beside other tests under -n
def test_your_roofline_kernels_on_your_roofline(
    lib: Any, bench: Any, roofline: Any, kata_metrics: dict[str, Any]
) -> None:
    """This machine's roofline: the peak from your fma_peak, the memory roof from your triad
    (bytes that cross the bus: stream_traffic_bytes), and your fma_sweep at intensities from
    1/4 to 64 FLOP/byte. The low-intensity sweep must be memory-bound and move data at a fair
    share of the triad's bandwidth; the high-intensity one must get near the compute roof."""
    n_triad, n = 4 << 20, 4 << 20
    out = np.zeros(256, dtype=np.float32)
    pout = lib.ffi.cast("float *", lib.ffi.from_buffer(out))
    iters = 1_000_000
    k = bench.started(lib.fma_peak(pout, 1.0, 0.999, 0.001, 1), "fma_peak")
    a, b, c = np.full(n_triad, 1.0), np.full(n_triad, 2.0), np.full(n_triad, 0.5)
    pa, pb, pc = (lib.ffi.cast("double *", lib.ffi.from_buffer(v)) for v in (a, b, c))
    traffic = bench.started(lib.stream_traffic_bytes(3, n_triad), "stream_traffic_bytes")
    x = np.ones(n, dtype=np.float32)
    px = lib.ffi.cast("float *", lib.ffi.from_buffer(x))
    bench.started(lib.fma_sweep(px, 16, 0.999, 0.001, 1), "fma_sweep")

    # Each call a few ms: the compute-bound sweeps get fewer elements (the same intensity).
    sweep_n = {r: min(n, (1 << 26) // r) for r in (1, 4, 16, 64, 256)}
    calls = [
        lambda: lib.fma_peak(pout, 1.0, 0.999, 0.001, iters),
        lambda: lib.stream_triad(pa, pb, pc, 0.5, n_triad),
        lambda: lib.stream_scale(pb, pc, 0.5, n_triad),
        lambda: lib.stream_add(pc, pa, pb, n_triad),
    ] + [lambda r=r, m=m: lib.fma_sweep(px, m, 0.999, 0.001, r) for r, m in sweep_n.items()]
    for _ in range(3):  # a busy machine can upset one measurement; three chances
        t_peak, t_triad, t_scale, t_add, *t_sweeps = bench.fastest(calls)
        peak, bw = 2 * k * iters / t_peak, traffic / t_triad
        kernels = [roofline.Kernel("triad", 2.0 * n_triad, float(traffic), t_triad)]
        for name, kernel, t in [("scale", 1, t_scale), ("add", 2, t_add)]:
            # 1 FLOP per element each; copy has none to plot
            nbytes = float(lib.stream_traffic_bytes(kernel, n_triad))
            kernels.append(roofline.Kernel(name, 1.0 * n_triad, nbytes, t))
        for (rounds, m), t in zip(sweep_n.items(), t_sweeps, strict=True):
            kernels.append(roofline.Kernel(f"fma_sweep x{rounds}", 2.0 * rounds * m, 8.0 * m, t))
        placed = [roofline.place(kern, peak, bw) for kern in kernels]
        low, high = next(p for p in placed if p.kernel.name == "fma_sweep x1"), placed[-1]
        problems = []
        for why in (  # faster than this machine can be: the kernel skipped work
            impossible(cpu_peak(), flops=2 * k * iters, seconds=t_peak),
            impossible(cpu_peak(), bytes_moved=traffic, seconds=t_triad),
        ):
            if why:
                problems.append(f"fma_peak/triad: {why}.")
        if low.bound != "memory" or low.kernel.bytes / low.kernel.seconds < 0.3 * bw:
            problems.append(
                f"fma_sweep x1 ({low.ai:g} FLOP/byte) should be memory-bound and move at least "
                f"0.3x the triad's {bw / 1e9:.1f} GB/s; it moves "
                f"{low.kernel.bytes / low.kernel.seconds / 1e9:.1f} GB/s"
            )
        if high.achieved < 0.3 * peak:
            problems.append(
                f"fma_sweep x256 ({high.ai:g} FLOP/byte) reaches {high.achieved / 1e9:.1f} "
                f"GFLOP/s, under 0.3x your peak of {peak / 1e9:.1f}"
            )
        if not problems:
            break
    svg = roofline.roofline_svg(peak, bw, kernels, title="The roofline of this machine")
    try:  # the report shows it as an image: only well-formed SVG gets there
        parse(svg)
    except ET.ParseError as e:
        raise AssertionError(f"roofline_svg() returned SVG that is not well-formed XML: {e}") from e
    kata_metrics["svg"] = svg
    kata_metrics["label"] = (
        "your kernels on this machine's roofline: the compute roof is your fma_peak, the memory "
        "roof your triad's bus traffic"
    )
    kata_metrics["peak GFLOP/s"] = round(peak / 1e9, 2)
    kata_metrics["triad GB/s (bus)"] = round(bw / 1e9, 2)
    kata_metrics["ridge FLOP/byte"] = round(roofline.ridge_point(peak, bw), 2)
    kata_metrics["efficiency"] = {p.kernel.name: round(p.efficiency, 2) for p in placed}
    assert math.isfinite(peak) and not problems, " ".join(problems)
