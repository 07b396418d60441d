"""Shortcut: greedy first-fit decreasing, with a second greedy pass from the highest start."""

from __future__ import annotations

from collections.abc import Sequence

from .gpus import GPU, Instance
from .mig import check


def _greedy(gpu: GPU, names: Sequence[str], high: bool) -> list[Instance] | None:
    placed: list[Instance] = []
    for n in sorted(names, key=lambda n: -gpu.profile(n).memory_slices):
        starts = gpu.profile(n).starts
        for s in reversed(starts) if high else starts:
            if check(gpu, [*placed, (n, s)]) is None:
                placed.append((n, s))
                break
        else:
            return None
    return placed


def place(gpu: GPU, names: Sequence[str]) -> list[Instance] | None:
    for n in names:
        gpu.profile(n)
    return _greedy(gpu, names, False) or _greedy(gpu, names, True) or (None if names else [])


def pack_into(gpu: GPU, requests: Sequence[str], num_gpus: int) -> list[list[Instance]]:
    layout: list[list[str]] = []
    for r in sorted(requests, key=lambda n: -gpu.profile(n).memory_slices):
        for g in layout:
            if place(gpu, [*g, r]) is not None:
                g.append(r)
                break
        else:
            if len(layout) < num_gpus:
                layout.append([r])
    out = []
    for g in layout:
        placed = place(gpu, g)
        assert placed is not None
        out.append(placed)
    return out


def pack(gpu: GPU, requests: Sequence[str]) -> list[list[Instance]]:
    return pack_into(gpu, requests, len(requests))
