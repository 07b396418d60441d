"""Rings and trees that maximise the bottleneck bandwidth, as NCCL's graph search does: the file
you edit (tasks `ring`, `tree` and `place`).

`bw` is a bandwidth matrix (topo.bandwidth_matrix, or any symmetric matrix of GB/s with 0.0 on
the diagonal); GPUs are its indices 0..n-1. topology.ring_bandwidth and topology.tree_bandwidth
score an answer.
"""

from __future__ import annotations

from harness import todo


def best_ring(bw: list[list[float]]) -> list[int]:
    """An order of all the GPUs 0..n-1 whose ring (the last back to the first) has the largest
    bottleneck, topology.ring_bandwidth. Any optimal ring will do; for n <= 2 every order is one."""
    todo("best_ring")


def best_tree(bw: list[list[float]], root: int = 0, fanout: int = 2) -> list[int | None]:
    """parent[i] for every GPU i: a spanning tree rooted at `root` (parent[root] is None) in
    which no GPU has more than `fanout` children, with the largest bottleneck
    (topology.tree_bandwidth). ValueError when fanout < 1 and there is more than one GPU."""
    todo("best_tree")


def pick_gpus(bw: list[list[float]], k: int) -> list[int]:
    """The k GPUs, sorted, whose best ring has the largest bottleneck (any such set will do):
    what a topology-aware scheduler gives a k-GPU job. ValueError unless 1 <= k <= n."""
    todo("pick_gpus")
