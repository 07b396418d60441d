"""busbw against message size as an SVG picture (nccl-tests' measure): one log-log panel per
rank count, a line per algorithm, the same run's link bandwidth dashed. Used by the
ring-allreduce kata's tests (into the report, through ``kata_metrics["svg"]``) and by
harness/benchmarks/bench_ring_allreduce.py (the kata's README figure)."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

ALGORITHMS = ("ring_allreduce", "recursive_doubling_allreduce", "all_reduce")
COLOURS = {
    "ring_allreduce": "#1f77b4",
    "recursive_doubling_allreduce": "#d62728",
    "all_reduce": "#2ca02c",
    "link": "#555555",
}
LABELS = {
    "ring_allreduce": "ring",
    "recursive_doubling_allreduce": "recursive doubling",
    "all_reduce": "all_reduce (threshold)",
    "link": "link bandwidth at the largest size (same run)",
}


def human(nbytes: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:g} {unit}"
    return f"{nbytes} B"


def busbw_svg(rows: dict[int, list[dict]], title: str) -> str:
    """One log-log panel per N: busbw (B/s, drawn in MB/s) of each algorithm in ALGORITHMS that
    the rows have, and the link bandwidth (row key "link") at the largest size."""
    algorithms = [a for a in ALGORITHMS if all(a in r for rs in rows.values() for r in rs)]
    w, h, pad_l, pad_t, gap = 300, 240, 60, 46, 56
    values = [r[k] for rs in rows.values() for r in rs for k in algorithms]
    values += [rs[-1]["link"] for rs in rows.values()]
    y_lo = math.floor(math.log10(max(min(values), 1.0) / 1e6))
    y_hi = math.ceil(math.log10(max(values) / 1e6))
    y_hi = max(y_hi, y_lo + 1)
    sizes = [r["bytes"] for r in next(iter(rows.values()))]
    x_lo, x_hi = math.log2(sizes[0]), math.log2(sizes[-1])
    width = pad_l + len(rows) * (w + gap) + 10
    height = pad_t + h + 90
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="18" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    for k, (n, rs) in enumerate(rows.items()):
        x0, y0 = pad_l + k * (w + gap), pad_t

        def sx(b: float, x0: float = x0) -> float:
            return x0 + w * (math.log2(b) - x_lo) / ((x_hi - x_lo) or 1)

        def sy(v: float, y0: float = y0) -> float:
            return y0 + h - h * (math.log10(max(v, 1.0) / 1e6) - y_lo) / (y_hi - y_lo)

        out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#444"/>')
        out.append(f'<text x="{x0 + w / 2}" y="{y0 - 6}" text-anchor="middle">N = {n}</text>')
        for e in range(y_lo, y_hi + 1):
            y = sy(10.0**e * 1e6)
            out.append(
                f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#ddd"/>'
                f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{10.0**e:g}</text>'
            )
        for b in sizes[::2]:
            out.append(
                f'<text x="{sx(b):.1f}" y="{y0 + h + 14}" text-anchor="middle">'
                f"{escape(human(b).replace(' ', ''))}</text>"
            )
        out.append(
            f'<text x="{x0 + w / 2}" y="{y0 + h + 30}" text-anchor="middle">message size</text>'
        )
        # The bound: what the links carried with the largest message (the probe's own latency, a
        # thread start per round, makes its small-message figures no bound at all).
        y = sy(rs[-1]["link"])
        out.append(
            f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="{COLOURS["link"]}" '
            'stroke-width="2" stroke-dasharray="5,4"/>'
        )
        for name in algorithms:
            pts = " ".join(f"{sx(r['bytes']):.1f},{sy(r[name]):.1f}" for r in rs)
            out.append(
                f'<polyline points="{pts}" fill="none" stroke="{COLOURS[name]}" stroke-width="2"/>'
            )
            out.extend(
                f'<circle cx="{sx(r["bytes"]):.1f}" cy="{sy(r[name]):.1f}" r="2.5" '
                f'fill="{COLOURS[name]}"/>'
                for r in rs
            )
    out.append(
        f'<text x="14" y="{pad_t + h / 2}" transform="rotate(-90 14 {pad_t + h / 2})" '
        'text-anchor="middle">busbw (MB/s, log)</text>'
    )
    lx = pad_l
    for name in ("link", *algorithms):
        out.append(
            f'<rect x="{lx}" y="{height - 24}" width="12" height="12" fill="{COLOURS[name]}"/>'
            f'<text x="{lx + 16}" y="{height - 14}">{escape(LABELS[name])}</text>'
        )
        lx += 36 + 6 * len(LABELS[name])
    out.append("</svg>")
    return "".join(out)
