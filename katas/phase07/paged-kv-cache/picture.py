"""GIVEN (not graded): draw a block manager's state as SVG (the picture in the report).

Top: the gpu pool, one cell per physical block, coloured by state: free, free but still in the
prefix cache, used by one sequence, shared (the number of holders in the corner). Below: each
sequence's block table, one cell per logical block showing the physical block it maps to, in
the colour of that block. Only the manager's public methods are used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

COLOURS = {"free": "#ffffff", "cached": "#d9d9d9", "used": "#6baed6", "shared": "#fd8d3c"}
CELL, GAP, PER_ROW = 26, 4, 16


def _state(manager: Any, block: int) -> str:
    refs = manager.ref_count(block)
    if refs > 1:
        return "shared"
    if refs == 1:
        return "used"
    return "cached" if manager.is_cached(block) else "free"


def block_table_svg(
    manager: Any, seq_ids: Sequence[int], num_blocks: int, title: str = "KV-cache blocks"
) -> str:
    """SVG markup of the gpu pool and the block tables of `seq_ids`."""
    out: list[str] = []
    x0, y = 90, 44
    step = CELL + GAP

    def cell(x: float, y: float, fill: str, label: str, corner: str = "") -> None:
        out.append(
            f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{fill}" '
            'stroke="#444" stroke-width="1"/>'
        )
        out.append(
            f'<text x="{x + CELL / 2}" y="{y + CELL / 2 + 4}" font-size="11" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
        if corner:
            out.append(
                f'<text x="{x + CELL - 2}" y="{y + 9}" font-size="8" text-anchor="end" '
                f'fill="#7f2704">{escape(corner)}</text>'
            )

    out.append(f'<text x="10" y="{y - 8}" font-size="12" font-weight="bold">gpu pool</text>')
    for b in range(num_blocks):
        row, col = divmod(b, PER_ROW)
        state = _state(manager, b)
        corner = f"x{manager.ref_count(b)}" if state == "shared" else ""
        cell(x0 + col * step, y + row * step, COLOURS[state], str(b), corner)
    y += (-(-num_blocks // PER_ROW)) * step + 30
    out.append(f'<text x="10" y="{y - 8}" font-size="12" font-weight="bold">block tables</text>')
    width = x0 + PER_ROW * step
    for sid in seq_ids:
        table = manager.block_table(sid)
        swapped = manager.is_swapped(sid) if hasattr(manager, "is_swapped") else False
        where = " (cpu)" if swapped else ""
        out.append(
            f'<text x="10" y="{y + CELL / 2 + 4}" font-size="11">seq {escape(str(sid))}'
            f"{where}: {manager.num_tokens(sid)} tok</text>"
        )
        for i, b in enumerate(table):
            fill = "#c7e9c0" if swapped else COLOURS[_state(manager, b)]
            cell(x0 + 24 + i * step, y, fill, str(b))
        width = max(width, x0 + 24 + len(table) * step)
        y += step
    y += 10
    legend = [("free", "free"), ("cached", "free, in prefix cache"), ("used", "one holder"),
              ("shared", "shared (x holders)")]  # fmt: skip
    lx = 10
    for key, text in legend:
        out.append(
            f'<rect x="{lx}" y="{y}" width="12" height="12" fill="{COLOURS[key]}" stroke="#444"/>'
        )
        out.append(f'<text x="{lx + 16}" y="{y + 10}" font-size="11">{escape(text)}</text>')
        lx += 30 + 7 * len(text)
    height = y + 24
    width = max(width, lx) + 10
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">'
        f'<text x="10" y="18" font-size="14" font-weight="bold">{escape(title)}</text>'
    )
    return head + "".join(out) + "</svg>"
