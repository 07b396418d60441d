"""GIVEN: the picture of an allocator's segments (torch.cuda.memory_snapshot() drawn), and the
fragmentation figure."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

MiB = 1 << 20
COLOURS = {0: "#d9d9d9", 1: "#4878a8", 2: "#e0a040"}  # free, allocated, awaiting events
LABELS = {0: "free (cached)", 1: "allocated", 2: "freed, awaiting another stream"}


def fragmentation(segments: Sequence[Any]) -> float:
    """1 - (largest free block / all free bytes): 0 when the free memory is one block (or there
    is none), near 1 when it is scattered in many small holes."""
    free = [b.size for s in segments for b in s.blocks if b.state == 0]
    return 0.0 if not free else 1.0 - max(free) / sum(free)


def segments_svg(segments: Sequence[Any], title: str, width: int = 760) -> str:
    """One bar per segment, its length proportional to its size, blocks coloured by state."""
    biggest = max((s.size for s in segments), default=1)
    row, left, top = 18, 150, 40
    height = top + row * len(segments) + 50
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="8" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<text x="8" y="30">{len(segments)} segments, '
        f"{sum(s.size for s in segments) / MiB:.1f} MiB reserved, fragmentation "
        f"{fragmentation(segments):.2f}</text>",
    ]
    scale = (width - left - 10) / biggest
    for i, s in enumerate(segments):
        y = top + i * row
        pool = "small" if s.small else "large"
        out.append(f'<text x="8" y="{y + 12}">{s.size / MiB:.0f} MiB {pool} s{s.stream}</text>')
        for b in s.blocks:
            x = left + (b.address - s.address) * scale
            w = max(b.size * scale, 0.5)
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 4}" '
                f'fill="{COLOURS.get(b.state, "#000")}" stroke="white" stroke-width="0.3">'
                f"<title>{b.address:#x}: {b.size} bytes, {LABELS.get(b.state, '?')}</title></rect>"
            )
    y = top + row * len(segments) + 16
    for k, (state, label) in enumerate(LABELS.items()):
        x = 8 + k * 200
        out.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{COLOURS[state]}"/>')
        out.append(f'<text x="{x + 16}" y="{y + 10}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)
