"""GIVEN: the latency picture of the README and the HTML report. Do not edit.

svg = latency_svg({"WAIT ioctl": {"p50_us": 80, ...}, "poll()": {...}})
"""

from __future__ import annotations

import math

KEYS = (("p50_us", "p50"), ("p90_us", "p90"), ("p99_us", "p99"), ("max_us", "max"))
COLOURS = ("#2b6cb0", "#4a90d9", "#8fb8e8", "#c9dcf2")


def latency_svg(rows: dict[str, dict[str, int]], title: str = "") -> str:
    """Horizontal bars of submit -> complete latency percentiles, log scale in microseconds."""
    width, left, bar, gap = 640, 110, 14, 10
    top = 40
    height = top + len(rows) * (4 * bar + gap) + 40
    hi = max([r.get(k, 1) for r in rows.values() for k, _ in KEYS] + [10])
    decades = max(1, math.ceil(math.log10(hi)))

    def x(us: float) -> float:
        return left + (width - left - 70) * math.log10(max(us, 1)) / decades

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="18" font-size="13">{title or "submit → complete latency"}</text>',
    ]
    for d in range(decades + 1):
        label = f"{10**d} µs" if d < 3 else f"{10 ** (d - 3)} ms" if d < 6 else f"{10 ** (d - 6)} s"
        out.append(
            f'<line x1="{x(10**d):.1f}" y1="{top - 6}" x2="{x(10**d):.1f}" y2="{height - 30}" '
            'stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{x(10**d):.1f}" y="{height - 16}" text-anchor="middle">{label}</text>'
        )
    y = top
    for name, r in rows.items():
        out.append(f'<text x="{left - 8}" y="{y + 2 * bar + 4}" text-anchor="end">{name}</text>')
        for i, (key, label) in enumerate(KEYS):
            v = r.get(key, 0)
            out.append(
                f'<rect x="{left}" y="{y}" width="{max(x(v) - left, 1):.1f}" height="{bar - 2}" '
                f'fill="{COLOURS[i]}"/>'
            )
            out.append(f'<text x="{x(v) + 4:.1f}" y="{y + bar - 4}">{label} {v} µs</text>')
            y += bar
        y += gap
    out.append("</svg>")
    return "\n".join(out)
