"""Fixtures of the nccl-topology tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
BOXES = {  # file -> (arch, cpu vendor): the machines of the README
    "dgx-a100": ("sm_80", "amd"),
    "dgx-1v": ("sm_70", "intel"),
    "hgx-h100": ("sm_90", "intel"),
    "pcie-2socket": ("sm_80", "intel"),
}


@pytest.fixture(scope="module")
def topology(kata: Any) -> Any:
    """topology.py (given): Topology, NCCL's bandwidths, render, ring_bandwidth, tree_bandwidth."""
    return kata.module("topology")


@pytest.fixture(scope="module")
def topo(kata: Any) -> Any:
    """topo.py (yours): tasks parse and bandwidth."""
    return kata.module("topo")


@pytest.fixture(scope="module")
def search(kata: Any) -> Any:
    """search.py (yours): tasks ring, tree and place."""
    return kata.module("search")


@pytest.fixture(scope="module")
def box_text() -> Any:
    """The text of one of the shipped `nvidia-smi topo -m` outputs, by name."""
    return lambda name: (DATA / f"{name}.txt").read_text()


def check_tree(parent: Any, n: int, root: int, fanout: int) -> str | None:
    """None when `parent` is a spanning tree rooted at `root` with at most `fanout` children per
    node, else what is wrong with it (the tests' own check, never the learner's)."""
    if not isinstance(parent, list) or len(parent) != n:
        return f"it should be a list of {n} parents, got {parent!r}"
    if parent[root] is not None:
        return f"parent[{root}] (the root) should be None, got {parent[root]!r}"
    children: dict[int, int] = {}
    for i, p in enumerate(parent):
        if i == root:
            continue
        if not isinstance(p, int) or not 0 <= p < n or p == i:
            return f"parent[{i}] = {p!r} is not another GPU"
        children[p] = children.get(p, 0) + 1
        seen, v = {i}, p
        while v != root:
            if v in seen:
                return f"GPU {i} never reaches the root (a cycle through {v})"
            seen.add(v)
            v = parent[v]
    over = {p: c for p, c in children.items() if c > fanout}
    return f"more than {fanout} children: {over}" if over else None


def check_ring(ring: Any, n: int) -> str | None:
    """None when `ring` visits each of the n GPUs exactly once."""
    if not isinstance(ring, list) or sorted(ring) != list(range(n)):
        return f"a ring must visit each of the GPUs 0..{n - 1} once, got {ring!r}"
    return None


@pytest.fixture(scope="module")
def checks() -> Any:
    """The tests' checks of a ring and a tree."""
    return type("Checks", (), {"tree": staticmethod(check_tree), "ring": staticmethod(check_ring)})
