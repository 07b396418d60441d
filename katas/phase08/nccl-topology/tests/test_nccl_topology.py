"""Public tests: the four machines of the README, worked examples, one group per task.
The hidden tests then do the same on machines nobody has seen, against an exhaustive search."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import BOXES

# ------------------------------------------------------------------------------ parse


def test_parse_dgx_a100(topo: Any, box_text: Any) -> None:
    t = topo.parse_topo(box_text("dgx-a100"))
    assert t.gpus == [f"GPU{i}" for i in range(8)], f"8 GPUs, in the header's order; got {t.gpus}"
    assert t.nics == [f"NIC{i}" for i in range(8)], f"8 NICs; got {t.nics}"
    assert t.link[("GPU0", "GPU5")] == "NV12", "every GPU pair of a DGX A100 is NV12 (NVSwitch)"
    assert t.link[("GPU3", "NIC2")] == "PXB", "GPU3 and NIC2 share a PCIe switch: PXB"
    assert t.link[("NIC2", "GPU3")] == "PXB", "the matrix is symmetric: link[(NIC2, GPU3)] too"
    assert ("GPU0", "GPU0") not in t.link, "the diagonal (X) is not a link"
    assert len(t.link) == 16 * 15, (
        f"one entry per ordered pair of distinct devices; got {len(t.link)}"
    )
    assert t.cpu_affinity["GPU4"] == "112-127,240-255", "GPU4's CPU affinity column"
    assert t.numa_affinity["GPU4"] == "7", "GPU4's NUMA affinity column"
    assert t.nic_names["NIC7"] == "mlx5_7", "the NIC legend at the end"


def test_parse_underlined_header(topo: Any, box_text: Any) -> None:
    """nvidia-smi underlines the header with escape codes when it prints to a terminal."""
    text = box_text("dgx-1v")
    assert "\x1b[4m" in text, "test data: the DGX-1 output keeps nvidia-smi's escape codes"
    t = topo.parse_topo(text)
    assert t.devices[0] == "GPU0" and t.devices[-1] == "NIC3", f"devices: {t.devices}"
    assert t.link[("GPU0", "GPU3")] == "NV2" and t.link[("GPU0", "GPU5")] == "SYS", "DGX-1 links"


def test_parse_spaces_instead_of_tabs(topo: Any, box_text: Any) -> None:
    text = box_text("pcie-2socket").replace("\t", "   ")
    t = topo.parse_topo(text)
    assert t.link[("GPU0", "GPU1")] == "PIX" and t.link[("GPU1", "GPU2")] == "SYS", "PCIe box links"
    assert t.numa_affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}, "NUMA column"


@pytest.mark.parametrize(
    "change, names",
    [
        (("GPU2\t SYS\tSYS\tX\tPIX", "GPU2\t SYS\tSYS\t X\tPIY"), "PIY"),  # no such kind
        (
            ("GPU2\t SYS\tSYS\tX\tPIX", "GPU2\t SYS\tSYS\tPIX\tPIX"),
            "GPU2",
        ),  # no X on the diagonal
        (("GPU2\t SYS\tSYS\tX\tPIX", "GPU2\t SYS\tPIX\tX\tPIX"), "GPU1"),  # not symmetric
        (
            ("GPU2\t SYS\tSYS\tX\tPIX\tSYS\t16-31\t1\tN/A", "GPU2\t SYS\tSYS\tX"),
            "GPU2",
        ),  # too few cells
    ],
)
def test_parse_refuses_what_is_not_a_matrix(
    topo: Any, box_text: Any, change: Any, names: str
) -> None:
    old, new = change
    text = box_text("pcie-2socket")
    assert old in text, "test data: the line to break is in the file"
    assert topo.parse_topo(text).link[("GPU2", "GPU3")] == "PIX", "the unbroken matrix parses first"
    with pytest.raises(ValueError, match=names):
        topo.parse_topo(text.replace(old, new, 1))


# ------------------------------------------------------------------------------ bandwidth


def test_bandwidth_links(topo: Any) -> None:
    assert topo.link_gbps("NV12", "sm_80") == 240.0, "12 NVLink3 links of 20 GB/s"
    assert topo.link_gbps("NV18", "sm_90") == pytest.approx(370.8), "18 NVLink4 links of 20.6 GB/s"
    assert topo.link_gbps("PXB") == 12.0, "PCIe paths are PCI_BW"
    assert topo.link_gbps("SYS", cpu="intel") == 10.0, "SYS: the smaller of PCIe and UPI"
    assert topo.link_gbps("SYS", cpu="amd") == 12.0, "SYS on AMD: PCIe is the smaller"
    with pytest.raises(ValueError):
        topo.link_gbps("NVX")


def test_bandwidth_matrix_dgx_1v(topo: Any, box_text: Any) -> None:
    bw = topo.bandwidth_matrix(topo.parse_topo(box_text("dgx-1v")), "sm_70", "intel")
    assert len(bw) == 8 and all(len(r) == 8 for r in bw), "8 x 8: GPUs only"
    assert bw[0][0] == 0.0 and bw[0][1] == 20.0 and bw[0][3] == 40.0 and bw[0][5] == 10.0, bw[0]


def test_bandwidth_closest_nic(topo: Any, box_text: Any) -> None:
    t = topo.parse_topo(box_text("dgx-1v"))
    assert [topo.closest_nic(t, g) for g in t.gpus] == [
        "NIC0",
        "NIC0",
        "NIC1",
        "NIC1",
        "NIC2",
        "NIC2",
        "NIC3",
        "NIC3",
    ]
    assert topo.gpudirect_rdma(t, "GPU0", "NIC0") is True, "PIX is within NCCL's default PXB"
    assert topo.gpudirect_rdma(t, "GPU0", "NIC1") is False, "PHB is beyond PXB"
    assert topo.gpudirect_rdma(t, "GPU0", "NIC1", level="PHB") is True, "NCCL_NET_GDR_LEVEL=PHB"


# ------------------------------------------------------------------------------ ring


@pytest.mark.parametrize(
    "box, want",
    [("dgx-a100", 240.0), ("dgx-1v", 40.0), ("hgx-h100", 370.8), ("pcie-2socket", 10.0)],
)
def test_ring_on_the_shipped_machines(
    topo: Any, search: Any, topology: Any, checks: Any, box_text: Any, box: str, want: float
) -> None:
    arch, cpu = BOXES[box]
    bw = topo.bandwidth_matrix(topo.parse_topo(box_text(box)), arch, cpu)
    ring = search.best_ring(bw)
    assert checks.ring(ring, len(bw)) is None, checks.ring(ring, len(bw))
    assert topology.ring_bandwidth(bw, ring) == pytest.approx(want), (
        f"{box}: the best ring runs at {want} GB/s; {ring} runs at {topology.ring_bandwidth(bw, ring)}"
    )


def test_ring_greedy_is_not_enough(search: Any, topology: Any, checks: Any) -> None:
    """From GPU 0 the fastest hop is GPU 1, but a ring through 0-1 must come back over a slow link."""
    bw = [
        [0, 50, 40, 40, 5],
        [50, 0, 5, 5, 5],
        [40, 5, 0, 40, 40],
        [40, 5, 40, 0, 40],
        [5, 5, 40, 40, 0],
    ]
    bw = [[float(x) for x in r] for r in bw]
    ring = search.best_ring(bw)
    assert checks.ring(ring, 5) is None, checks.ring(ring, 5)
    # GPU 1 has only one fast link, so every ring pays 5 GB/s somewhere: 5 is the best here
    assert topology.ring_bandwidth(bw, ring) == 5.0, f"{ring}"


# ------------------------------------------------------------------------------ tree


def test_tree_fanout_binds_at_a_hub(search: Any, topology: Any, checks: Any) -> None:
    """GPU 0 has 100 GB/s to everyone, the others 30 among themselves and 10 to GPU 5."""
    n = 6
    bw = [[0.0 if i == j else 100.0 if 0 in (i, j) else 30.0 for j in range(n)] for i in range(n)]
    for j in range(1, n - 1):
        bw[j][5] = bw[5][j] = 10.0
    parent = search.best_tree(bw, root=0, fanout=2)
    assert checks.tree(parent, n, 0, 2) is None, checks.tree(parent, n, 0, 2)
    assert topology.tree_bandwidth(bw, parent) == 30.0, (
        f"the hub takes 5 (100) and one more; {parent}"
    )
    star = search.best_tree(bw, root=0, fanout=5)
    assert topology.tree_bandwidth(bw, star) == 100.0, f"with fanout 5 the star is best; {star}"


def test_tree_on_the_dgx_1v(
    topo: Any, search: Any, topology: Any, checks: Any, box_text: Any
) -> None:
    bw = topo.bandwidth_matrix(topo.parse_topo(box_text("dgx-1v")), "sm_70", "intel")
    parent = search.best_tree(bw, root=0, fanout=1)
    assert checks.tree(parent, 8, 0, 1) is None, checks.tree(parent, 8, 0, 1)
    assert topology.tree_bandwidth(bw, parent) == 40.0, f"a chain of NV2 links exists: {parent}"


def test_tree_fanout_zero(search: Any) -> None:
    with pytest.raises(ValueError):
        search.best_tree([[0.0, 1.0], [1.0, 0.0]], 0, 0)


# ------------------------------------------------------------------------------ place


def test_place_dgx_1v(topo: Any, search: Any, topology: Any, box_text: Any) -> None:
    bw = topo.bandwidth_matrix(topo.parse_topo(box_text("dgx-1v")), "sm_70", "intel")
    got = search.pick_gpus(bw, 4)
    assert got == sorted(got) and len(set(got)) == 4, f"4 distinct GPUs, sorted: {got}"
    sub = [[bw[a][b] for b in got] for a in got]
    best = topology.ring_bandwidth(sub, search.best_ring(sub))
    assert best == 20.0, (
        f"no 4 GPUs of a DGX-1 form an NV2 ring, many an NV1 one: {got} gives {best}"
    )


def test_place_pcie_pair(topo: Any, search: Any, box_text: Any) -> None:
    bw = topo.bandwidth_matrix(topo.parse_topo(box_text("pcie-2socket")), "sm_80", "intel")
    assert search.pick_gpus(bw, 2) in ([0, 1], [2, 3]), "two GPUs behind one PCIe switch"
    with pytest.raises(ValueError):
        search.pick_gpus(bw, 5)


def test_ring_picture(
    topo: Any, search: Any, topology: Any, box_text: Any, kata_metrics: Any
) -> None:
    import xml.etree.ElementTree as ET

    bw = topo.bandwidth_matrix(topo.parse_topo(box_text("dgx-1v")), "sm_70", "intel")
    ring = search.best_ring(bw)
    svg = topology.ring_svg(bw, ring, "your ring on a DGX-1 (V100, hybrid cube-mesh)")
    assert ET.fromstring(svg).tag.endswith("svg"), "the picture is an SVG"
    kata_metrics["svg"] = svg
    kata_metrics["label"] = "your best_ring on the DGX-1's NVLink graph"
    kata_metrics["ring GB/s"] = topology.ring_bandwidth(bw, ring)
