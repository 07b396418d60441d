"""GIVEN: a timeline of a run on the logical clock, one row per stream (SVG)."""

from __future__ import annotations

from html import escape

PALETTE = ("#4878a8", "#e0a040", "#6aa84f", "#c0504d", "#8064a2", "#4bacc6", "#f79646", "#999")


def timeline_svg(rows: dict[str, list[tuple[int, int, str]]], title: str, width: int = 760) -> str:
    """rows: stream label -> [(start, end, label)] of its kernels."""
    end = max((e for ops in rows.values() for _, e, _ in ops), default=1) or 1
    left, row, top = 110, 22, 36
    scale = (width - left - 10) / end
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{top + row * len(rows) + 30}" font-family="sans-serif" font-size="11">',
        f'<text x="8" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for i, (name, ops) in enumerate(rows.items()):
        y = top + i * row
        out.append(f'<text x="8" y="{y + 13}">{escape(name)}</text>')
        for start, stop, label in ops:
            x, w = left + start * scale, max((stop - start) * scale, 1)
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 6}" '
                f'fill="{PALETTE[i % len(PALETTE)]}" stroke="white"><title>{escape(label)}: '
                f"{start}..{stop}</title></rect>"
            )
            if w > 18:
                out.append(
                    f'<text x="{x + 3:.1f}" y="{y + 12}" fill="white">{escape(label)}</text>'
                )
    y = top + row * len(rows) + 16
    out.append(f'<text x="{left}" y="{y}">0</text>')
    out.append(f'<text x="{width - 40}" y="{y}">{end} ticks</text>')
    out.append("</svg>")
    return "\n".join(out)
