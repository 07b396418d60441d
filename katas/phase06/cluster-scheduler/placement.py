"""YOUR FILE. Task "placement": where a job's pods go.

Every function takes the topology, the free GPU ids of each node (`free[n]`, never modified)
and a job's shape (`pods` pods of `gpus_per_pod` GPUs, each pod on one node; several pods may
share a node), and returns one sorted GPU-id list per pod, or None when the job does not fit
(then nothing: a job is placed whole or not at all). Pods are placed one after another, each
seeing the GPUs the earlier pods of the same job took.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from harness import todo

from .cluster import Topology

Pods = list[list[int]]
Placement = Callable[[Topology, Sequence[Collection[int]], int, int], "Pods | None"]


def first_fit(
    topology: Topology, free: Sequence[Collection[int]], pods: int, gpus_per_pod: int
) -> Pods | None:
    """Each pod: the lowest-numbered node with enough free GPUs; its lowest free GPU ids."""
    todo("first_fit")


def best_fit(
    topology: Topology, free: Sequence[Collection[int]], pods: int, gpus_per_pod: int
) -> Pods | None:
    """Each pod: the node with the FEWEST free GPUs that still has enough (ties: the lower
    node id); its lowest free GPU ids. Fills nodes up and keeps empty nodes whole."""
    todo("best_fit")


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
    todo("topology_aware")


PLACEMENTS: dict[str, Placement] = {
    "first_fit": first_fit,
    "best_fit": best_fit,
    "topology_aware": topology_aware,
}
