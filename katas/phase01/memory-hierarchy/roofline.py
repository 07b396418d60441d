"""The roofline model: ridge point, attainable performance, kernels placed on it, an SVG plot.

YOUR FILE (task roofline; task your-roofline plots your own kernels with it). Units are SI
throughout: FLOP/s, bytes/s, FLOP/byte, seconds. The records (Kernel, Placement) are given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from harness import todo

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
    """FLOPs per byte moved to or from memory. ValueError unless bytes_moved > 0."""
    todo("roofline.arithmetic_intensity")


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The intensity (FLOP/byte) where the memory roof meets the compute roof.
    ValueError unless both are positive."""
    todo("roofline.ridge_point")


def attainable(ai: float, peak_flops: float, bandwidth: float) -> float:
    """The roof at intensity `ai` (FLOP/s): the lower of the two roofs. ValueError if ai < 0."""
    todo("roofline.attainable")


def bound(ai: float, peak_flops: float, bandwidth: float) -> Literal["memory", "compute"]:
    """Which roof limits a kernel of intensity `ai`: "memory" below the ridge point, "compute"
    at or above it."""
    todo("roofline.bound")


@dataclass(frozen=True)
class Kernel:
    """A measured kernel: what it did and how long it took (given)."""

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
    """A kernel on a roofline (given)."""

    kernel: Kernel
    ai: float  # FLOP/byte
    achieved: float  # FLOP/s
    attainable: float  # FLOP/s: the roof right above the kernel
    efficiency: float  # achieved / attainable: how close to *its* roof the kernel gets
    bound: Literal["memory", "compute"]


def place(kernel: Kernel, peak_flops: float, bandwidth: float) -> Placement:
    """Where `kernel` sits on the roofline of a machine with this peak and bandwidth."""
    todo("roofline.place")


def roofline_svg(
    peak_flops: float,
    bandwidth: float,
    kernels: Sequence[Kernel],
    *,
    title: str = "Roofline",
    width: int = 720,
    height: int = 480,
) -> str:
    """A log-log roofline plot as SVG text (standalone: `<svg xmlns="http://www.w3.org/2000/svg"
    ...>`). What the tests read from it:

    - one `<polyline class="roof" points="x,y x,y x,y">`: exactly three vertices, the left end
      of the memory roof, the ridge point, and the right end of the compute roof;
    - per kernel, in order, one `<circle class="kernel" cx=.. cy=..>` holding a `<title>` that
      starts with the kernel's name, and a `<text>` label with the name;
    - text labels for the axes: "arithmetic intensity (FLOP/byte)" and "performance (GFLOP/s)".

    Both axes are logarithmic (a decade is the same number of pixels everywhere along an axis);
    SVG's y grows downwards, so faster is higher up. Choose ranges that show every kernel and the
    ridge point with some room around them.
    """
    todo("roofline.roofline_svg")
