"""GIVEN (not graded): the cluster's shape, racks of nodes of GPUs in NVLink islands.

GPUs have global ids: node n holds GPUs n * gpus_per_node ... (n + 1) * gpus_per_node - 1, and
node n sits in rack n // nodes_per_rack. Inside a node, GPUs come in NVLink islands of
`island_size` consecutive ids: GPUs of one island talk over NVLink, GPUs of two islands over
PCIe (and a node's NICs), pods of one job on two racks over the spine switches.

The slowdown model (the kata's, not a measurement): a job runs at its base speed when every pod
spans as few islands as its size needs (ceil(gpus_per_pod / island_size)) and all its pods sit
in one rack; `island_penalty` slows it down when some pod spans more islands than that,
`rack_penalty` when its pods span racks (both multiply when both happen).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Topology:
    name: str
    racks: int
    nodes_per_rack: int
    gpus_per_node: int
    island_size: int
    island_penalty: float = 1.0
    rack_penalty: float = 1.0

    def __post_init__(self) -> None:
        if min(self.racks, self.nodes_per_rack, self.gpus_per_node, self.island_size) < 1:
            raise ValueError(f"{self.name}: every count must be at least 1")
        if self.gpus_per_node % self.island_size:
            raise ValueError(f"{self.name}: islands of {self.island_size} do not tile a node")

    @property
    def nodes(self) -> int:
        return self.racks * self.nodes_per_rack

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_of(self, gpu: int) -> int:
        return gpu // self.gpus_per_node

    def rack_of(self, node: int) -> int:
        return node // self.nodes_per_rack

    def island_of(self, gpu: int) -> int:
        """The global id of the island holding `gpu` (islands are numbered like GPUs)."""
        return gpu // self.island_size

    def node_gpus(self, node: int) -> range:
        return range(node * self.gpus_per_node, (node + 1) * self.gpus_per_node)

    def rack_nodes(self, rack: int) -> range:
        return range(rack * self.nodes_per_rack, (rack + 1) * self.nodes_per_rack)

    def slowdown(self, pods: Sequence[Sequence[int]]) -> float:
        """How much slower than its base speed a job runs on this placement."""
        s = 1.0
        need = lambda pod: -(-len(pod) // self.island_size)
        if any(len({self.island_of(g) for g in pod}) > need(pod) for pod in pods):
            s *= self.island_penalty
        if len({self.rack_of(self.node_of(pod[0])) for pod in pods}) > 1:
            s *= self.rack_penalty
        return s


# DGX H100: 8 H100 GPUs on four NVSwitch chips, every GPU one hop from every other (one island
# of 8); four racks of four nodes here (128 GPUs).
DGX_H100 = Topology("dgx-h100", racks=4, nodes_per_rack=4, gpus_per_node=8, island_size=8,
                    island_penalty=1.0, rack_penalty=1.3)  # fmt: skip
# Nodes whose 8 GPUs form two NVLink islands of 4 (DGX-1's hybrid cube-mesh: two fully linked
# quads; PCIe servers with 4-way NVLink bridges): a pod across both quads pays PCIe.
QUADS = Topology("quads", racks=2, nodes_per_rack=8, gpus_per_node=8, island_size=4,
                 island_penalty=1.25, rack_penalty=1.3)  # fmt: skip
TOPOLOGIES = {t.name: t for t in (DGX_H100, QUADS)}
