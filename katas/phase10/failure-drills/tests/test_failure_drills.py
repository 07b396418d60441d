"""Public tests of failure-drills: the shipped drill (fleet.random_scenario(2359)), a few cases by
hand, and the runbooks' structure. The hidden tests run the same checks on fresh fleets and
fault schedules from the run seed, and adversarial cases (README.md, "How it is graded")."""

from __future__ import annotations

import dataclasses
from typing import Any

SHIPPED = 2359  # the shipped drill's seed


def one_node(fleet: Any, **policy: Any) -> tuple[Any, Any]:
    """A one-node fleet (8 GPUs, two ports, "/"), and its policy."""
    node = fleet.NodeInfo(
        "gpu-x01",
        "rx",
        tuple(
            fleet.GpuInfo(i, f"00000000:{0x18 + 0x11 * i:02X}:00.0", f"GPU-{i}") for i in range(8)
        ),
        ("mlx5_0", "mlx5_1"),
        ("/",),
    )
    return node, fleet.Policy(**policy)


def healthy_sample(fleet: Any, node: Any, tick: int, **gpu3: Any) -> Any:
    gpus = []
    for g in node.gpus:
        s = fleet.GpuSample(g.index, True, 60, 1980, (), 0, 0, False, False)
        gpus.append(dataclasses.replace(s, **gpu3) if g.index == 3 else s)
    nics = tuple(fleet.NicSample(n, True, 0) for n in node.nics)
    disks = (fleet.DiskSample("/", 10, 100),)
    return fleet.NodeSample(node.name, tick, tuple(gpus), nics, disks, ())


# --------------------------------------------------------------------------- detect
def test_detect_shipped_drill(
    detect: Any, fleet: Any, drill: Any, incidents_of: Any, kata_metrics: Any
) -> None:
    sc = fleet.random_scenario(SHIPPED)
    _, seen = drill(sc, detector_class=detect.Detector)
    onset = {(f.kind, f.node, f.device): f.onset for f in sc.faults}
    for t, i in seen:  # time to detect, in ticks after the fault began (the report shows it)
        if (i.kind, i.node, i.device) in onset:
            kata_metrics[f"TTD {i.kind}, ticks"] = t - onset[(i.kind, i.node, i.device)]
    want = [(t, i.kind, i.node, i.device, i.first_seen)
            for t, incs in fleet.truth_incidents(sc).items() for i in incs]  # fmt: skip
    assert incidents_of(seen) == sorted(want), "(tick reported, kind, node, device, first_seen)"
    assert all(i.evidence and all(isinstance(e, str) for e in i.evidence) for _, i in seen)


def test_detect_xid_lines(detect: Any, fleet: Any) -> None:
    node, policy = one_node(fleet)
    det = detect.Detector([node], policy)
    assert det.observe(0, {node.name: healthy_sample(fleet, node, 0)}) == []
    s = healthy_sample(fleet, node, 1)
    app = fleet.xid_line(node, 2, 13, 1, 4242)
    assert "PCI:0000:3a:00" in app  # GPU 2's bus id is 00000000:3A:00.0
    assert det.observe(1, {node.name: dataclasses.replace(s, kernel_log=(app,))}) == [], (
        "XID 13 is the application's error: no incident"
    )
    lost = fleet.xid_line(node, 2, 79, 2, 0)
    got = det.observe(2, {node.name: dataclasses.replace(healthy_sample(fleet, node, 2),
                                                         kernel_log=(lost,))})  # fmt: skip
    assert [(i.kind, i.node, i.device, i.first_seen) for i in got] == [
        ("gpu-lost", "gpu-x01", "gpu2", 2)
    ]
    assert lost in got[0].evidence, "the XID line is evidence"


def test_detect_thermal_debounce(detect: Any, fleet: Any) -> None:
    node, policy = one_node(fleet, thermal_ticks=3)
    det = detect.Detector([node], policy)
    hot = ("hw_slowdown", "hw_thermal_slowdown")
    runs = [(), hot, hot, (), hot, hot, hot, hot]  # a run of 2 (noise), then one of 4
    got = []
    for t, reasons in enumerate(runs):
        got += det.observe(t, {node.name: healthy_sample(fleet, node, t, throttle=reasons)})
    assert [(i.kind, i.device, i.first_seen) for i in got] == [("thermal", "gpu3", 4)]


def test_detect_noise_only(detect: Any, fleet: Any, drill: Any) -> None:
    sc = fleet.random_scenario(SHIPPED + 1, faults=0)
    _, seen = drill(sc, detector_class=detect.Detector)
    assert seen == [], "a fleet with noise only (spikes, a single SBE, lone flaps, power capping)"


# --------------------------------------------------------------------------- remediate
def test_remediate_shipped_drill(remediate: Any, fleet: Any, judged: Any) -> None:
    v = judged(fleet.random_scenario(SHIPPED), remediate.Remediator)
    assert not v.problems(), v.problems()


def test_remediate_each_kind(remediate: Any, fleet: Any, judged: Any) -> None:
    for k, kind in enumerate(fleet.KINDS):
        sc = fleet.random_scenario(SHIPPED + 10 + k, nodes=12, faults=1, kinds=(kind,),
                                   policy=fleet.Policy(max_out_fraction=0.25))  # fmt: skip
        v = judged(sc, remediate.Remediator)
        assert not v.problems(), (
            f"one {kind} fault (random_scenario({SHIPPED + 10 + k})):\n{v.problems()}"
        )


def test_remediate_cap(remediate: Any, fleet: Any, judged: Any) -> None:
    """Thermal faults on 6 of 12 nodes at once (a cooling failure), a cap of 2 nodes."""
    base = fleet.random_scenario(SHIPPED + 20, nodes=12, faults=0)
    faults = tuple(fleet.Fault("thermal", n.name, "gpu0", 10) for n in base.nodes[:6])
    sc = dataclasses.replace(base, faults=faults, noise=(), maintenance=(),
                             policy=fleet.Policy(max_out_fraction=0.2))  # fmt: skip
    v = judged(sc, remediate.Remediator)
    assert not v.problems(), v.problems()


def test_remediate_timeline_picture(
    remediate: Any, fleet: Any, drill: Any, kata_metrics: Any
) -> None:
    """The shipped drill as your Remediator ran it (the report shows the picture)."""
    sc = fleet.random_scenario(SHIPPED)
    fl, seen = drill(sc, remediator_class=remediate.Remediator, feed=fleet.truth_incidents(sc))
    svg = fleet.timeline_svg(sc, fl.actions, seen)
    kata_metrics["svg"] = svg
    kata_metrics["label"] = "your Remediator on the shipped drill (C D R B E U: the actions)"
    assert fl.actions and svg.startswith("<svg"), "no action on the shipped drill"


# --------------------------------------------------------------------------- runbooks
def test_runbooks_structure(runbooks: Any, books: Any) -> None:
    assert set(runbooks) == set(books.KINDS), f"runbooks for {sorted(runbooks)}"
    for kind, book in runbooks.items():
        assert tuple(book) == books.SECTIONS, f"{kind}: sections {list(book)}"
        thin = [name for name, text in book.items() if books.too_thin(text)]
        assert not thin, f"{kind}: sections with under 6 words or a TODO: {thin}"


def test_runbooks_gpu_lost(runbooks: Any, books: Any) -> None:
    book = runbooks["gpu-lost"]
    assert books.xids_named(book["Detection"]) == {79}
    assert books.mitigation_steps(book["Mitigation"]) == ["cordon", "drain", "reboot", "uncordon"]
