"""YOUR FILE. Task "placement": where a job's pods go.

Every function takes the topology, the free GPU ids of each node (`free[n]`, never modified)
and a job's shape (`pods` pods of `gpus_per_pod` GPUs, each pod on one node; several pods may
share a node), and returns one sorted GPU-id list per pod, or None when the job does not fit
(then nothing: a job is placed whole or not at all). Pods are placed one after another, each
seeing the GPUs the earlier pods of the same job took.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from .cluster import Topology

Pods = list[list[int]]
Placement = Callable[[Topology, Sequence[Collection[int]], int, int], "Pods | None"]


def _fits(free: Sequence[Collection[int]], pods: int, g: int) -> bool:
    return sum(len(f) // g for f in free) >= pods


def first_fit(
    topology: Topology, free: Sequence[Collection[int]], pods: int, gpus_per_pod: int
) -> Pods | None:
    """Each pod: the lowest-numbered node with enough free GPUs; its lowest free GPU ids."""
    if not _fits(free, pods, gpus_per_pod):
        return None
    left = [len(f) for f in free]
    taken: dict[int, set[int]] = {}
    out: Pods = []
    for _ in range(pods):
        n = next(n for n, c in enumerate(left) if c >= gpus_per_pod)
        out.append(_take_lowest(free[n], taken.setdefault(n, set()), gpus_per_pod))
        left[n] -= gpus_per_pod
    return out


def best_fit(
    topology: Topology, free: Sequence[Collection[int]], pods: int, gpus_per_pod: int
) -> Pods | None:
    """Each pod: the node with the FEWEST free GPUs that still has enough (ties: the lower
    node id); its lowest free GPU ids. Fills nodes up and keeps empty nodes whole."""
    if not _fits(free, pods, gpus_per_pod):
        return None
    left = [len(f) for f in free]
    taken: dict[int, set[int]] = {}
    out: Pods = []
    for _ in range(pods):
        n = min((n for n, c in enumerate(left) if c >= gpus_per_pod), key=left.__getitem__)
        out.append(_take_lowest(free[n], taken.setdefault(n, set()), gpus_per_pod))
        left[n] -= gpus_per_pod
    return out


def topology_aware(
    topology: Topology, free: Sequence[Collection[int]], pods: int, gpus_per_pod: int
) -> Pods | None:
    """Best fit that keeps jobs inside racks and pods inside NVLink islands:

    1. Racks: if some rack alone can host every pod, use only that rack's nodes -- the rack
       with the fewest free GPUs among those that can (ties: lower rack id); else all nodes.
    2. Each pod, among those nodes: prefer nodes where it can span as few islands as its size
       needs (ceil(gpus_per_pod / island_size)); among them (or, if none, among all that fit)
       the node with the fewest free GPUs (ties: lower id).
    3. GPUs in that node: if one island has enough free GPUs, the island with the fewest free
       that has enough (ties: lower island) and its lowest ids; else take islands in order of
       most free GPUs first (ties: lower island), lowest ids first, until the pod is full.
    """
    g = gpus_per_pod
    if not _fits(free, pods, g):
        return None
    left = [set(f) for f in free]
    nodes = list(range(topology.nodes))
    racks = [
        r
        for r in range(topology.racks)
        if _fits([left[n] for n in topology.rack_nodes(r)], pods, g)
    ]
    if racks:
        rack = min(racks, key=lambda r: sum(len(left[n]) for n in topology.rack_nodes(r)))
        nodes = list(topology.rack_nodes(rack))
    need = -(-g // topology.island_size)
    out: Pods = []
    for _ in range(pods):
        fit = [n for n in nodes if len(left[n]) >= g]
        picks = {n: _island_pick(topology, left[n], g) for n in fit}
        good = [n for n in fit if len({topology.island_of(x) for x in picks[n]}) <= need]
        n = min(good or fit, key=lambda n: len(left[n]))
        out.append(_take(left[n], picks[n]))
    return out


def _island_pick(topology: Topology, free: set[int], g: int) -> list[int]:
    islands: dict[int, list[int]] = {}
    for x in sorted(free):
        islands.setdefault(topology.island_of(x), []).append(x)
    whole = [i for i, xs in islands.items() if len(xs) >= g]
    if whole:
        best = min(whole, key=lambda i: (len(islands[i]), i))
        return islands[best][:g]
    picked: list[int] = []
    for i in sorted(islands, key=lambda i: (-len(islands[i]), i)):
        picked.extend(islands[i][: g - len(picked)])
        if len(picked) == g:
            break
    return picked


def _take_lowest(free: Collection[int], taken: set[int], g: int) -> list[int]:
    gpus = sorted(x for x in free if x not in taken)[:g]
    taken.update(gpus)
    return gpus


def _take(free: set[int], gpus: Sequence[int]) -> list[int]:
    free.difference_update(gpus)
    return sorted(gpus)


PLACEMENTS: dict[str, Placement] = {
    "first_fit": first_fit,
    "best_fit": best_fit,
    "topology_aware": topology_aware,
}
