"""Given: what a topology is, NCCL's link bandwidths, and the functions that *score* a ring or a
tree (scoring is easy; finding the best one is your job, in search.py).

The bandwidth figures are NCCL's own (src/graph/topo.h, NCCL 2.18-2.21): the GB/s per direction
its graph search assumes for one link of each kind, before it measures anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The link kinds `nvidia-smi topo -m` prints between two devices, closest first.
#   X    = Self
#   NV#  = Connection traversing a bonded set of # NVLinks
#   PIX  = Connection traversing at most a single PCIe bridge
#   PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
#   PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
#   NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges
#          within a NUMA node
#   SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
#          (e.g., QPI/UPI)
PCIE_KINDS = ("PIX", "PXB", "PHB", "NODE", "SYS")
KINDS = ("X", "NV", *PCIE_KINDS)  # "NV" stands for every NV# (NV1, NV2, ..., NV18)

# NCCL's per-link bandwidth in GB/s, one direction (topo.h: SM70_NVLINK_BW 20.0, SM80 20.0,
# SM86 12.0, SM90 20.6, PCI_BW 12.0 for a Gen3 x16 link, QPI_BW 6.0, SKL_QPI_BW 10.0).
NVLINK_GBPS = {"sm_70": 20.0, "sm_80": 20.0, "sm_86": 12.0, "sm_90": 20.6}
PCI_GBPS = 12.0
SMP_GBPS = {"intel": 10.0, "amd": 16.0, "other": 6.0}  # between NUMA nodes: UPI, Infinity Fabric


@dataclass
class Topology:
    """What `nvidia-smi topo -m` says about one machine.

    devices: the matrix's device names in order, GPUs first as printed ("GPU0", ..., "NIC0", ...).
    link: the matrix cell for every ordered pair of distinct devices, e.g.
        link[("GPU0", "GPU1")] == "NV12", link[("GPU0", "NIC0")] == "PXB".
    cpu_affinity, numa_affinity: per GPU, the columns of the same names as printed
        ("0-47,96-143"; "0"; "N/A").
    nic_names: the NIC legend, e.g. {"NIC0": "mlx5_0"}.
    """

    devices: list[str]
    link: dict[tuple[str, str], str]
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> list[str]:
        return [d for d in self.devices if d.startswith("GPU")]

    @property
    def nics(self) -> list[str]:
        return [d for d in self.devices if d.startswith("NIC")]


LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def render(topo: Topology) -> str:
    """The text `nvidia-smi topo -m` prints for `topo` (one spacing of the many it uses)."""
    cols = topo.devices
    head = "\t" + "\t".join(cols) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    rows = [head]
    for a in cols:
        cells = ["X" if a == b else topo.link[(a, b)] for b in cols]
        extra = (
            [topo.cpu_affinity.get(a, ""), topo.numa_affinity.get(a, ""), "N/A"]
            if a.startswith("GPU")
            else []
        )
        rows.append(a + "\t " + "\t".join(cells) + ("\t" + "\t".join(extra) if extra else ""))
    text = "\n".join(rows) + "\n" + LEGEND
    if topo.nic_names:
        text += "\nNIC Legend:\n\n" + "".join(f"  {n}: {m}\n" for n, m in topo.nic_names.items())
    return text


def ring_bandwidth(bw: list[list[float]], ring: list[int]) -> float:
    """The bandwidth of a ring that visits `ring`'s GPUs in order and returns to the first: its
    slowest hop (every hop carries the same bytes at the same time, so the slowest sets the pace)."""
    n = len(ring)
    if n < 2:
        return float("inf")
    return min(bw[ring[i]][ring[(i + 1) % n]] for i in range(n))


def tree_bandwidth(bw: list[list[float]], parent: list[int | None]) -> float:
    """The bandwidth of a tree given by `parent` (parent[root] is None): its slowest edge."""
    edges = [bw[c][p] for c, p in enumerate(parent) if p is not None]
    return min(edges) if edges else float("inf")


def ring_svg(bw: list[list[float]], ring: list[int], title: str) -> str:
    """The GPUs on a circle, every link drawn by its bandwidth (thicker is faster), and `ring`
    on top in orange with its bottleneck hop in red: a picture for the report."""
    import math

    n = len(bw)
    w, h, r0 = 420, 440, 160
    pos = [
        (
            w / 2 + r0 * math.sin(2 * math.pi * i / n),
            40 + h / 2 - r0 * math.cos(2 * math.pi * i / n),
        )
        for i in range(n)
    ]
    top = max((bw[i][j] for i in range(n) for j in range(n) if i != j), default=1.0) or 1.0
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 40}" font-family="sans-serif" font-size="12">'
    ]
    out.append(f'<text x="10" y="20" font-size="14">{title}</text>')
    for i in range(n):
        for j in range(i + 1, n):
            (x1, y1), (x2, y2) = pos[i], pos[j]
            out.append(
                f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#bbb" stroke-width="{0.5 + 6 * bw[i][j] / top:.2f}"/>'
            )
    slow = ring_bandwidth(bw, ring) if n > 1 else 0.0
    for k in range(len(ring) if n > 2 else 0):
        a, b = ring[k], ring[(k + 1) % len(ring)]
        (x1, y1), (x2, y2) = pos[a], pos[b]
        colour = "#d62728" if bw[a][b] == slow else "#ff7f0e"
        out.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" stroke-width="2.5"/>'
        )
    for i, (x, y) in enumerate(pos):
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="16" fill="#1f77b4"/>')
        out.append(
            f'<text x="{x:.1f}" y="{y + 4:.1f}" fill="white" text-anchor="middle">GPU{i}</text>'
        )
    out.append(
        f'<text x="10" y="{h + 30}">ring {ring}: bottleneck {slow:g} GB/s (red); grey: every link, width by GB/s</text>'
    )
    out.append("</svg>")
    return "\n".join(out)
