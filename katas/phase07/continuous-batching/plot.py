"""GIVEN (not graded): the latency-throughput picture, as SVG.

Two panels share the x axis, output throughput (tokens/s): on the left the 99th percentile of
TTFT (seconds, log scale), on the right the 99th percentile of TPOT (milliseconds). Each policy
is one line through its points, one point per request rate: as the load grows a policy moves
right (more throughput) until it saturates, and then only up (more latency).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape

COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e")
W, H, PAD_L, PAD_B, GAP = 330, 240, 58, 40, 40


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    step = (hi - lo) / (n - 1)
    return [lo + i * step for i in range(n)]


def latency_throughput_svg(
    series: Mapping[str, Sequence[tuple[float, float, float]]], title: str = ""
) -> str:
    """`series`: policy name -> [(throughput tok/s, p99 TTFT s, p99 TPOT s), ...] by rate."""
    pts = [p for s in series.values() for p in s]
    if not pts:
        raise ValueError("latency_throughput_svg: no points")
    x_hi = max(p[0] for p in pts) * 1.08 or 1.0
    t_lo = math.log10(max(min(p[1] for p in pts), 1e-3)) - 0.2
    t_hi = math.log10(max(max(p[1] for p in pts), 1e-3)) + 0.2
    p_hi = max(p[2] for p in pts) * 1e3 * 1.1 or 1.0
    width, height = PAD_L + 2 * W + GAP + 20, H + PAD_B + 80
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<text x="10" y="18" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    panels = [
        ("p99 TTFT (s, log)", lambda p: math.log10(max(p[1], 1e-3)), t_lo, t_hi, lambda v: f"{10**v:.3g}"),
        ("p99 TPOT (ms)", lambda p: p[2] * 1e3, 0.0, p_hi, lambda v: f"{v:.0f}"),
    ]  # fmt: skip
    for k, (label, yof, y_lo, y_hi, fmt) in enumerate(panels):
        x0, y0 = PAD_L + k * (W + GAP), 40
        sx = lambda x, x0=x0: x0 + W * x / x_hi
        sy = lambda y, y0=y0, y_lo=y_lo, y_hi=y_hi: y0 + H - H * (y - y_lo) / ((y_hi - y_lo) or 1)
        out.append(f'<rect x="{x0}" y="{y0}" width="{W}" height="{H}" fill="none" stroke="#444"/>')
        out.append(f'<text x="{x0 + W / 2}" y="{y0 - 6}" text-anchor="middle">{label}</text>')
        for v in _ticks(y_lo, y_hi):
            out.append(f'<text x="{x0 - 4}" y="{sy(v) + 4:.1f}" text-anchor="end">{fmt(v)}</text>')
        for v in _ticks(0, x_hi):
            out.append(
                f'<text x="{sx(v):.1f}" y="{y0 + H + 14}" text-anchor="middle">{v:.0f}</text>'
            )
        out.append(
            f'<text x="{x0 + W / 2}" y="{y0 + H + 30}" text-anchor="middle">'
            "output throughput (tokens/s)</text>"
        )
        for i, s in enumerate(series.values()):
            colour = COLOURS[i % len(COLOURS)]
            xy = [(sx(p[0]), sy(yof(p))) for p in s]
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>'
            )
            for x, y in xy:
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
    lx = PAD_L
    for i, name in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        out.append(f'<rect x="{lx}" y="{height - 22}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{lx + 16}" y="{height - 12}">{escape(name)}</text>')
        lx += 30 + 7 * len(name)
    out.append("</svg>")
    return "".join(out)
