"""Hidden tests of failure-drills: fresh fleets and fault schedules from the run seed, judged
against the injection's ground truth (the scenario's faults: what was injected, where, when),
and adversarial fixed cases (boundaries of the debounce rules, two faults on a node, a fault
during a drain, a fleet-wide alarm, look-alike XID lines)."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

import pytest

# The ground truth of the runbooks (README.md): XIDs per kind, the happy path's steps.
TRUE_XIDS = {
    "gpu-lost": {79},
    "ecc": {48, 94, 95},
    "row-remap-failure": {64},
    "thermal": set(),
    "nic-flap": set(),
    "disk-full": set(),
}
APP_XIDS_REQUIRED, APP_XIDS_ALLOWED = {13, 31, 43}, {13, 31, 43, 45}
TRUE_STEPS = {
    "gpu-lost": ["cordon", "drain", "reboot", "uncordon"],
    "ecc": ["cordon", "drain", "reset_gpu", "uncordon"],
    "row-remap-failure": ["cordon", "drain", "escalate"],
    "thermal": ["cordon", "drain", "escalate"],
    "nic-flap": ["cordon", "drain", "escalate"],
    "disk-full": ["cordon", "escalate"],
    "application-xid": [],
}
KINDS = tuple(TRUE_STEPS)[:-1]


def seeds(kata_rng: Any, n: int) -> list[int]:
    return [int(x) for x in kata_rng.integers(0, 2**31, n)]


def truth_key(fleet: Any, sc: Any) -> list[tuple[int, str, str, str, int]]:
    return sorted((t, i.kind, i.node, i.device, i.first_seen)
                  for t, incs in fleet.truth_incidents(sc).items() for i in incs)  # fmt: skip


def compare(got: list[Any], want: list[Any], what: str) -> str:
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    return (f"Detector.observe on {what}: (tick reported, kind, node, device, first_seen) "
            f"reported but not injected (or at another tick): {extra}; injected but not "
            f"reported (or reported at another tick): {missing}")  # fmt: skip


def one_node(fleet: Any, domain: int = 0, buses: list[int] | None = None, **policy: Any) -> Any:
    buses = buses or [0x18, 0x2A, 0x3B, 0x4C, 0x5D, 0x79, 0x94, 0xB5]
    node = fleet.NodeInfo(
        "node-q7",
        "rq",
        tuple(
            fleet.GpuInfo(i, f"{domain:08X}:{b:02X}:00.0", f"GPU-{i}") for i, b in enumerate(buses)
        ),
        ("mlx5_0", "mlx5_1"),
        ("/",),
    )
    return node, fleet.Policy(**policy)


def sample(fleet: Any, node: Any, tick: int, log: tuple[str, ...] = (), link: int = 0,
           gpu: int = 3, **fields: Any) -> Any:  # fmt: skip
    gpus = []
    for g in node.gpus:
        s = fleet.GpuSample(g.index, True, 60, 1980, (), 0, 0, False, False)
        gpus.append(dataclasses.replace(s, **fields) if g.index == gpu else s)
    nics = (fleet.NicSample("mlx5_0", True, 0), fleet.NicSample("mlx5_1", True, link))
    return fleet.NodeSample(
        node.name, tick, tuple(gpus), nics, (fleet.DiskSample("/", 1, 10),), log
    )


def feed(det: Any, node: Any, samples: list[Any]) -> list[tuple[int, str, str, int]]:
    out = []
    for t, s in enumerate(samples):
        for i in det.observe(t, {node.name: s}):
            out.append((t, i.kind, i.device, i.first_seen))
    return out


# --------------------------------------------------------------------------- detect
@pytest.mark.parametrize("kind", KINDS)
def test_detect_random_fleets(detect: Any, fleet: Any, drill: Any, kind: str, kata_rng: Any,
                              incidents_of: Any) -> None:  # fmt: skip
    for seed in seeds(kata_rng, 3):
        plan = (*KINDS, kind)  # a fault of every kind, and a second one of `kind`
        sc = fleet.random_scenario(seed, plan=plan)
        _, seen = drill(sc, detector_class=detect.Detector)
        got, want = incidents_of(seen), truth_key(fleet, sc)
        assert got == want, compare(got, want, f"fleet.random_scenario({seed}, plan={plan})")
        xids = {(f.node, f.device, f.kind): f.xid for f in sc.faults if f.xid is not None}
        for _, i in seen:
            assert i.evidence and all(type(e) is str and e.strip() for e in i.evidence), (
                f"Detector.observe: incident {i.kind} on {i.node} {i.device} has no evidence "
                f"lines, or an empty one: {i.evidence} (fleet.random_scenario({seed}))"
            )
            xid = xids.get((i.node, i.device, i.kind))
            assert xid is None or any("NVRM: Xid" in e and f"): {xid}," in e for e in i.evidence), (
                f"Detector.observe: incident {i.kind} on {i.node} {i.device} does not carry its "
                f"XID {xid} line as evidence: {i.evidence} (fleet.random_scenario({seed}))"
            )


@pytest.mark.kata_gate(
    "Detector reports incidents on fleets whose only signals are noise (temperature spikes "
    "under the slowdown threshold, single SBEs, fewer link-down events than the policy counts "
    "in any window, power capping, SW and short HW thermal slowdowns, XIDs 13/31/43/45, disks "
    "under the threshold)"
)
def test_detect_noise_is_no_incident(detect: Any, fleet: Any, drill: Any, kata_rng: Any) -> None:
    import random

    for seed in seeds(kata_rng, 4):
        base = fleet.random_scenario(seed, faults=0)
        r = random.Random(seed)
        noise: list[Any] = []
        for n in base.nodes:  # every kind of noise on every node
            for kind in ("temp-spike", "sbe", "flap", "throttle", "app-xid", "disk"):
                for _ in range(20):
                    if got := fleet.make_noise(r, n, base.policy, base.horizon, kinds=(kind,)):
                        noise += got
                        break
        sc = dataclasses.replace(base, noise=tuple(noise))
        _, seen = drill(sc, detector_class=detect.Detector)
        assert not seen, (
            f"Detector.observe reported {[(t, i.kind, i.node, i.device) for t, i in seen][:5]} "
            f"on a fleet with noise only (fleet.random_scenario({seed}, faults=0) with noise on "
            f"every node, policy {sc.policy})"
        )


@pytest.mark.kata_gate(
    "Detector reports an incident for an application XID (13, 31, 43, 45) on a GPU whose bus "
    "number, or in a line whose pid, reads like a fault's XID (79, 48, 94, 95, 64)"
)
def test_detect_application_xids(detect: Any, fleet: Any, kata_rng: Any) -> None:
    node, policy = one_node(fleet)
    det = detect.Detector([node], policy)
    samples = [sample(fleet, node, 0)]
    for t in range(1, 13):
        gpu = int(kata_rng.integers(0, 8))
        xid = int(kata_rng.choice([13, 31, 43, 45]))
        pid = int(kata_rng.choice([79, 48, 94, 95, 64, 1234]))
        samples.append(sample(fleet, node, t, log=(fleet.xid_line(node, gpu, xid, t, pid),)))
    got = feed(det, node, samples)
    assert got == [], (
        f"Detector.observe: {got} from application XIDs on buses {[g.pci_bus_id for g in node.gpus]} "
        f"(lines like {samples[1].kernel_log[0]!r})"
    )


XID_KIND = {79: "gpu-lost", 48: "ecc", 94: "ecc", 95: "ecc", 64: "row-remap-failure"}


@pytest.mark.kata_gate(
    "Detector ties an XID line (79, 48, 94, 95, 64) to another GPU or node than the one it "
    "names, or reports it without the line as evidence (random bus numbers, PCI domains 0 and "
    "1, two nodes with the same bus numbers)"
)
def test_detect_xid_by_pci_address(detect: Any, fleet: Any, kata_rng: Any) -> None:
    for domain in (0, 1):
        buses = sorted(int(b) for b in kata_rng.choice(range(0x10, 0xF0), 8, replace=False))
        a, policy = one_node(fleet, domain=domain, buses=buses)
        b = dataclasses.replace(a, name="node-q8")  # the same server model: the same bus ids
        det = detect.Detector([a, b], policy)
        det.observe(0, {a.name: sample(fleet, a, 0), b.name: sample(fleet, b, 0)})
        gpus = [int(g) for g in kata_rng.choice(8, 5, replace=False)]
        got, want, lines = [], [], {}
        for t, (xid, gpu) in enumerate(zip(XID_KIND, gpus, strict=True), start=1):
            line = fleet.xid_line(a, gpu, xid, t, 0 if xid in (79, 64) else 4242)
            both = t % 2 == 1
            samples = {a.name: sample(fleet, a, t, log=(line,)),
                       b.name: sample(fleet, b, t, log=(line,) if both else ())}  # fmt: skip
            for i in det.observe(t, samples):
                got.append((t, i.kind, i.node, i.device, i.first_seen))
                lines[(t, i.node)] = i.evidence
            for n in (a, b) if both else (a,):
                want.append((t, XID_KIND[xid], n.name, f"gpu{gpu}", t))
                assert line in lines.get((t, n.name), ()), (
                    f"Detector.observe: the incident of {line!r} on {n.name} must carry the line "
                    f"as evidence; it carries {lines.get((t, n.name))}"
                )
        assert sorted(got) == sorted(want), (
            f"Detector.observe on XID lines for GPUs {gpus} of nodes with buses "
            f"{[g.pci_bus_id for g in a.gpus]} (the odd ticks on both nodes): got {got}, "
            f"expected {want}"
        )


@pytest.mark.kata_gate(
    "disk-full detection disagrees with used_bytes >= policy.disk_full * size_bytes just under "
    "and just over the threshold, per mount"
)
def test_detect_disk_boundary(detect: Any, fleet: Any, kata_rng: Any) -> None:
    import math

    thr = float(kata_rng.choice([0.9, 0.925, 0.95, 0.97]))
    node, policy = one_node(fleet, disk_full=thr)
    node = dataclasses.replace(node, mounts=("/", "/local"))
    det = detect.Detector([node], policy)
    sizes = [int(kata_rng.integers(2**30, 2**43)) for _ in range(2)]
    under = [math.floor(thr * z) - 1 for z in sizes]
    over = [math.ceil(thr * z) + 1 for z in sizes]
    plan = [(under[0] - 10**6, 10), (under[0], under[1]), (under[0], over[1]),
            (over[0], over[1]), (sizes[0], sizes[1])]  # fmt: skip
    got = []
    for t, (u0, u1) in enumerate(plan):
        disks = (fleet.DiskSample("/", u0, sizes[0]), fleet.DiskSample("/local", u1, sizes[1]))
        s = dataclasses.replace(sample(fleet, node, t), disks=disks)
        got += [(t, i.kind, i.device, i.first_seen) for i in det.observe(t, {node.name: s})]
    want = [(2, "disk-full", "/local", 2), (3, "disk-full", "/", 3)]
    assert got == want, (
        f"Detector.observe with disk_full={thr}, sizes {sizes}: (used of /, used of /local) "
        f"per tick {plan}: got {got}, expected {want}"
    )


@pytest.mark.kata_gate(
    "Detector misses a fault whose XID line never reached the log (a GPU gone from the bus, a "
    "DBE counter that rose, a remap pending or failed, with no kernel-log line), or reports "
    "one without evidence lines"
)
def test_detect_state_without_log(detect: Any, fleet: Any, kata_rng: Any) -> None:
    """The kernel log can be lost (rate limits, a full disk, a crashed agent): the state tells."""
    for _ in range(3):
        node, policy = one_node(fleet)
        det = detect.Detector([node], policy)
        gpus = [int(g) for g in kata_rng.choice(8, 4, replace=False)]
        states = [
            ("gpu-lost", {"present": False, "temp_c": 0, "sm_clock_mhz": 0}),
            ("ecc", {"dbe": int(kata_rng.integers(1, 4))}),
            ("ecc", {"remap_pending": True}),
            ("row-remap-failure", {"remap_failure": True}),
        ]
        order = [int(i) for i in kata_rng.permutation(4)]
        samples, want = [sample(fleet, node, 0)], []
        for t, k in enumerate(order, start=1):
            kind, fields = states[k]
            samples.append(sample(fleet, node, t, gpu=gpus[k], **fields))
            want.append((t, kind, f"gpu{gpus[k]}", t))
        got = []
        for t, s in enumerate(samples):
            for i in det.observe(t, {node.name: s}):
                got.append((t, i.kind, i.device, i.first_seen))
                assert i.evidence and all(type(e) is str and e.strip() for e in i.evidence), (
                    f"Detector.observe: {i.kind} on {i.device} (state only) has no evidence "
                    f"lines: {i.evidence}"
                )
        assert got == want, (
            f"Detector.observe without XID lines (state only: "
            f"{[(f'gpu{gpus[k]}', states[k][1]) for k in order]} at ticks 1-4): got {got}, "
            f"expected {want}"
        )


def test_detect_two_faults_one_gpu_and_node(detect: Any, fleet: Any) -> None:
    """ecc on GPU 2, then its remap fails; thermal on GPU 5 meanwhile; one SBE on GPU 1."""
    node, policy = one_node(fleet, thermal_ticks=2)
    det = detect.Detector([node], policy)
    xid95 = fleet.xid_line(node, 2, 95, 1, 77)
    xid64 = fleet.xid_line(node, 2, 64, 3, 0)
    hot = ("hw_slowdown", "hw_thermal_slowdown")
    samples = [
        sample(fleet, node, 0),
        sample(fleet, node, 1, log=(xid95,), gpu=2, dbe=1, remap_pending=True),
        sample(fleet, node, 2, gpu=2, dbe=1, remap_pending=True),
        sample(fleet, node, 3, log=(xid64,), gpu=2, dbe=2, remap_failure=True),
        sample(fleet, node, 4, gpu=2, dbe=3, remap_failure=True),
    ]
    for t in (2, 3, 4):
        s = samples[t]
        gs = list(s.gpus)
        gs[5] = dataclasses.replace(gs[5], throttle=hot, temp_c=91)
        gs[1] = dataclasses.replace(gs[1], sbe=1)
        samples[t] = dataclasses.replace(s, gpus=tuple(gs))
    got = feed(det, node, samples)
    want = [(1, "ecc", "gpu2", 1), (3, "row-remap-failure", "gpu2", 3), (3, "thermal", "gpu5", 2)]
    assert sorted(got) == sorted(want), (
        f"Detector.observe: ecc on gpu2 at tick 1, its remap failing at 3, hw_thermal_slowdown "
        f"on gpu5 from 2 (thermal_ticks=2), one SBE on gpu1: got {got}, expected {want}"
    )


@pytest.mark.kata_gate(
    "nic-flap detection disagrees with the window rule at its boundary (flap_count link-down "
    "events spanning flap_window - 1 ticks and flap_window ticks, two in one tick, a counter "
    "reset by a reboot)"
)
def test_detect_flap_boundary(detect: Any, fleet: Any, kata_rng: Any) -> None:
    n = int(kata_rng.integers(2, 6))
    w = int(kata_rng.integers(n + 1, 15))
    cases = []
    # n events: the first at 2, the last at 2 + w - 1 (inside one window): an incident at the
    # last; the same with the last at 2 + w (no window holds them all): nothing
    for span, want in ((w - 1, [(2 + w - 1, "nic-flap", "mlx5_1", 2)]), (w, [])):
        ticks = [2] + [2 + span] * (n - 1)
        cases.append((ticks, want, f"{n} events at ticks {ticks}"))
    # all n in one tick: the counter jumps by n, the port is up at both samples
    cases.append(([5] * n, [(5, "nic-flap", "mlx5_1", 5)], f"{n} events within tick 5"))
    for ticks, want, what in cases:
        node, policy = one_node(fleet, flap_count=n, flap_window=w)
        det = detect.Detector([node], policy)
        horizon = max(ticks) + 3
        samples = [sample(fleet, node, t, link=sum(1 for x in ticks if x <= t))
                   for t in range(horizon)]  # fmt: skip
        got = feed(det, node, samples)
        assert got == want, (
            f"Detector.observe with flap_count={n}, flap_window={w}, {what}: got {got}, "
            f"expected {want}"
        )
    # a reboot: no samples for 3 ticks, the counter restarts at 0 and rises n - 1, then 1
    node, policy = one_node(fleet, flap_count=n, flap_window=w)
    det = detect.Detector([node], policy)
    seq: list[Any] = [sample(fleet, node, 0, link=7), sample(fleet, node, 1, link=7)]
    got = feed(det, node, seq)
    for t in (2, 3, 4):
        got += [(t, i.kind, i.device, i.first_seen) for i in det.observe(t, {node.name: None})]
    got += [(5, i.kind, i.device, i.first_seen)
            for i in det.observe(5, {node.name: sample(fleet, node, 5, link=n - 1)})]  # fmt: skip
    got += [(6, i.kind, i.device, i.first_seen)
            for i in det.observe(6, {node.name: sample(fleet, node, 6, link=n)})]  # fmt: skip
    want = [(6, "nic-flap", "mlx5_1", 5)]
    assert got == want, (
        f"Detector.observe with flap_count={n}, flap_window={w}: link_downed 7, 7, a reboot "
        f"(no samples at 2-4), then {n - 1} at tick 5 and {n} at 6: got {got}, expected {want}"
    )


def test_detect_flap_first_seen_of_more_events(detect: Any, fleet: Any, kata_rng: Any) -> None:
    """More than flap_count events in the window when the rule first holds (several flaps in
    its last tick): first_seen is the earliest event in the window, not the flap_count-th
    from the end (README: every event in the window counts)."""
    for _ in range(3):
        n = int(kata_rng.integers(2, 6))
        w = int(kata_rng.integers(n + 2, 15))
        first, last, k = 2, 2 + w - 1, int(kata_rng.integers(2, 4))
        middle = sorted(
            int(x) for x in kata_rng.choice(range(first + 1, last), n - 2, replace=False)
        )
        ticks = [first, *middle] + [last] * k  # n - 1 events before `last`, n - 1 + k at it
        node, policy = one_node(fleet, flap_count=n, flap_window=w)
        det = detect.Detector([node], policy)
        samples = [sample(fleet, node, t, link=sum(1 for x in ticks if x <= t))
                   for t in range(last + 3)]  # fmt: skip
        got = feed(det, node, samples)
        want = [(last, "nic-flap", "mlx5_1", first)]
        assert got == want, (
            f"Detector.observe with flap_count={n}, flap_window={w}, link-down events at ticks "
            f"{ticks}: got {got}, expected {want} (first_seen: the earliest event in the window)"
        )


@pytest.mark.kata_gate(
    "thermal detection disagrees with the consecutive-samples rule (a run one sample short of "
    "thermal_ticks, a run broken by a missing sample, SW thermal slowdown and power capping)"
)
def test_detect_thermal_boundary(detect: Any, fleet: Any, kata_rng: Any) -> None:
    k = int(kata_rng.integers(2, 7))
    node, policy = one_node(fleet, thermal_ticks=k)
    det = detect.Detector([node], policy)
    hot = ("hw_slowdown", "hw_thermal_slowdown")
    early = []  # GPU 2 slows down from tick 1 for k samples: an incident at tick k
    for t in range(k + 2):
        s = sample(fleet, node, t, gpu=2, throttle=hot if 1 <= t <= k else ())
        early += [(t, i.kind, i.device, i.first_seen) for i in det.observe(t, {node.name: s})]
    assert early == [(k, "thermal", "gpu2", 1)], (
        f"Detector.observe with thermal_ticks={k}: gpu2 in hw_thermal_slowdown at ticks 1..{k}: "
        f"got {early}, expected {[(k, 'thermal', 'gpu2', 1)]}"
    )
    det = detect.Detector([node], policy)
    plan: list[Any] = [()] + [hot] * (k - 1) + [("sw_thermal_slowdown",)] * 3
    plan += [("sw_power_cap",)] * (k + 1) + [hot] * (k - 1) + [None] + [hot] * (k - 1) + [()]
    start = len(plan)
    plan += [hot] * k
    got = []
    for t, reasons in enumerate(plan):
        s = None if reasons is None else sample(fleet, node, t, gpu=6, throttle=reasons)
        got += [(t, i.kind, i.device, i.first_seen) for i in det.observe(t, {node.name: s})]
    want = [(start + k - 1, "thermal", "gpu6", start)]
    assert got == want, (
        f"Detector.observe with thermal_ticks={k}: runs of {k - 1}, SW slowdown, power capping, "
        f"a run of {k - 1} + a missing sample + {k - 1}, then {k} from tick {start}: got {got}, "
        f"expected {want}"
    )


# --------------------------------------------------------------------------- remediate
def check(v: Any, what: str) -> None:
    assert not v.nodes, f"Remediator on {what}:\n" + "\n".join(
        f"  {n}: {msg}" for n, msg in v.nodes.items()
    )


@pytest.mark.parametrize("kind", KINDS)
def test_remediate_random_fleets(remediate: Any, fleet: Any, judged: Any, kind: str,
                                 kata_rng: Any) -> None:  # fmt: skip
    for seed in seeds(kata_rng, 3):
        plan = (*KINDS, kind)  # a fault of every kind, and a second one of `kind`
        sc = fleet.random_scenario(seed, plan=plan)
        room = float(kata_rng.choice([0.25, 0.5, 0.75]))  # the cap: some reached, some not
        sc = dataclasses.replace(sc, policy=dataclasses.replace(sc.policy, max_out_fraction=room))
        check(judged(sc, remediate.Remediator),
              f"fleet.random_scenario({seed}, plan={plan}), max_out_fraction={room}")  # fmt: skip


@pytest.mark.kata_gate(
    "Remediator acts on a node with no fault (random fleets with noise, application XIDs and "
    "maintenance; incidents only on faulty nodes)"
)
def test_remediate_healthy_nodes_untouched(remediate: Any, fleet: Any, judged: Any,
                                           kata_rng: Any) -> None:  # fmt: skip
    for seed in seeds(kata_rng, 4):
        v = judged(fleet.random_scenario(seed), remediate.Remediator)
        assert not v.healthy, (
            f"Remediator on fleet.random_scenario({seed}): actions on nodes without a fault: "
            f"{v.healthy[:6]}"
        )


@pytest.mark.kata_gate(
    "Remediator resets a GPU or reboots a node while a job still runs there (random fleets, "
    "checkpoints of 1-5 ticks, jobs landing on nodes that are not cordoned)"
)
def test_remediate_never_kills_jobs(remediate: Any, fleet: Any, judged: Any, kata_rng: Any) -> None:
    for seed in seeds(kata_rng, 4):
        sc = fleet.random_scenario(seed, kinds=("ecc", "gpu-lost"), faults=3,
                                   policy=fleet.Policy(max_out_fraction=0.5))  # fmt: skip
        v = judged(sc, remediate.Remediator)
        assert not v.killed, f"Remediator on fleet.random_scenario({seed}): {v.killed[:4]}"


@pytest.mark.kata_gate(
    "Remediator calls reset_gpu on a GPU whose fault a reset does not fix (gpu-lost, "
    "row-remap-failure, thermal) or on a GPU without a fault"
)
def test_remediate_reset_only_ecc(remediate: Any, fleet: Any, judged: Any, kata_rng: Any) -> None:
    for seed in seeds(kata_rng, 4):
        sc = fleet.random_scenario(seed, kinds=("gpu-lost", "row-remap-failure", "thermal",
                                                "ecc"), faults=3,
                                   policy=fleet.Policy(max_out_fraction=0.5))  # fmt: skip
        v = judged(sc, remediate.Remediator)
        assert not v.wrong_fix, f"Remediator on fleet.random_scenario({seed}): {v.wrong_fix}"


@pytest.mark.kata_gate(
    "Remediator uncordons a node whose fault is still there (a GPU still off the bus after the "
    "reboot; a remap failure, thermal, flapping port or full disk, which only people fix)"
)
def test_remediate_never_returns_broken_nodes(remediate: Any, fleet: Any, judged: Any,
                                              kata_rng: Any) -> None:  # fmt: skip
    for k, seed in enumerate(seeds(kata_rng, 4)):
        sc = fleet.random_scenario(seed, faults=3, policy=fleet.Policy(max_out_fraction=0.5),
                                   kinds=fleet.KINDS if k % 2 else ("gpu-lost",))  # fmt: skip
        faults = tuple(dataclasses.replace(f, fixed_by_fix=f.fixed_by_fix and i % 2 == 0)
                       for i, f in enumerate(sc.faults))  # fmt: skip
        v = judged(dataclasses.replace(sc, faults=faults), remediate.Remediator)
        assert not v.broken_back, (
            f"Remediator on fleet.random_scenario({seed}) (some reboots do not bring the GPU "
            f"back): {v.broken_back[:3]}"
        )


@pytest.mark.kata_gate(
    "Remediator uncordons a node whose samples after the reset or reboot still show the GPU "
    "lost or its remap failed (the fleet breaks the fix at run time, whatever the scenario says)"
)
def test_remediate_verifies_from_samples(remediate: Any, fleet: Any, kata_rng: Any) -> None:
    class Stubborn(fleet.Fleet):  # type: ignore[misc,name-defined]
        def _fix(self, node: str, devices: list[str]) -> None:
            super()._fix(node, devices)
            for f in self.scenario.faults:
                if f.node == node and f.device in devices:
                    self.broken_after_fix.add(f)

    for seed in seeds(kata_rng, 3):
        sc = fleet.random_scenario(seed, kinds=("gpu-lost", "ecc"), faults=3,
                                   policy=fleet.Policy(max_out_fraction=0.5))  # fmt: skip
        sc = dataclasses.replace(
            sc, faults=tuple(dataclasses.replace(f, fixed_by_fix=True) for f in sc.faults)
        )
        fl = Stubborn(sc)
        rem = remediate.Remediator(fl.control, sc.policy)
        feed = fleet.truth_incidents(sc)
        for t in range(sc.horizon):
            rem.step(t, list(feed.get(t, [])), fl.sample())
            fl.advance()
        back = [(a.tick, a.node) for a in fl.actions if a.verb == "uncordon"]
        fixed = [(a.tick, a.verb, a.node) for a in fl.actions if a.verb in ("reset_gpu", "reboot")]
        assert not back, (
            f"Remediator on fleet.random_scenario({seed}) where no reset or reboot works: "
            f"uncordoned {back} after {fixed}; the samples after the fix show the GPU lost or "
            f"its remap failed"
        )
        esc = {a.node for a in fl.actions if a.verb == "escalate"}
        assert all(node in esc for _, _, node in fixed), (
            f"Remediator on fleet.random_scenario({seed}) where no reset or reboot works: "
            f"{fixed} were not followed by an escalation of the node"
        )


def fleetwide_alarm(fleet: Any, kata_rng: Any, seed: int) -> tuple[Any, str]:
    """Incidents on every node but one at once (thermal, ecc, nic-flap, disk-full), the last
    node in maintenance."""
    base = fleet.random_scenario(seed, faults=0)
    n = len(base.nodes)
    hit = list(base.nodes[: n - 1])
    at = int(kata_rng.integers(3, 20))
    kinds = ["thermal", "ecc", "nic-flap", "disk-full"]
    faults = []
    for k, node in enumerate(hit):
        kind = kinds[k % len(kinds)] if kata_rng.random() < 0.5 else "thermal"
        dev = node.nics[0] if kind == "nic-flap" else "/" if kind == "disk-full" else "gpu1"
        flaps = tuple(range(at, at + base.policy.flap_count)) if kind == "nic-flap" else ()
        faults.append(fleet.Fault(kind, node.name, dev, at, flaps=flaps))
    sc = dataclasses.replace(base, faults=tuple(faults), noise=(),
                             maintenance=(base.nodes[-1].name,))  # fmt: skip
    what = (f"{len(hit)} of {n} nodes with incidents at once, 1 in maintenance, cap "
            f"{sc.policy.max_out(n)} (fleet.random_scenario({seed}, faults=0))")  # fmt: skip
    return sc, what


def cap_breaches(sc: Any, actions: list[Any]) -> list[str]:
    """The cap rule alone, against the Remediator's own state at each action: a cordon that
    makes more than max_out nodes cordoned (maintenance included), and a node whose first
    action is an escalation while fewer than max_out were cordoned (it had a slot)."""
    cap = sc.policy.max_out(len(sc.nodes))
    out, seen, bad = set(sc.maintenance), set(), []
    for a in actions:
        if a.node not in seen:
            seen.add(a.node)
            if a.verb == "escalate" and len(out) < cap:
                bad.append(f"tick {a.tick}: escalate({a.node}, {a.arg!r}) as its first action "
                           f"with {len(out)} nodes cordoned, cap {cap}: a slot was free")  # fmt: skip
        if a.verb == "cordon":
            out.add(a.node)
            if len(out) > cap:
                bad.append(f"tick {a.tick}: cordon({a.node}) made {len(out)} cordoned, cap {cap}")
        elif a.verb == "uncordon":
            out.discard(a.node)
    return bad


@pytest.mark.kata_gate(
    "Remediator has more nodes cordoned than policy.max_out(nodes) when incidents arrive on "
    "much of the fleet at once (maintenance nodes count), or escalates a node's first incident "
    "instead of cordoning it while fewer than max_out nodes are cordoned"
)
def test_remediate_fleetwide_alarm(remediate: Any, fleet: Any, drill: Any, kata_rng: Any) -> None:
    # Only the cap: the runbook's steps and their ticks on each node are
    # test_remediate_fleetwide_alarm_steps (a step one tick late is no breach of the cap).
    for seed in seeds(kata_rng, 2):
        sc, what = fleetwide_alarm(fleet, kata_rng, seed)
        fl, _ = drill(sc, remediator_class=remediate.Remediator, feed=fleet.truth_incidents(sc))
        bad = cap_breaches(sc, fl.actions)
        assert not bad, f"Remediator on {what}: {bad[:3]}"


def test_remediate_fleetwide_alarm_steps(remediate: Any, fleet: Any, judged: Any,
                                         kata_rng: Any) -> None:  # fmt: skip
    for seed in seeds(kata_rng, 1):
        sc, what = fleetwide_alarm(fleet, kata_rng, seed)
        check(judged(sc, remediate.Remediator), what)


def test_remediate_cap_frees_up(remediate: Any, fleet: Any, judged: Any, kata_rng: Any) -> None:
    """Cap 1: ecc at tick 5 (reset, then uncordon), thermal reported at 7 (cordoned if the ecc
    node is back by then, else escalated), disk-full at 30 (the slot is free unless the thermal
    node holds it)."""
    base = fleet.random_scenario(int(kata_rng.integers(2**31)), nodes=8, faults=0)
    a, b, c = base.nodes[:3]
    faults = (fleet.Fault("ecc", a.name, "gpu0", 5), fleet.Fault("thermal", b.name, "gpu2", 6),
              fleet.Fault("disk-full", c.name, "/", 30))  # fmt: skip
    sc = dataclasses.replace(base, faults=faults, noise=(), maintenance=(),
                             policy=fleet.Policy(max_out_fraction=0.1, thermal_ticks=2))  # fmt: skip
    v = judged(sc, remediate.Remediator)
    check(v, "cap 1: ecc at 5 (reset, uncordon), thermal at 7 (over the cap), disk-full at 30")


@pytest.mark.kata_gate(
    "Remediator acts on a node it escalated at the cap, or does not escalate each of that "
    "node's later incidents once, even after a slot frees up"
)
def test_remediate_left_alone_stays_alone(remediate: Any, fleet: Any, drill: Any,
                                          kata_rng: Any) -> None:  # fmt: skip
    """Cap 2, one node in maintenance, node A taken by an ecc error at 5 (its job checkpoints
    for 5 ticks: reset at 10, back at 11): a thermal incident on node B at 6 is escalated and B
    left alone; B's disk fills at 9 and its port flaps at 12: each escalated once more, B never
    cordoned, even after A comes back."""
    base = fleet.random_scenario(int(kata_rng.integers(2**31)), nodes=10, faults=0)
    a, b, m = base.nodes[:3]
    jobs = (fleet.Job("job-a", a.name, (0,), 5), *(j for j in base.jobs if j.node != a.name))
    sc = dataclasses.replace(
        base, noise=(), maintenance=(m.name,), policy=fleet.Policy(max_out_fraction=0.2), jobs=jobs,
        faults=(fleet.Fault("ecc", a.name, "gpu0", 5), fleet.Fault("thermal", b.name, "gpu1", 6),
                fleet.Fault("disk-full", b.name, "/", 9)))  # fmt: skip
    inc = fleet.Incident
    feed = {5: [inc("ecc", a.name, "gpu0", 5, ("XID 48 on gpu0",))],
            6: [inc("thermal", b.name, "gpu1", 3, ("gpu1 hot",))],
            9: [inc("disk-full", b.name, "/", 9, ("/ full",))],
            12: [inc("nic-flap", b.name, b.nics[0], 10, ("flaps",))]}  # fmt: skip
    mine, fl = hand_run(drill, remediate, sc, feed, b.name)
    want = [(6, "escalate", "thermal"), (9, "escalate", "disk-full"), (12, "escalate", "nic-flap")]
    assert mine == want, (
        f"Remediator: node B's incidents at 6, 9 and 12 with the cap reached at 6: {mine}, "
        f"expected {want}"
    )
    told = [a.evidence for a in fl.actions if a.node == b.name]
    assert all(
        set(e) >= {x} for e, x in zip(told, ["gpu1 hot", "/ full", "flaps"], strict=False)
    ), (
        f"Remediator: the escalations of node B carry {told}: each must carry its incident's "
        f"evidence"
    )


def hand_run(drill: Any, remediate: Any, sc: Any, feed: Any, node: str) -> tuple[list[Any], Any]:
    """(tick, verb, arg) of every action on `node`, in call order; the fleet."""
    fl, _ = drill(sc, remediator_class=remediate.Remediator, feed=feed)
    return [(a.tick, a.verb, a.arg) for a in fl.actions if a.node == node], fl


def two_fault_scenario(fleet: Any, kata_rng: Any) -> Any:
    base = fleet.random_scenario(int(kata_rng.integers(2**31)), nodes=10, faults=0)
    node = base.nodes[0]
    jobs = (fleet.Job("job-a", node.name, (1, 2), 5), fleet.Job("job-b", node.name, (3,), 2),
            *(j for j in base.jobs if j.node != node.name))  # fmt: skip
    return dataclasses.replace(base, jobs=jobs, noise=(), maintenance=(),
                               policy=fleet.Policy(max_out_fraction=0.3)), node  # fmt: skip


def test_remediate_fault_during_drain(
    remediate: Any, fleet: Any, drill: Any, kata_rng: Any
) -> None:
    """ecc on GPU 1 at 10 (job-a checkpoints for 5 ticks), thermal on GPU 3 at 12: one cordon,
    one drain; at 15 the reset and the escalation; no uncordon (thermal is escalated)."""
    sc, node = two_fault_scenario(fleet, kata_rng)
    faults = (
        fleet.Fault("ecc", node.name, "gpu1", 10),
        fleet.Fault("thermal", node.name, "gpu3", 12),
    )
    sc = dataclasses.replace(sc, faults=faults)
    inc = fleet.Incident
    feed = {10: [inc("ecc", node.name, "gpu1", 10, ("XID 95",))],
            12: [inc("thermal", node.name, "gpu3", 9, ("hw_thermal_slowdown",))]}  # fmt: skip
    mine, fl = hand_run(drill, remediate, sc, feed, node.name)
    want = [
        (10, "cordon", None),
        (10, "drain", None),
        (15, "reset_gpu", 1),
        (15, "escalate", "thermal"),
    ]
    assert mine == want, (
        f"Remediator: ecc on gpu1 at 10, thermal on gpu3 at 12 during the drain: {mine}, expected {want}"
    )
    assert not fl.killed, f"Remediator killed {fl.killed}"


ORDER = {"cordon": 0, "drain": 1, "reset_gpu": 2, "reboot": 3, "escalate": 4, "uncordon": 5}


def test_remediate_two_ecc_gpus(remediate: Any, fleet: Any, drill: Any, kata_rng: Any) -> None:
    """ecc on GPU 1 at 10 and on GPU 3 at 13 (during the drain): both reset at 15, uncordon at 16."""
    sc, node = two_fault_scenario(fleet, kata_rng)
    faults = (fleet.Fault("ecc", node.name, "gpu1", 10), fleet.Fault("ecc", node.name, "gpu3", 13))
    sc = dataclasses.replace(sc, faults=faults)
    inc = fleet.Incident
    feed = {10: [inc("ecc", node.name, "gpu1", 10, ("XID 94",))],
            13: [inc("ecc", node.name, "gpu3", 13, ("XID 48",))]}  # fmt: skip
    got, fl = hand_run(drill, remediate, sc, feed, node.name)
    mine = sorted(
        got,
        key=lambda a: (a[0], ORDER.get(a[1], len(ORDER)), a[1], str(a[2])),
    )
    want = [(10, "cordon", None), (10, "drain", None), (15, "reset_gpu", 1), (15, "reset_gpu", 3),
            (16, "uncordon", None)]  # fmt: skip
    assert mine == want, f"Remediator: ecc on gpu1 at 10 and gpu3 at 13: {mine}, expected {want}"


# --------------------------------------------------------------------------- runbooks
def test_runbooks_xids(runbooks: Any, books: Any) -> None:
    for kind, want in TRUE_XIDS.items():
        got = books.xids_named(runbooks.get(kind, {}).get("Detection", ""))
        assert got == want, (
            f"runbooks.md, {kind}: Detection names XIDs {sorted(got)}, expected {sorted(want)}"
        )
    app = books.xids_named(runbooks.get("application-xid", {}).get("Detection", ""))
    assert APP_XIDS_REQUIRED <= app <= APP_XIDS_ALLOWED, (
        f"runbooks.md, application-xid: Detection names XIDs {sorted(app)}: it must name 13, 31 "
        f"and 43 (45 may be named), no node fault's XID"
    )


def test_runbooks_mitigation(runbooks: Any, books: Any) -> None:
    for kind, want in TRUE_STEPS.items():
        got = books.mitigation_steps(runbooks.get(kind, {}).get("Mitigation", ""))
        assert got == want, f"runbooks.md, {kind}: Mitigation's steps are {got}, expected {want}"
    for kind in ("gpu-lost", "ecc"):
        text = runbooks.get(kind, {}).get("Verification", "")
        assert "`escalate`" in text, (
            f"runbooks.md, {kind}: Verification must say to `escalate` when the fix did not work"
        )


@pytest.mark.kata_gate(
    "the application-xid runbook's Detection does not name XIDs 13, 31 and 43 (45 may be named) "
    "or names a node fault's XID, its Mitigation makes a control call or has no step, or it "
    "never says to tell the job's owner"
)
def test_runbooks_application_xid(runbooks: Any, books: Any) -> None:
    book = runbooks.get("application-xid", {})
    app = books.xids_named(book.get("Detection", ""))
    assert APP_XIDS_REQUIRED <= app <= APP_XIDS_ALLOWED, (
        f"runbooks.md, application-xid: Detection names XIDs {sorted(app)}; it must name 13, 31 "
        f"and 43 (45 may be named) and no node fault's XID"
    )
    mitigation = book.get("Mitigation", "")
    calls = books.mitigation_steps(mitigation)
    assert calls == [] and re.search(r"^\s*\d+[.)]\s", mitigation, flags=re.M), (
        f"runbooks.md, application-xid: Mitigation must be a numbered list of manual steps with "
        f"no control call (the node is fine); its control calls: {calls}"
    )
    told = (mitigation + " " + book.get("Escalation", "")).lower()
    assert re.search(
        r"\bown(er|ers|ing)\b|\buser|\bdeveloper|\bauthor|\bjob's|application team", told
    ), (
        "runbooks.md, application-xid: neither Mitigation nor Escalation says to tell the job's "
        "owner (its owner, user, developer or author): the fault is in the application"
    )


@pytest.mark.kata_gate(
    "a runbook's Detection names an XID that your Detector maps to another kind (or to none)"
)
def test_runbooks_match_detector(runbooks: Any, books: Any, detect: Any, fleet: Any) -> None:
    node, policy = one_node(fleet)
    for kind, book in runbooks.items():
        for xid in sorted(books.xids_named(book.get("Detection", ""))):
            det = detect.Detector([node], policy)
            try:
                line = fleet.xid_line(node, 4, xid, 1, 4321 if xid != 79 else 0)
            except KeyError:  # an XID this fleet never logs: the driver's line, text elided
                line = fleet.xid_line(node, 4, 43, 1, 4321).replace(": 43, ", f": {xid}, ")
            got = {i.kind for i in det.observe(0, {node.name: sample(fleet, node, 0)})}
            got |= {
                i.kind for i in det.observe(1, {node.name: sample(fleet, node, 1, log=(line,))})
            }
            want = set() if kind == "application-xid" else {kind}
            assert got == want, (
                f"runbooks.md, {kind}: Detection names XID {xid}, but your Detector reports "
                f"{sorted(got) or 'nothing'} for the line {line!r}"
            )


@pytest.mark.kata_gate(
    "a runbook's Mitigation lists control calls other than those your Remediator makes on a "
    "fault of that kind"
)
def test_runbooks_match_remediator(runbooks: Any, books: Any, remediate: Any, fleet: Any,
                                   drill: Any, kata_rng: Any) -> None:  # fmt: skip
    for kind in KINDS:
        sc = fleet.random_scenario(int(kata_rng.integers(2**31)), nodes=10, faults=1,
                                   kinds=(kind,), policy=fleet.Policy(max_out_fraction=0.3))  # fmt: skip
        f = sc.faults[0]
        sc = dataclasses.replace(sc, faults=(dataclasses.replace(f, fixed_by_fix=True),),
                                 maintenance=())  # fmt: skip
        fl, _ = drill(sc, remediator_class=remediate.Remediator, feed=fleet.truth_incidents(sc))
        code = [a.verb for a in fl.actions if a.node == f.node]
        book = books.mitigation_steps(runbooks.get(kind, {}).get("Mitigation", ""))
        assert code == book, (
            f"runbooks.md, {kind}: Mitigation lists {book}, your Remediator called {code} on a "
            f"{kind} fault (fleet.random_scenario with one fault, cap not reached)"
        )


# --------------------------------------------------------------------------- red team rt19


def _node(fleet: Any, rng: random.Random) -> Any:
    buses = sorted(rng.sample(range(0x10, 0xF0), 8))
    dom = rng.choice([0, 1])
    return fleet.NodeInfo(
        f"n{rng.randint(10, 99)}-{rng.choice('abcdef')}", "rx",
        tuple(fleet.GpuInfo(i, f"{dom:08X}:{b:02X}:00.0", f"GPU-{i}") for i, b in enumerate(buses)),
        ("mlx5_0", "mlx5_1"), ("/",),
    )  # fmt: skip


def _sample(fleet: Any, node: Any, tick: int, gpu: int = -1, **fields: Any) -> Any:
    gpus = []
    for g in node.gpus:
        s = fleet.GpuSample(g.index, True, 60, 1980, (), 0, 0, False, False)
        gpus.append(dataclasses.replace(s, **fields) if g.index == gpu else s)
    nics = tuple(fleet.NicSample(n, True, 0) for n in node.nics)
    return fleet.NodeSample(
        node.name, tick, tuple(gpus), nics, (fleet.DiskSample("/", 10, 100),), ()
    )


def _feed(det: Any, fleet: Any, node: Any, per_tick: list[dict[str, Any]], gpu: int) -> list[Any]:
    got = []
    for t, fields in enumerate(per_tick):
        got += [(t, i.kind, i.device, i.first_seen)
                for i in det.observe(t, {node.name: _sample(fleet, node, t, gpu, **fields)})]  # fmt: skip
    return got


@pytest.mark.kata_gate(
    "Detector raises ecc on a GPU whose DBE counter is non-zero from its first sample (the baseline) before it rises (red team rt19)"
)
def test_detect_dbe_baseline(detect: Any, fleet: Any, kata_seed: int) -> None:
    """The first sample's DBE counter is a baseline: a GPU whose counter is already non-zero
    (an old error, the agent restarted) is no ecc until the counter rises."""
    rng = random.Random(kata_seed * 7 + 1)
    node = _node(fleet, rng)
    gpu, base, rise = rng.randrange(8), rng.randint(1, 6), rng.randint(3, 8)
    ticks = [{"dbe": base}] * rise + [{"dbe": base + rng.randint(1, 3)}] * 2
    got = _feed(detect.Detector([node], fleet.Policy()), fleet, node, ticks, gpu)
    assert got == [(rise, "ecc", f"gpu{gpu}", rise)], (
        f"Detector.observe: gpu{gpu}'s DBE counter {base} from the first sample (the baseline), "
        f"rising at tick {rise}: got {got}, expected the ecc at {rise} only"
    )


@pytest.mark.kata_gate(
    "Detector raises thermal on hw_slowdown (a power brake) without hw_thermal_slowdown, or misses the thermal run after it (red team rt19)"
)
def test_detect_hw_slowdown_is_not_thermal(detect: Any, fleet: Any, kata_seed: int) -> None:
    """hw_slowdown without hw_thermal_slowdown (a power brake, an external signal) is no
    thermal fault, however long it lasts."""
    rng = random.Random(kata_seed * 7 + 2)
    node = _node(fleet, rng)
    tt = rng.randint(2, 6)
    gpu = rng.randrange(8)
    brake = {"throttle": ("hw_slowdown", "hw_power_brake_slowdown"), "sm_clock_mhz": 990}
    hot = {"throttle": ("hw_slowdown", "hw_thermal_slowdown"), "temp_c": 90}
    n = tt + rng.randint(1, 4)
    ticks = [brake] * n + [{}] + [hot] * tt
    got = _feed(detect.Detector([node], fleet.Policy(thermal_ticks=tt)), fleet, node, ticks, gpu)
    want = [(n + tt, "thermal", f"gpu{gpu}", n + 1)]
    assert got == want, (
        f"Detector.observe with thermal_ticks={tt}: gpu{gpu} with hw_slowdown + "
        f"hw_power_brake_slowdown (no hw_thermal_slowdown) at ticks 0..{n - 1}, then "
        f"hw_thermal_slowdown from {n + 1}: got {got}, expected {want}"
    )


def _play(fleet: Any, sc: Any, rem_cls: Any, tamper: Any = None) -> Any:
    """Your Remediator fed the truth's incidents; `tamper(t, fl, samples)` may change what the
    node agents ship (the telemetry, not the fleet)."""
    fl = fleet.Fleet(sc)
    rem = rem_cls(fl.control, sc.policy)
    feed = fleet.truth_incidents(sc)
    for t in range(sc.horizon):
        samples = fl.sample()
        if tamper is not None:
            samples = tamper(t, fl, samples)
        rem.step(t, list(feed.get(t, [])), samples)
        fl.advance()
    return fl


def _quiet(fleet: Any, seed: int, nodes: int = 10, frac: float = 0.25) -> Any:
    base = fleet.random_scenario(seed, nodes=nodes, faults=0)
    return dataclasses.replace(base, noise=(), maintenance=(),
                               policy=dataclasses.replace(base.policy, max_out_fraction=frac))  # fmt: skip


def _acts(fl: Any, node: str, since: int = 0) -> list[tuple[int, str, Any]]:
    return [(a.tick, a.verb, a.arg) for a in fl.actions if a.node == node and a.tick >= since]


@pytest.mark.kata_gate(
    "Remediator uncordons a node whose samples after the reset show the remap failed (verification must read the samples it is given, not the fleet's scenario) (red team rt19)"
)
def test_remediate_verify_reads_the_samples(remediate: Any, fleet: Any, kata_seed: int) -> None:
    """Verification reads the node's samples after the fix: here the telemetry after the reset
    shows the remap failed (whatever the fleet's own state), so the node is escalated, never
    uncordoned."""
    rng = random.Random(kata_seed * 7 + 3)
    sc = _quiet(fleet, rng.randrange(10**9))
    node = rng.choice(sc.nodes)
    g = rng.randrange(len(node.gpus))
    sc = dataclasses.replace(
        sc, faults=(fleet.Fault("ecc", node.name, f"gpu{g}", rng.randint(4, 20), xid=95),)
    )

    def tamper(t: int, fl: Any, samples: dict[str, Any]) -> dict[str, Any]:
        s = samples.get(node.name)
        if s is not None and any(a.verb == "reset_gpu" and a.node == node.name for a in fl.actions):
            gpus = list(s.gpus)
            gpus[g] = dataclasses.replace(gpus[g], remap_pending=False, remap_failure=True)
            samples = {**samples, node.name: dataclasses.replace(s, gpus=tuple(gpus))}
        return samples

    fl = _play(fleet, sc, remediate.Remediator, tamper)
    got = _acts(fl, node.name)
    verbs = [v for _, v, _ in got]
    assert "reset_gpu" in verbs and "uncordon" not in verbs and verbs[-1] == "escalate", (
        f"Remediator: ecc on {node.name} gpu{g}; after the reset the node's samples show "
        f"remap_failure on gpu{g}: expected an escalate and the node kept cordoned, got {got}"
    )


@pytest.mark.kata_gate(
    "Remediator ignores a new fault on a node it repaired and uncordoned before (red team rt19)"
)
def test_remediate_second_fault_after_uncordon(remediate: Any, fleet: Any, kata_seed: int) -> None:
    """A node repaired and uncordoned is a node like any other: a later fault on it (a GPU
    that fails again) is handled from the start."""
    rng = random.Random(kata_seed * 7 + 4)
    sc = _quiet(fleet, rng.randrange(10**9))
    node = rng.choice(sc.nodes)
    g1, g2 = rng.sample(range(len(node.gpus)), 2)
    t2 = rng.randint(38, 48)
    kind2 = rng.choice(["ecc", "gpu-lost"])
    faults = (fleet.Fault("ecc", node.name, f"gpu{g1}", rng.randint(4, 12), xid=48),
              fleet.Fault(kind2, node.name, f"gpu{g2}", t2, xid=95 if kind2 == "ecc" else 79))  # fmt: skip
    fl = _play(fleet, dataclasses.replace(sc, faults=faults), remediate.Remediator)
    first = _acts(fl, node.name)
    assert any(v == "uncordon" and t < t2 for t, v, _ in first), (
        f"Remediator: ecc on {node.name} gpu{g1}: expected a reset and an uncordon, got {first}"
    )
    later = [(v, a) for _, v, a in _acts(fl, node.name, t2)]
    fix = ("reset_gpu", g2) if kind2 == "ecc" else ("reboot", None)
    want = [("cordon", None), ("drain", None), fix, ("uncordon", None)]
    assert later == want and not fl.killed, (
        f"Remediator: {node.name} repaired (ecc on gpu{g1}) and uncordoned, then {kind2} on "
        f"gpu{g2} at tick {t2}: actions from {t2} {later}, expected {want}"
        + (f"; killed {fl.killed}" if fl.killed else "")
    )


@pytest.mark.kata_gate(
    "Remediator takes the new incidents before moving the nodes it handles: an uncordon does not free its slot in the same step (red team rt19)"
)
def test_remediate_slot_freed_in_the_same_step(remediate: Any, fleet: Any, kata_seed: int) -> None:
    """Cap 1: the node under repair is uncordoned at tick u, and a new incident arrives at u on
    another node: moving the handled nodes first frees the slot, so it is cordoned."""
    rng = random.Random(kata_seed * 7 + 5)
    sc = _quiet(fleet, rng.randrange(10**9), nodes=10, frac=0.1)
    a, b = rng.sample(list(sc.nodes), 2)
    fa = fleet.Fault("ecc", a.name, f"gpu{rng.randrange(len(a.gpus))}", rng.randint(4, 15), xid=94)
    fl = _play(fleet, dataclasses.replace(sc, faults=(fa,)), remediate.Remediator)
    u = [t for t, v, _ in _acts(fl, a.name) if v == "uncordon"]
    assert u, f"Remediator: ecc on {a.name}: no uncordon after the reset: {_acts(fl, a.name)}"
    fb = fleet.Fault("disk-full", b.name, rng.choice(b.mounts), u[0])
    fl = _play(fleet, dataclasses.replace(sc, faults=(fa, fb)), remediate.Remediator)
    got = _acts(fl, b.name)
    want = [(u[0], "cordon", None), (u[0], "escalate", "disk-full")]
    assert got == want, (
        f"Remediator with a cap of 1 node: {a.name} uncordoned at tick {u[0]}, disk-full on "
        f"{b.name} reported at {u[0]}: expected {want} (handled nodes move first, so the "
        f"uncordon frees the slot), got {got}"
    )


# What a runbook's Symptoms and Detection must speak of (besides XIDs): the kind's signal.
SIGNALS = {
    "gpu-lost": r"present|off the bus|fallen|fell off|missing|lost",
    "ecc": r"dbe|double.bit|uncorrect|remap|ecc",
    "row-remap-failure": r"remap",
    "thermal": r"thermal|temperature|hot|heat",
    "nic-flap": r"link|flap|port",
    "disk-full": r"disk|full|mount|space|used",
    "application-xid": r"application|job|user|owner|kernel|code",
}


@pytest.mark.kata_gate(
    "a runbook's sections are copies of one another, or its Symptoms and Detection never name the kind's signal (red team rt19)"
)
def test_runbooks_say_something(runbooks: Any, books: Any) -> None:
    """A runbook is read by a person: its six sections are not copies of one another, and its
    Symptoms and Detection speak of the kind's own signal."""
    for kind, book in runbooks.items():
        texts = {n: " ".join(re.findall(r"[a-z0-9_]+", t.lower())) for n, t in book.items()}
        same = [(a, b) for i, a in enumerate(texts) for b in list(texts)[i + 1:]
                if texts[a] and texts[a] == texts[b]]  # fmt: skip
        assert not same, f"runbooks.md, {kind}: sections {same[0]} say the same words"
        pat = SIGNALS.get(kind)
        about = (book.get("Symptoms", "") + " " + book.get("Detection", "")).lower()
        assert pat is None or re.search(pat, about), (
            f"runbooks.md, {kind}: Symptoms and Detection never name the kind's signal "
            f"(one of: {pat.replace('|', ', ')})"
        )


@pytest.mark.kata_gate(
    "Remediator, with ecc and an escalated fault on one node, skips the reset or the escalation, or uncordons the node (red team rt19)"
)
def test_remediate_two_faults_one_node(remediate: Any, fleet: Any, kata_seed: int) -> None:
    """ecc on one GPU and a fault no reset fixes (a failed remap, thermal) on another, on one
    node: the reset, the escalation, and the node never uncordoned."""
    rng = random.Random(kata_seed * 7 + 6)
    sc = _quiet(fleet, rng.randrange(10**9))
    node = rng.choice(sc.nodes)
    g1, g2 = rng.sample(range(len(node.gpus)), 2)
    t = rng.randint(8, 25)
    kind2 = rng.choice(["row-remap-failure", "thermal"])
    onset2 = t - sc.policy.thermal_ticks + 1 if kind2 == "thermal" else t
    faults = (fleet.Fault("ecc", node.name, f"gpu{g1}", t, xid=rng.choice([48, 94, 95])),
              fleet.Fault(kind2, node.name, f"gpu{g2}", onset2, xid=64 if kind2 != "thermal" else None))  # fmt: skip
    fl = _play(fleet, dataclasses.replace(sc, faults=faults), remediate.Remediator)
    got = _acts(fl, node.name)
    verbs = [(v, a) for _, v, a in got]
    ok = (("reset_gpu", g1) in verbs and ("escalate", kind2) in verbs
          and "uncordon" not in [v for v, _ in verbs] and not fl.killed)  # fmt: skip
    assert ok, (
        f"Remediator: ecc on {node.name} gpu{g1} and {kind2} on gpu{g2}, both reported at tick "
        f"{t}: expected reset_gpu({g1}), escalate({kind2!r}) and the node kept cordoned, got {got}"
    )


@pytest.mark.kata_gate(
    "Remediator leaves an ecc GPU of a node unreset (every ecc GPU is reset before the uncordon) (red team rt19)"
)
def test_remediate_every_ecc_gpu_reset(remediate: Any, fleet: Any, kata_seed: int) -> None:
    """ecc on several GPUs of one node: each is reset (none left to people), then uncordon."""
    rng = random.Random(kata_seed * 7 + 7)
    sc = _quiet(fleet, rng.randrange(10**9))
    node = rng.choice(sc.nodes)
    gs = sorted(rng.sample(range(len(node.gpus)), rng.randint(2, 3)))
    t = rng.randint(6, 20)
    faults = tuple(fleet.Fault("ecc", node.name, f"gpu{g}", t, xid=95) for g in gs)
    fl = _play(fleet, dataclasses.replace(sc, faults=faults), remediate.Remediator)
    got = _acts(fl, node.name)
    reset = sorted(a for _, v, a in got if v == "reset_gpu")
    ok = reset == gs and got[-1][1] == "uncordon" and not any(v == "escalate" for _, v, _ in got)
    assert ok and not fl.killed, (
        f"Remediator: ecc on {node.name} GPUs {gs} at tick {t}: expected a reset of "
        f"each, then uncordon, got {got}"
    )


@pytest.mark.kata_gate(
    "Detector misses a row-remap-failure on a GPU already reported as ecc, or raises ecc for a GPU whose remap failed (red team rt19)"
)
def test_detect_ecc_then_remap_failure(detect: Any, fleet: Any, kata_seed: int) -> None:
    """ecc on a GPU, later its remap fails: two incidents (ecc, then row-remap-failure);
    a remap failure at onset (XID 95 + XID 64, remap_failure) is no ecc."""
    rng = random.Random(kata_seed * 7 + 8)
    node = _node(fleet, rng)
    g1, g2 = rng.sample(range(8), 2)
    t1, t2 = rng.randint(1, 4), rng.randint(6, 9)
    det = detect.Detector([node], fleet.Policy())
    got = []
    for t in range(12):
        gpus = []
        for g in node.gpus:
            s = fleet.GpuSample(g.index, True, 60, 1980, (), 0, 0, False, False)
            if g.index == g1 and t >= t1:
                s = dataclasses.replace(s, dbe=1, remap_pending=t < t2, remap_failure=t >= t2)
            if g.index == g2 and t >= t2:
                s = dataclasses.replace(s, dbe=1, remap_failure=True)
            gpus.append(s)
        log = []
        if t == t1:
            log.append(fleet.xid_line(node, g1, 48, t, 4242))
        if t == t2:
            log += [fleet.xid_line(node, g2, 95, t, 4243), fleet.xid_line(node, g2, 64, t, 4243)]
        nics = tuple(fleet.NicSample(n, True, 0) for n in node.nics)
        s = fleet.NodeSample(
            node.name, t, tuple(gpus), nics, (fleet.DiskSample("/", 1, 100),), tuple(log)
        )
        got += [(t, i.kind, i.device) for i in det.observe(t, {node.name: s})]
    want = sorted([(t1, "ecc", f"gpu{g1}"), (t2, "row-remap-failure", f"gpu{g1}"),
                   (t2, "row-remap-failure", f"gpu{g2}")])  # fmt: skip
    assert sorted(got) == want, (
        f"Detector.observe: ecc on gpu{g1} at {t1}, its remap failing at {t2}; gpu{g2}'s remap "
        f"failing at {t2} (XID 95 and XID 64 lines): got {sorted(got)}, expected {want}"
    )
