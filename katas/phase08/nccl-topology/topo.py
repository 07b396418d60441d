"""Reading `nvidia-smi topo -m`, and what each link is worth to NCCL: the file you edit
(tasks `parse` and `bandwidth`)."""

from __future__ import annotations

from harness import todo

from .topology import NVLINK_GBPS, PCI_GBPS, PCIE_KINDS, SMP_GBPS, Topology  # noqa: F401


def parse_topo(text: str) -> Topology:
    """The Topology that `nvidia-smi topo -m` printed in `text`.

    The header line names the devices (the columns before "CPU Affinity"); each following line
    up to the first blank line or "Legend:" is a device's row: its name, one cell per device
    ("X" on the diagonal, NV#, PIX, PXB, PHB, NODE or SYS), then for a GPU its CPU affinity and
    NUMA affinity (and maybe a GPU NUMA ID). Columns are separated by tabs and/or spaces;
    nvidia-smi may underline the header with terminal escape codes (ESC [4m ... ESC [0m). The
    "NIC Legend:" at the end maps NIC0.. to device names (mlx5_0, ...).

    Raises ValueError naming the device (and the column) when the matrix is not one: a row with
    too few cells, an unknown link kind, a diagonal that is not X (or an X off it), a cell that
    differs from its mirror image, a device with no row or two rows, a row for no header device.
    """
    todo("parse_topo")


def link_gbps(kind: str, arch: str = "sm_80", cpu: str = "intel") -> float:
    """NCCL's bandwidth in GB/s (one direction) of a path of this kind between two GPUs:
    NV# is # x NVLINK_GBPS[arch]; PIX, PXB, PHB and NODE stay on PCIe (PCI_GBPS); SYS also
    crosses the CPUs' interconnect, so it is the smaller of PCI_GBPS and SMP_GBPS[cpu].
    ValueError for a kind that is none of these."""
    todo("link_gbps")


def bandwidth_matrix(topo: Topology, arch: str = "sm_80", cpu: str = "intel") -> list[list[float]]:
    """bw[i][j]: GB/s between the i-th and the j-th GPU of topo.gpus (link_gbps of their link);
    0.0 on the diagonal."""
    todo("bandwidth_matrix")


def closest_nic(topo: Topology, gpu: str) -> str | None:
    """The NIC nearest `gpu`: the one whose link kind comes earliest in PCIE_KINDS (PIX before
    PXB before PHB ...), the lower NIC index on a tie; None on a machine without NICs."""
    todo("closest_nic")


def gpudirect_rdma(topo: Topology, gpu: str, nic: str, level: str = "PXB") -> bool:
    """Whether NCCL uses GPUDirect RDMA between `gpu` and `nic`: their link kind is `level` or
    closer in PCIE_KINDS (NCCL_NET_GDR_LEVEL; NCCL's default is PXB)."""
    todo("gpudirect_rdma")
