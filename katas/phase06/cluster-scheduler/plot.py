"""GIVEN (not graded): the picture of a run, as SVG.

Two panels share the x axis, time (hours): on top the share of the cluster's GPUs running jobs,
below the share that is free but fragmented for the queue's pod sizes (metrics.fragmentation).
One line per policy, drawn as steps (a value holds until the next decision).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape

COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e")
W, H, PAD_L, GAP = 640, 150, 58, 46


def _steps(points: Sequence[tuple[float, float]], sx: object, sy: object, limit: int) -> str:
    # Keep at most `limit` points: each bucket at its first time with its largest value (spikes
    # stay visible), and the very last point (where the run ends).
    if len(points) > limit:
        size = -(-len(points) // limit)
        buckets = [points[i : i + size] for i in range(0, len(points), size)]
        points = [(b[0][0], max(v for _, v in b)) for b in buckets] + [points[-1]]
    out, prev = [], None
    for t, v in points:
        x, y = sx(t), sy(v)  # type: ignore[operator]
        if prev is not None:
            out.append(f"{x:.1f},{prev:.1f}")
        out.append(f"{x:.1f},{y:.1f}")
        prev = y
    return " ".join(out)


def timeline_svg(
    series: Mapping[str, tuple[Sequence[tuple[float, float]], Sequence[tuple[float, float]]]],
    title: str = "",
    limit: int = 300,
) -> str:
    """`series`: policy -> ([(t s, running share 0..1)], [(t s, fragmented share 0..1)])."""
    pts = [p for pair in series.values() for s in pair for p in s]
    if not pts:
        raise ValueError("timeline_svg: no points")
    t_hi = max(p[0] for p in pts) / 3600 or 1.0
    f_hi = max((p[1] for pair in series.values() for p in pair[1]), default=0.0) * 1.1 or 0.1
    width, height = PAD_L + W + 20, 40 + 2 * H + GAP + 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<text x="10" y="18" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    panels = [
        ("GPUs running jobs (%)", 0, 1.0),
        ("free GPUs fragmented for the queue (%)", 1, f_hi),
    ]
    for k, (label, which, y_hi) in enumerate(panels):
        y0 = 40 + k * (H + GAP)
        sx = lambda t: PAD_L + W * (t / 3600) / t_hi
        sy = lambda v, y0=y0, y_hi=y_hi: y0 + H - H * v / y_hi
        out.append(
            f'<rect x="{PAD_L}" y="{y0}" width="{W}" height="{H}" fill="none" stroke="#444"/>'
        )
        out.append(f'<text x="{PAD_L + W / 2}" y="{y0 - 6}" text-anchor="middle">{label}</text>')
        for i in range(5):
            v = y_hi * i / 4
            label = f"{100 * v:.1f}" if y_hi < 0.2 else f"{100 * v:.0f}"
            out.append(
                f'<text x="{PAD_L - 4}" y="{sy(v) + 4:.1f}" text-anchor="end">{label}</text>'
            )
        for i in range(6):
            t = t_hi * i / 5
            out.append(
                f'<text x="{PAD_L + W * i / 5:.1f}" y="{y0 + H + 14}" text-anchor="middle">{t:.1f}</text>'
            )
        for i, pair in enumerate(series.values()):
            colour = COLOURS[i % len(COLOURS)]
            path = _steps(pair[which], sx, sy, limit)
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.3"/>'
            )
    out.append(
        f'<text x="{PAD_L + W / 2}" y="{40 + 2 * H + GAP + 30}" text-anchor="middle">time (hours)</text>'
    )
    lx = PAD_L
    for i, name in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        out.append(f'<rect x="{lx}" y="{height - 16}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{lx + 16}" y="{height - 6}">{escape(name)}</text>')
        lx += 30 + 7 * len(name)
    out.append("</svg>")
    return "".join(out)
