"""GIVEN. Draws a node's GPUs, their links and the allocations made on them, as SVG."""

from __future__ import annotations

from html import escape

from .node import Node

COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948"]


def draw(node: Node, allocations: list[tuple[str, list[str]]], title: str = "") -> str:
    """`allocations`: (label, GPU UUIDs) per container. Sockets are boxes, NVLink a thick line."""
    per_row = max(1, (len(node.gpus) + 1) // 2)
    w, h, box = 90 + per_row * 110, 290, 70
    pos = {}
    for g in node.gpus:
        col = g.minor % per_row if g.numa in (0, 1) else g.minor
        row = 0 if g.numa == 0 else 1
        pos[g.uuid] = (60 + col * 110, 50 + row * 120)
    owner = {u: i for i, (_, uuids) in enumerate(allocations) for u in uuids}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 20 * len(allocations)}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="10" y="18" font-weight="bold">{escape(title)}</text>',
    ]
    for numa in sorted({g.numa for g in node.gpus}):
        ys = [pos[g.uuid][1] for g in node.gpus if g.numa == numa]
        xs = [pos[g.uuid][0] for g in node.gpus if g.numa == numa]
        out.append(
            f'<rect x="{min(xs) - 20}" y="{min(ys) - 15}" width="{max(xs) - min(xs) + box + 40}" '
            f'height="{box + 30}" fill="none" stroke="#999" stroke-dasharray="4"/>'
            f'<text x="{min(xs) - 15}" y="{min(ys) - 2}" fill="#666">NUMA {numa}</text>'
        )
    for i, a in enumerate(node.gpus):
        for b in node.gpus[i + 1 :]:
            link = node.link(a.uuid, b.uuid)
            if link.startswith("NV"):
                (x1, y1), (x2, y2) = pos[a.uuid], pos[b.uuid]
                out.append(
                    f'<line x1="{x1 + box / 2}" y1="{y1 + box / 2}" x2="{x2 + box / 2}" '
                    f'y2="{y2 + box / 2}" stroke="#76b900" stroke-width="{2 * int(link[2:])}"/>'
                )
    for g in node.gpus:
        x, y = pos[g.uuid]
        fill = COLOURS[owner[g.uuid] % len(COLOURS)] if g.uuid in owner else "#eee"
        healthy = node.healthy(g.uuid)
        out.append(
            f'<rect x="{x}" y="{y + 20}" width="{box}" height="{box - 20}" rx="6" fill="{fill}" '
            f'stroke="{"#333" if healthy else "#d00"}" stroke-width="{1 if healthy else 3}"/>'
            f'<text x="{x + 8}" y="{y + 42}">GPU {g.minor}</text>'
            f'<text x="{x + 8}" y="{y + 58}" font-size="10">sw {g.pcie_switch}</text>'
        )
    for i, (label, uuids) in enumerate(allocations):
        minors = ", ".join(str(node.gpu(u).minor) for u in uuids)
        out.append(
            f'<rect x="10" y="{h + 20 * i - 12}" width="12" height="12" '
            f'fill="{COLOURS[i % len(COLOURS)]}"/>'
            f'<text x="28" y="{h + 20 * i - 2}">{escape(label)}: GPUs {minors}</text>'
        )
    out.append(
        f'<text x="10" y="{h - 25}" fill="#76b900">green line: NVLink (width = links)</text>'
    )
    out.append("</svg>")
    return "\n".join(out)
