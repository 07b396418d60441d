"""The roofline model: ridge point, attainable performance, kernels placed on it, an SVG plot.

Units are SI throughout: FLOP/s, bytes/s, FLOP/byte, seconds. (Reference solution.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from xml.sax.saxutils import escape

__all__ = [
    "Kernel",
    "Placement",
    "arithmetic_intensity",
    "attainable",
    "bound",
    "place",
    "ridge_point",
    "roofline_svg",
]


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved to or from memory."""
    if bytes_moved <= 0:
        raise ValueError(f"bytes_moved must be positive, got {bytes_moved!r}")
    return flops / bytes_moved


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof."""
    if peak_flops <= 0 or bandwidth <= 0:
        raise ValueError("peak_flops and bandwidth must be positive")
    return peak_flops / bandwidth


def attainable(ai: float, peak_flops: float, bandwidth: float) -> float:
    """The roof at intensity `ai`: min(peak, ai x bandwidth), in FLOP/s."""
    if ai < 0:
        raise ValueError(f"arithmetic intensity must be >= 0, got {ai!r}")
    return min(peak_flops, ai * bandwidth)


def bound(ai: float, peak_flops: float, bandwidth: float) -> Literal["memory", "compute"]:
    """Which roof limits a kernel of intensity `ai`: "memory" below the ridge, else "compute"."""
    return "memory" if ai < ridge_point(peak_flops, bandwidth) else "compute"


@dataclass(frozen=True)
class Kernel:
    """A measured kernel: what it did and how long it took."""

    name: str
    flops: float
    bytes: float
    seconds: float

    @property
    def ai(self) -> float:
        return arithmetic_intensity(self.flops, self.bytes)

    @property
    def achieved(self) -> float:
        """FLOP/s."""
        return self.flops / self.seconds


@dataclass(frozen=True)
class Placement:
    """A kernel on a roofline."""

    kernel: Kernel
    ai: float  # FLOP/byte
    achieved: float  # FLOP/s
    attainable: float  # FLOP/s: the roof above it
    efficiency: float  # achieved / attainable
    bound: Literal["memory", "compute"]


def place(kernel: Kernel, peak_flops: float, bandwidth: float) -> Placement:
    """Where `kernel` sits: its intensity, its roof, and how close to the roof it gets."""
    ai = kernel.ai
    roof = attainable(ai, peak_flops, bandwidth)
    return Placement(
        kernel=kernel,
        ai=ai,
        achieved=kernel.achieved,
        attainable=roof,
        efficiency=kernel.achieved / roof,
        bound=bound(ai, peak_flops, bandwidth),
    )


# --------------------------------------------------------------------------- the plot
_MARGIN = (70, 20, 30, 55)  # left, right, top, bottom
_COLOURS = (
    "#d62728",
    "#1f77b4",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def _decades(lo: float, hi: float) -> tuple[int, int]:
    return math.floor(math.log10(lo)), math.ceil(math.log10(hi))


def _fmt(v: float) -> str:
    return f"{v:g}"


def roofline_svg(
    peak_flops: float,
    bandwidth: float,
    kernels: Sequence[Kernel],
    *,
    title: str = "Roofline",
    width: int = 720,
    height: int = 480,
) -> str:
    """A log-log roofline plot as SVG text: the roof, and each kernel as a dot below it."""
    ridge = ridge_point(peak_flops, bandwidth)
    ais = [k.ai for k in kernels] + [ridge]
    perfs = [k.achieved for k in kernels] + [peak_flops]
    x_lo, x_hi = _decades(min(ais) / 4, max(ais) * 4)
    y_lo, y_hi = _decades(
        min(min(perfs), attainable(10.0**x_lo, peak_flops, bandwidth)) / 2, peak_flops * 2
    )
    left, right, top, bottom = _MARGIN
    pw, ph = width - left - right, height - top - bottom

    def px(ai: float) -> float:
        return left + (math.log10(ai) - x_lo) / (x_hi - x_lo) * pw

    def py(flops: float) -> float:
        return top + (y_hi - math.log10(flops)) / (y_hi - y_lo) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="white" stroke="#444"/>',
    ]
    for d in range(x_lo, x_hi + 1):
        x = px(10.0**d)
        out.append(
            f'<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle">{_fmt(10.0**d)}</text>'
        )
    for d in range(y_lo, y_hi + 1):
        y = py(10.0**d)
        out.append(
            f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(10.0**d / 1e9)}</text>'
        )
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 12}" text-anchor="middle">'
        "arithmetic intensity (FLOP/byte)</text>"
    )
    out.append(
        f'<text x="16" y="{top + ph / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + ph / 2:.1f})">performance (GFLOP/s)</text>'
    )
    a0, a1 = 10.0**x_lo, 10.0**x_hi
    roof = [(a0, attainable(a0, peak_flops, bandwidth)), (ridge, peak_flops), (a1, peak_flops)]
    points = " ".join(f"{px(a):.2f},{py(f):.2f}" for a, f in roof)
    out.append(
        f'<polyline class="roof" points="{points}" fill="none" stroke="black" stroke-width="2"/>'
    )
    # the ridge: a hollow marker on the roof, its numbers in the top-left corner (kernels
    # crowd the roof near it)
    out.append(
        f'<circle class="ridge" cx="{px(ridge):.2f}" cy="{py(peak_flops):.2f}" r="4" '
        'fill="white" stroke="black" stroke-width="1.5"/>'
    )
    out.append(
        f'<text x="{left + 8}" y="{top + 16}">ridge {ridge:.3g} FLOP/byte · peak '
        f"{peak_flops / 1e9:.3g} GFLOP/s · memory {bandwidth / 1e9:.3g} GB/s</text>"
    )
    # kernels crowd together near the roof, so names go in a legend in the lower right, which a
    # roofline leaves empty (high intensity and low performance is a kernel gone badly wrong)
    lx, ly = left + pw - 262, top + ph - 16 * len(kernels) - 4
    for i, k in enumerate(kernels):
        x, y = px(k.ai), py(k.achieved)
        colour = _COLOURS[i % len(_COLOURS)]
        out.append(
            f'<circle class="kernel" cx="{x:.2f}" cy="{y:.2f}" r="5" fill="{colour}">'
            f"<title>{escape(k.name)}: {k.ai:.3g} FLOP/B, {k.achieved / 1e9:.3g} GFLOP/s</title></circle>"
        )
        row = ly + 16 * i
        out.append(f'<circle cx="{lx:.1f}" cy="{row:.1f}" r="5" fill="{colour}"/>')
        out.append(
            f'<text class="label" x="{lx + 10:.1f}" y="{row + 4:.1f}" font-size="11">{escape(k.name)} '
            f"({k.ai:.3g} FLOP/B, {k.achieved / 1e9:.3g} GFLOP/s)</text>"
        )
    out.append("</svg>")
    return "\n".join(out)
