"""Given (not graded): the limits-bite table and the runtime's step times as SVG."""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape


def table_svg(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain table: one header row, then `rows`, left-aligned, monospace."""
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    cw, lh, pad = 7.6, 20, 10
    xs = [pad]
    for w in widths[:-1]:
        xs.append(xs[-1] + (w + 3) * cw)
    width = xs[-1] + (widths[-1] + 2) * cw + pad
    height = 34 + lh * (len(rows) + 1) + pad
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
        'font-family="monospace" font-size="13">',
        f'<rect width="100%" height="100%" fill="#fff"/><text x="{pad}" y="20" '
        f'font-weight="bold">{escape(title)}</text>',
    ]
    for j, row in enumerate((header, *rows)):
        y = 34 + lh * (j + 1) - 5
        if j == 0:
            out.append(f'<rect x="0" y="{y - 15}" width="{width:.0f}" height="{lh}" fill="#eee"/>')
        for x, cell in zip(xs, row, strict=True):
            out.append(f'<text x="{x:.0f}" y="{y}">{escape(str(cell))}</text>')
    out.append("</svg>")
    return "\n".join(out)
