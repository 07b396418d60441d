"""Rings and trees that maximise the bottleneck bandwidth, as NCCL's graph search: reference."""

from __future__ import annotations

from itertools import combinations


def _thresholds(bw: list[list[float]]) -> list[float]:
    n = len(bw)
    return sorted({bw[i][j] for i in range(n) for j in range(n) if i != j}, reverse=True)


def _hamiltonian_cycle(adj: list[int], nodes: list[int]) -> list[int] | None:
    """A cycle through every node of `nodes` along the bitmask adjacency `adj`, or None.
    DP over subsets: reach[mask] = the ends of paths from nodes[0] covering exactly mask."""
    k = len(nodes)
    if k <= 2:
        return list(nodes) if k < 2 or adj[nodes[0]] >> nodes[1] & 1 else None
    local = [0] * k
    for a in range(k):
        for b in range(k):
            if a != b and adj[nodes[a]] >> nodes[b] & 1:
                local[a] |= 1 << b
    full = (1 << k) - 1
    reach = [0] * (1 << k)
    reach[1] = 1
    for mask in range(1, full + 1, 2):  # paths start at node 0: odd masks only
        ends = reach[mask]
        while ends:
            v = (ends & -ends).bit_length() - 1
            ends &= ends - 1
            nxt = local[v] & ~mask
            while nxt:
                u = (nxt & -nxt).bit_length() - 1
                nxt &= nxt - 1
                reach[mask | 1 << u] |= 1 << u
    closing = reach[full] & local[0]
    if not closing:
        return None
    # walk back from an end that closes the cycle
    path, mask, v = [], full, (closing & -closing).bit_length() - 1
    while True:
        path.append(v)
        if mask == 1:
            break
        prev = mask & ~(1 << v)
        cands = reach[prev] & local[v]  # an end of the shorter path next to v (edges are symmetric)
        mask, v = prev, (cands & -cands).bit_length() - 1
    return [nodes[i] for i in reversed(path)]


def best_ring(bw: list[list[float]]) -> list[int]:
    """An order of the GPUs 0..n-1 whose ring (last back to first) has the largest bottleneck."""
    n = len(bw)
    if n <= 2:
        return list(range(n))
    for t in _thresholds(bw):
        adj = [
            sum(1 << j for j in range(n) if j != i and bw[i][j] >= t and bw[j][i] >= t)
            for i in range(n)
        ]
        ring = _hamiltonian_cycle(adj, list(range(n)))
        if ring is not None:
            return ring
    raise AssertionError("unreachable: the complete graph at the lowest threshold has a cycle")


def best_tree(bw: list[list[float]], root: int = 0, fanout: int = 2) -> list[int | None]:
    """parent[i] for a spanning tree rooted at `root` in which no GPU has more than `fanout`
    children, with the largest bottleneck (parent[root] is None)."""
    n = len(bw)
    if fanout < 1 and n > 1:
        raise ValueError(f"fanout must be at least 1 to span {n} GPUs, got {fanout}")
    if n == 1:
        return [None]
    for t in _thresholds(bw):
        parent = _tree_at(bw, root, fanout, t)
        if parent is not None:
            return parent
    raise AssertionError("unreachable: a chain spans any complete graph")


def _tree_at(bw: list[list[float]], root: int, fanout: int, t: float) -> list[int | None] | None:
    """A tree whose edges are all >= t, built in BFS order: each node of the queue takes a set of
    at most `fanout` children among the unattached nodes it reaches."""
    n = len(bw)
    ok = [[bw[i][j] >= t and bw[j][i] >= t for j in range(n)] for i in range(n)]
    # the threshold graph must be connected at all
    seen, stack = {root}, [root]
    while stack:
        v = stack.pop()
        for u in range(n):
            if ok[v][u] and u not in seen:
                seen.add(u)
                stack.append(u)
    if len(seen) < n:
        return None
    parent: list[int | None] = [None] * n
    failed: set[tuple[int, tuple[int, ...]]] = set()

    def grow(attached: int, queue: tuple[int, ...]) -> bool:
        if attached == (1 << n) - 1:
            return True
        if not queue or (attached, queue) in failed:
            return False
        p, rest = queue[0], queue[1:]
        free = [u for u in range(n) if not attached >> u & 1 and ok[p][u]]
        for k in range(min(fanout, len(free)), -1, -1):
            for kids in combinations(free, k):
                for u in kids:
                    parent[u] = p
                mask = attached | sum(1 << u for u in kids)
                if grow(mask, rest + kids):
                    return True
        failed.add((attached, queue))
        return False

    return parent if grow(1 << root, (root,)) else None


def pick_gpus(bw: list[list[float]], k: int) -> list[int]:
    """The k GPUs (sorted) whose best ring has the largest bottleneck: what a topology-aware
    scheduler gives a k-GPU job."""
    n = len(bw)
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the {n} GPUs, got {k}")
    if k == 1:
        return [0]
    for t in _thresholds(bw):
        adj = [
            sum(1 << j for j in range(n) if j != i and bw[i][j] >= t and bw[j][i] >= t)
            for i in range(n)
        ]
        for subset in combinations(range(n), k):
            if _hamiltonian_cycle(adj, list(subset)) is not None:
                return list(subset)
    raise AssertionError("unreachable: any k GPUs form a ring at the lowest threshold")
