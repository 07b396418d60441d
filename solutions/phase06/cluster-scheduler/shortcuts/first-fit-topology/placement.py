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
    left = [set(f) for f in free]
    out: Pods = []
    for _ in range(pods):
        n = next(n for n, f in enumerate(left) if len(f) >= gpus_per_pod)
        out.append(_take(left[n], sorted(left[n])[:gpus_per_pod]))
    return out


def best_fit(
    topology: Topology, free: Sequence[Collection[int]], pods: int, gpus_per_pod: int
) -> Pods | None:
    """Each pod: the node with the FEWEST free GPUs that still has enough (ties: the lower
    node id); its lowest free GPU ids. Fills nodes up and keeps empty nodes whole."""
    if not _fits(free, pods, gpus_per_pod):
        return None
    left = [set(f) for f in free]
    out: Pods = []
    for _ in range(pods):
        n = min(
            (n for n, f in enumerate(left) if len(f) >= gpus_per_pod), key=lambda n: len(left[n])
        )
        out.append(_take(left[n], sorted(left[n])[:gpus_per_pod]))
    return out


def topology_aware(
    topology: Topology, free: Sequence[Collection[int]], pods: int, gpus_per_pod: int
) -> Pods | None:
    """Shortcut: first fit under another name."""
    return first_fit(topology, free, pods, gpus_per_pod)


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


def _take(free: set[int], gpus: Sequence[int]) -> list[int]:
    free.difference_update(gpus)
    return sorted(gpus)


PLACEMENTS: dict[str, Placement] = {
    "first_fit": first_fit,
    "best_fit": best_fit,
    "topology_aware": topology_aware,
}
