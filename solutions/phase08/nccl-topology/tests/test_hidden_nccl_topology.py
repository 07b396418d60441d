"""Hidden tests of nccl-topology: machines nobody has seen, rendered the many ways nvidia-smi
prints them, and every search checked against an exhaustive one written here (never the
learner's or the reference's code). Inputs come from the run seed (harness.testing)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import pytest

from harness.testing import raises, random_for

NV = [f"NV{k}" for k in (1, 2, 4, 6, 8, 12, 18)]
PCIE = ["PIX", "PXB", "PHB", "NODE", "SYS"]
ARCH_GBPS = {"sm_70": 20.0, "sm_80": 20.0, "sm_86": 12.0, "sm_90": 20.6}  # NCCL topo.h
SMP = {"intel": 10.0, "amd": 16.0, "other": 6.0}


# ------------------------------------------------------------------------------ machines
def random_machine(r: random.Random, topology: Any, n_gpus: int | None = None) -> Any:
    n = n_gpus or r.randint(1, 10)
    m = r.choice([0, 0, 1, 2, 3, 4, 8])
    devs = [f"GPU{i}" for i in range(n)] + [f"NIC{i}" for i in range(m)]
    nv_share = r.random()
    link: dict[tuple[str, str], str] = {}
    for a, b in itertools.combinations(devs, 2):
        both_gpus = a[:3] == b[:3] == "GPU"
        kind = r.choice(NV) if both_gpus and r.random() < nv_share else r.choice(PCIE)
        link[(a, b)] = link[(b, a)] = kind
    cpu, numa = {}, {}
    for g in devs[:n]:
        lo = r.randrange(0, 200, 8)
        cpu[g] = r.choice([f"{lo}-{lo + 15}", f"{lo}-{lo + 7},{lo + 64}-{lo + 71}", "N/A"])
        numa[g] = r.choice(["0", "1", "3", "N/A"])
    names = {f"NIC{i}": r.choice(["mlx5_", "ibp", "bnxt_re"]) + str(i) for i in range(m)}
    return topology.Topology(devs, link, cpu, numa, names)


def render(t: Any, r: random.Random) -> str:
    """nvidia-smi's output, in one of its spellings: tabs or runs of spaces, an underlined
    header or not, with or without the GPU NUMA ID column, the legends or not."""
    sep = lambda: r.choice(["\t", "  ", "\t ", "    ", " \t"])  # noqa: E731
    numa_id = r.random() < 0.5
    head = "".join(sep() + d for d in t.devices) + sep() + "CPU Affinity" + sep() + "NUMA Affinity"
    head += (sep() + "GPU NUMA ID") if numa_id else ""
    if r.random() < 0.5:
        head = "\t\x1b[4m" + head.lstrip() + "\x1b[0m"
    rows = [head]
    for a in t.devices:
        cells = ["X" if a == b else t.link[(a, b)] for b in t.devices]
        line = a + "".join(sep() + c for c in cells)
        if a.startswith("GPU"):
            line += (
                sep()
                + t.cpu_affinity[a]
                + sep()
                + t.numa_affinity[a]
                + (sep() + "N/A" if numa_id else "")
            )
        rows.append(line + r.choice(["", " ", "\t"]))
    text = "\n".join(rows) + "\n"
    if r.random() < 0.7:
        text += "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    if t.nic_names:
        text += "\nNIC Legend:\n\n" + "".join(f"  {k}: {v}\n" for k, v in t.nic_names.items())
    return text


def random_bw(r: random.Random, n: int) -> list[list[float]]:
    """A symmetric matrix of GB/s with few distinct values (ties are where searches go wrong)."""
    values = r.sample(
        [5.0, 6.0, 10.0, 12.0, 20.0, 24.0, 40.0, 48.0, 60.0, 120.0, 240.0, 370.8], r.randint(2, 5)
    )
    bw = [[0.0] * n for _ in range(n)]
    for i, j in itertools.combinations(range(n), 2):
        bw[i][j] = bw[j][i] = r.choice(values)
    return bw


# ------------------------------------------------------------------------------ the grader's searches
def ring_bw(bw: list[list[float]], ring: list[int]) -> float:
    return (
        min(bw[ring[i]][ring[(i + 1) % len(ring)]] for i in range(len(ring)))
        if len(ring) > 1
        else float("inf")
    )


def exhaustive_ring(bw: list[list[float]]) -> float:
    n = len(bw)
    if n <= 2:
        return ring_bw(bw, list(range(n)))
    return max(ring_bw(bw, [0, *p]) for p in itertools.permutations(range(1, n)))


def exhaustive_tree(bw: list[list[float]], root: int, fanout: int) -> float:
    n = len(bw)
    others = [i for i in range(n) if i != root]
    best = -1.0
    for ps in itertools.product(range(n), repeat=len(others)):
        parent: list[int | None] = [None] * n
        if any(p == i for i, p in zip(others, ps, strict=True)):
            continue
        for i, p in zip(others, ps, strict=True):
            parent[i] = p
        if max(Counter(ps).values(), default=0) > fanout:
            continue
        ok = True
        for i in others:
            seen, v = set(), i
            while v != root and ok:
                ok = v not in seen
                seen.add(v)
                v = parent[v]  # type: ignore[assignment]
        if ok:
            best = max(best, min(bw[i][parent[i]] for i in others))  # type: ignore[index]
    return best


def sub(bw: list[list[float]], s: Any) -> list[list[float]]:
    return [[bw[a][b] for b in s] for a in s]


# ------------------------------------------------------------------------------ parse
@pytest.mark.kata_gate(
    "parse_topo's Topology differs from the printed matrix on machines beyond the shipped ones"
)
def test_parse_any_machine(topo: Any, topology: Any) -> None:
    r = random_for("parse")
    for case in range(40):
        t = random_machine(r, topology)
        text = render(t, r)
        got = topo.parse_topo(text)
        where = f"machine {case} ({len(t.gpus)} GPUs, {len(t.nics)} NICs), printed as:\n{text}"
        assert got.devices == t.devices, (
            f"parse_topo: devices {got.devices}, expected {t.devices}; {where}"
        )
        assert got.link == t.link, (
            f"parse_topo: the links differ at {sorted(k for k in set(got.link) | set(t.link) if got.link.get(k) != t.link.get(k))[:4]}; {where}"
        )
        assert got.cpu_affinity == t.cpu_affinity, (
            f"parse_topo: cpu_affinity {got.cpu_affinity}, expected {t.cpu_affinity}; {where}"
        )
        assert got.numa_affinity == t.numa_affinity, (
            f"parse_topo: numa_affinity {got.numa_affinity}, expected {t.numa_affinity}; {where}"
        )
        assert got.nic_names == t.nic_names, (
            f"parse_topo: nic_names {got.nic_names}, expected {t.nic_names}; {where}"
        )


def test_parse_refuses_broken_machines(topo: Any, topology: Any) -> None:
    r = random_for("broken")
    for case in range(30):
        t = random_machine(r, topology, n_gpus=r.randint(2, 8))
        lines = render(t, random.Random(case)).split("\n")
        row = r.randrange(1, len(t.devices) + 1)
        name = t.devices[row - 1]
        cells = lines[row].split()
        how = r.choice(["kind", "diagonal", "mirror", "short", "missing", "twice"])
        if how == "kind":
            col = r.choice([c for c in range(1, len(t.devices) + 1) if c != row])
            cells[col] = r.choice(["NV", "PIXX", "nv2", "PCI", "-"])
        elif how == "diagonal":
            cells[row] = r.choice(PCIE)
        elif how == "mirror":
            col = r.choice([c for c in range(1, len(t.devices) + 1) if c != row])
            cells[col] = next(k for k in PCIE + NV if k != cells[col])
        elif how == "short":
            cells = cells[: r.randint(1, len(t.devices) - 1)]
        lines[row] = "\t".join(cells)
        if how == "missing":
            del lines[row]
        elif how == "twice":
            lines.insert(row, lines[row])
        text = "\n".join(lines)
        whole = render(t, random.Random(case))
        assert topo.parse_topo(whole).link == t.link, (
            f"parse_topo must read the unbroken matrix before it can refuse a broken one (case {case}):\n{whole}"
        )
        with raises(
            ValueError,
            f"parse_topo must refuse a matrix with a {how} fault in row {name} (case {case}):\n{text}\n",
        ):
            topo.parse_topo(text)


# ------------------------------------------------------------------------------ bandwidth
def test_bandwidth_every_kind_arch_and_cpu(topo: Any) -> None:
    for arch, per in ARCH_GBPS.items():
        for k in (1, 2, 4, 6, 8, 12, 18):
            got = topo.link_gbps(f"NV{k}", arch)
            assert got == pytest.approx(k * per), (
                f"link_gbps('NV{k}', {arch!r}) = {got}, expected {k * per}"
            )
    for cpu, smp in SMP.items():
        for kind in PCIE:
            want = min(12.0, smp) if kind == "SYS" else 12.0
            got = topo.link_gbps(kind, "sm_80", cpu)
            assert got == pytest.approx(want), (
                f"link_gbps({kind!r}, cpu={cpu!r}) = {got}, expected {want}"
            )


def test_bandwidth_matrix_any_machine(topo: Any, topology: Any) -> None:
    r = random_for("bandwidth")
    for case in range(30):
        t = random_machine(r, topology)
        arch, cpu = r.choice(list(ARCH_GBPS)), r.choice(list(SMP))
        bw = topo.bandwidth_matrix(t, arch, cpu)
        g = t.gpus
        assert len(bw) == len(g) and all(len(row) == len(g) for row in bw), (
            f"bandwidth_matrix on {len(g)} GPUs must be {len(g)} x {len(g)} (machine {case})"
        )
        for i, a in enumerate(g):
            for j, b in enumerate(g):
                k = "X" if a == b else t.link[(a, b)]
                want = (
                    0.0
                    if a == b
                    else int(k[2:]) * ARCH_GBPS[arch]
                    if k.startswith("NV")
                    else min(12.0, SMP[cpu])
                    if k == "SYS"
                    else 12.0
                )
                assert bw[i][j] == pytest.approx(want), (
                    f"bandwidth_matrix[{i}][{j}] ({k}, {arch}, {cpu}) = {bw[i][j]}, expected {want} (machine {case})"
                )


@pytest.mark.kata_gate(
    "closest_nic or gpudirect_rdma disagrees with the NICs' link kinds on machines beyond the shipped ones"
)
def test_bandwidth_nics_any_machine(topo: Any, topology: Any) -> None:
    r = random_for("nics")
    for _ in range(40):
        t = random_machine(r, topology)
        for a in t.gpus:
            want_nic = (
                min(t.nics, key=lambda n, a=a, t=t: (PCIE.index(t.link[(a, n)]), t.nics.index(n)))
                if t.nics
                else None
            )
            got = topo.closest_nic(t, a)
            assert got == want_nic, (
                f"closest_nic({a}) = {got}, expected {want_nic}: links {[(n, t.link[(a, n)]) for n in t.nics]}"
            )
            for n in t.nics:
                level = r.choice(PCIE)
                want = PCIE.index(t.link[(a, n)]) <= PCIE.index(level)
                got = topo.gpudirect_rdma(t, a, n, level)
                assert got is want, (
                    f"gpudirect_rdma({a}, {n}, level={level}) with a {t.link[(a, n)]} link = {got!r}, expected {want}"
                )


# ------------------------------------------------------------------------------ ring
@pytest.mark.kata_gate(
    "best_ring's bottleneck is below an exhaustive search's on machines beyond the shipped ones"
)
def test_ring_any_machine(search: Any, checks: Any) -> None:
    r = random_for("ring")
    for _ in range(60):
        n = r.randint(1, 8)
        bw = random_bw(r, n)
        ring = search.best_ring(bw)
        problem = checks.ring(ring, n)
        assert problem is None, f"best_ring on {bw}: {problem}"
        want, got = exhaustive_ring(bw), ring_bw(bw, ring)
        assert got == want, (
            f"best_ring({bw}) = {ring} runs at {got} GB/s; the best ring runs at {want}"
        )


def test_ring_sixteen_gpus(search: Any, checks: Any, kata_budget: Any) -> None:
    """Two 8-GPU islands of a 16-GPU box: at most 10x the reference's time (a factorial search
    of 15! orders never ends)."""
    ref = kata_budget.reference.module("search")

    def setup(seed: int) -> Any:
        return (random_bw(random.Random(seed), 16),)

    def right(ring: Any, bw: Any) -> None:
        assert checks.ring(ring, 16) is None, f"best_ring on 16 GPUs: {checks.ring(ring, 16)}"
        want = ring_bw(bw, ref.best_ring(bw))
        assert ring_bw(bw, ring) == want, (
            f"best_ring on 16 GPUs runs at {ring_bw(bw, ring)}, the best at {want}: {bw}"
        )

    kata_budget.compare(
        search.best_ring, ref.best_ring, name="ring16", ratio=10.0, setup=setup, check=right
    )


# ------------------------------------------------------------------------------ tree
@pytest.mark.kata_gate(
    "best_tree's bottleneck is below an exhaustive search's for some root and fanout"
)
def test_tree_any_machine(search: Any, checks: Any) -> None:
    r = random_for("tree")
    for _ in range(40):
        n = r.randint(1, 6)
        bw = random_bw(r, n)
        if r.random() < 0.4 and n > 3:  # a hub: one GPU is everybody's best link
            h = r.randrange(n)
            for j in range(n):
                if j != h:
                    bw[h][j] = bw[j][h] = 500.0
        root, fanout = r.randrange(n), r.choice([1, 1, 2, 2, 3])
        parent = search.best_tree(bw, root, fanout)
        problem = checks.tree(parent, n, root, fanout)
        assert problem is None, f"best_tree({bw}, root={root}, fanout={fanout}): {problem}"
        got = min((bw[i][p] for i, p in enumerate(parent) if p is not None), default=float("inf"))
        want = exhaustive_tree(bw, root, fanout) if n > 1 else float("inf")
        assert got == want, (
            f"best_tree({bw}, root={root}, fanout={fanout}) = {parent} runs at {got}; the best tree at {want}"
        )


# ------------------------------------------------------------------------------ place
@pytest.mark.kata_gate("pick_gpus chooses GPUs whose best ring is slower than another set's")
def test_place_any_machine(search: Any) -> None:
    r = random_for("place")
    for _ in range(30):
        n = r.randint(2, 8)
        bw = random_bw(r, n)
        k = r.randint(1, n)
        got = search.pick_gpus(bw, k)
        assert (
            isinstance(got, list)
            and len(set(got)) == k == len(got)
            and got == sorted(got)
            and all(0 <= g < n for g in got)
        ), f"pick_gpus({bw}, {k}) = {got!r}: expected {k} distinct GPUs, sorted"
        want = max(exhaustive_ring(sub(bw, s)) for s in itertools.combinations(range(n), k))
        assert exhaustive_ring(sub(bw, got)) == want, (
            f"pick_gpus({bw}, {k}) = {got}: its best ring runs at {exhaustive_ring(sub(bw, got))}, the best {k} GPUs' at {want}"
        )
    with raises(ValueError, "pick_gpus(bw, 0) must refuse k = 0"):
        search.pick_gpus([[0.0, 1.0], [1.0, 0.0]], 0)
