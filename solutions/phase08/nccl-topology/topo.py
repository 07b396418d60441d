"""Reading `nvidia-smi topo -m`, and what each link is worth to NCCL: reference solution."""

from __future__ import annotations

import re

from .topology import NVLINK_GBPS, PCI_GBPS, PCIE_KINDS, SMP_GBPS, Topology

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_KIND = re.compile(r"^(X|NV[1-9][0-9]*|PIX|PXB|PHB|NODE|SYS)$")


def parse_topo(text: str) -> Topology:
    """The Topology that `nvidia-smi topo -m` printed in `text`.

    Raises ValueError naming the device (and the column) when the matrix is not one: a row with
    the wrong number of cells, an unknown link kind, a diagonal that is not X, a cell that
    differs from its mirror image, a device with no row.
    """
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    head = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if head is None:
        raise ValueError("no topology matrix in the text: it is empty")
    tokens = lines[head].split()
    devices = tokens[: tokens.index("CPU")] if "CPU" in tokens else tokens
    if not devices or len(set(devices)) != len(devices):
        raise ValueError(f"the header names no devices or repeats one: {lines[head].strip()!r}")
    link: dict[tuple[str, str], str] = {}
    cpu: dict[str, str] = {}
    numa: dict[str, str] = {}
    rows: set[str] = set()
    i = head + 1
    while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith("Legend"):
        cells = lines[i].split()
        name, rest = cells[0], cells[1:]
        if name not in devices:
            raise ValueError(f"row {name!r} is not a device of the header ({', '.join(devices)})")
        if name in rows:
            raise ValueError(f"device {name} has two rows")
        rows.add(name)
        if len(rest) < len(devices):
            raise ValueError(
                f"row {name} has {len(rest)} cells for {len(devices)} devices: {lines[i].strip()!r}"
            )
        for col, cell in zip(devices, rest, strict=False):
            if not _KIND.match(cell):
                raise ValueError(f"row {name}, column {col}: unknown link kind {cell!r}")
            if (col == name) != (cell == "X"):
                raise ValueError(f"row {name}, column {col}: {cell!r} (X is the diagonal, only)")
            if col != name:
                link[(name, col)] = cell
        extra = rest[len(devices) :]
        if name.startswith("GPU"):
            if extra:
                cpu[name] = extra[0]
            if len(extra) > 1:
                numa[name] = extra[1]
        i += 1
    missing = [d for d in devices if d not in rows]
    if missing:
        raise ValueError(f"no row for {', '.join(missing)}")
    for (a, b), kind in link.items():
        if link[(b, a)] != kind:
            raise ValueError(
                f"{a}-{b} is {kind} but {b}-{a} is {link[(b, a)]}: the matrix is not symmetric"
            )
    nic_names: dict[str, str] = {}
    for ln in lines[i:]:
        m = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", ln)
        if m:
            nic_names[m.group(1)] = m.group(2)
    return Topology(devices, link, cpu, numa, nic_names)


def link_gbps(kind: str, arch: str = "sm_80", cpu: str = "intel") -> float:
    """NCCL's bandwidth in GB/s (one direction) of a path of this kind between two GPUs."""
    if kind.startswith("NV"):
        return int(kind[2:]) * NVLINK_GBPS[arch]
    if kind == "SYS":
        return min(PCI_GBPS, SMP_GBPS[cpu])
    if kind in PCIE_KINDS:
        return PCI_GBPS
    raise ValueError(f"unknown link kind {kind!r}")


def bandwidth_matrix(topo: Topology, arch: str = "sm_80", cpu: str = "intel") -> list[list[float]]:
    """bw[i][j]: GB/s between the i-th and j-th GPU of topo.gpus; 0.0 on the diagonal."""
    g = topo.gpus
    return [[0.0 if a == b else link_gbps(topo.link[(a, b)], arch, cpu) for b in g] for a in g]


def closest_nic(topo: Topology, gpu: str) -> str | None:
    """The NIC nearest `gpu` (the earliest kind in PCIE_KINDS; the lower NIC index on a tie),
    or None on a machine without NICs."""
    nics = topo.nics
    if not nics:
        return None
    return min(nics, key=lambda n: (PCIE_KINDS.index(topo.link[(gpu, n)]), nics.index(n)))


def gpudirect_rdma(topo: Topology, gpu: str, nic: str, level: str = "PXB") -> bool:
    """Whether NCCL would use GPUDirect RDMA between them: their path is `level` or closer
    (NCCL_NET_GDR_LEVEL, default PXB)."""
    return PCIE_KINDS.index(topo.link[(gpu, nic)]) <= PCIE_KINDS.index(level)
