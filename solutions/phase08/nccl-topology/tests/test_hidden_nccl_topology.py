"""Hidden tests of nccl-topology: machines nobody has seen, rendered the many ways nvidia-smi
prints them, and every search checked against an exhaustive one written here (never the
learner's or the reference's code). Inputs come from the run seed (harness.testing)."""

from __future__ import annotations

import hashlib
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


FAST = [120.0, 240.0, 370.8]  # NV6/NV12 at 20 GB/s, NV18 at 20.6: above every slow value
SLOW = [5.0, 6.0, 10.0, 12.0, 20.0, 24.0, 40.0, 48.0, 60.0]


def noise(r: random.Random, n: int, fast: float, p: float) -> list[list[float]]:
    """n GPUs whose links are `fast` with probability p, else one of a few slower values."""
    slow = r.sample(SLOW, r.randint(1, 3))
    bw = [[0.0] * n for _ in range(n)]
    for i, j in itertools.combinations(range(n), 2):
        bw[i][j] = bw[j][i] = fast if r.random() < p else r.choice(slow)
    return bw


def link(bw: list[list[float]], a: int, b: int, value: float) -> None:
    bw[a][b] = bw[b][a] = value


def hidden_cycle(r: random.Random, n: int) -> tuple[list[list[float]], float]:
    """A ring of the fastest links through all n GPUs in a random order, hidden among sparse fast
    chords and slower links: the best ring runs at the fast value, known without a search."""
    fast = r.choice(FAST)
    bw = noise(r, n, fast, r.uniform(0.05, 0.2))
    order = r.sample(range(n), n)
    for a, b in zip(order, order[1:] + order[:1], strict=True):
        link(bw, a, b, fast)
    return bw, fast


def hidden_path(r: random.Random, n: int) -> tuple[list[list[float]], int, float]:
    """A path of the fastest links from a random root through every GPU, among fast chords and
    slower links: with fanout 1 the best tree (a chain) runs at the fast value."""
    fast = r.choice(FAST)
    bw = noise(r, n, fast, r.uniform(0.1, 0.3))
    order = r.sample(range(n), n)
    for a, b in itertools.pairwise(order):
        link(bw, a, b, fast)
    return bw, order[0], fast


def dead_end_at_root(r: random.Random, fanout: int) -> tuple[list[list[float]], int, float]:
    """A tree of the fastest links exists, but the root's neighbours with the fewest fast links are
    a dead end: `fanout` of them form a fast clique with the root and reach nothing else, and the
    root's one other fast neighbour (with more fast links) is the only way to the other GPUs,
    which hang from it as a random fanout-limited tree with fast chords among themselves."""
    fast = r.choice(FAST)
    rest = r.randint(fanout, fanout + 4)
    n = 2 + fanout + rest
    names = r.sample(range(n), n)  # random labels
    root, gate, clique, far = names[0], names[1], names[2 : 2 + fanout], names[2 + fanout :]
    bw = noise(r, n, fast, 0.0)  # slow everywhere; the fast links below
    for a, b in itertools.combinations([root, *clique], 2):
        link(bw, a, b, fast)
    link(bw, root, gate, fast)
    placed, kids = [gate], {gate: 0}
    for v in far:  # the far side: a random tree under the gate, at most fanout children each
        p = r.choice([u for u in placed if kids[u] < fanout])
        kids[p] += 1
        kids[v] = 0
        placed.append(v)
        link(bw, p, v, fast)
    for a, b in itertools.combinations(far, 2):
        if r.random() < 0.3:
            link(bw, a, b, fast)
    for v in r.sample(far, fanout):  # the gate has more fast links than any clique GPU
        link(bw, gate, v, fast)
    return bw, root, fast


def pair_trap(r: random.Random, k: int) -> tuple[list[list[float]], float]:
    """k GPUs form a ring of fast links; each of them also has a faster link to a GPU of its own
    that has no other fast link, and a few GPUs more are slow everywhere: the best k GPUs run at
    the fast value, and every best pair leads away from them."""
    n = 2 * k + r.randint(0, 12 - 2 * k)
    fast = r.choice([40.0, 48.0, 60.0, 120.0, 240.0])
    faster = r.choice([v for v in [120.0, 240.0, 370.8] if v > fast])
    bw = [[0.0] * n for _ in range(n)]
    slow = r.sample([v for v in SLOW if v < fast], r.randint(1, 2))
    for i, j in itertools.combinations(range(n), 2):
        link(bw, i, j, r.choice(slow))
    names = r.sample(range(n), n)
    ring, partners = names[:k], names[k : 2 * k]
    for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
        link(bw, a, b, fast)
    for a, b in zip(ring, partners, strict=True):
        link(bw, a, b, faster)
    return bw, fast


def answer(call: str, fn: Any, *args: Any) -> Any:
    """fn(*args) on a valid input: a ValueError there is a wrong answer (the function refused
    what it must accept), worded as one; other exceptions pass through as the learner's."""
    try:
        return fn(*args)
    except ValueError as e:
        raise AssertionError(f"{call} refused a valid input: ValueError({str(e)!r})") from None


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


def covers_all(fast: list[int], n: int) -> bool:
    """Whether the graph of bitmask neighbours `fast` has a cycle through all n nodes: every path
    from node 0, one subset at a time (ends[mask]: the nodes a path over mask can end at)."""
    ends = [0] * (1 << n)
    ends[1] = 1
    for mask in range(1, 1 << n, 2):
        here = ends[mask]
        v = 0
        while here:
            if here & 1:
                out = fast[v] & ~mask
                while out:
                    bit = out & -out
                    ends[mask | bit] |= bit
                    out ^= bit
            here >>= 1
            v += 1
    return bool(ends[(1 << n) - 1] & fast[0])


def best_ring_value(bw: list[list[float]]) -> float:
    """The best ring's bottleneck: permutations up to 8 GPUs, above that the largest link speed
    whose links still hold a cycle through every GPU."""
    n = len(bw)
    if n <= 8:
        return exhaustive_ring(bw)
    for t in sorted({x for row in bw for x in row if x > 0}, reverse=True):
        if covers_all([sum(1 << j for j in range(n) if bw[i][j] >= t) for i in range(n)], n):
            return t
    raise AssertionError("the grader's search found no ring on a complete graph")


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
        got = answer(f"parse_topo (machine {case})", topo.parse_topo, text)
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


def junk_kind(r: random.Random) -> str:
    """A cell nvidia-smi never prints between two devices: near misses of the real kinds."""
    real = [*PCIE, *NV]
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return r.choice(
        [
            "NV",
            "NV0",
            f"NV{r.choice('XYZ#-')}",
            f"NV{r.randint(1, 18)}{r.choice('abx.')}",
            f"NV-{r.randint(1, 18)}",
            r.choice(real).lower(),
            r.choice(PCIE)[:-1] + r.choice([c for c in letters if c not in "XBEIS"]),
            "".join(r.choice(letters) for _ in range(r.randint(2, 4))) + "Q",
            r.choice(["PCI", "PCIE", "QPI", "UPI", "-", "?", "x", "N/A"]),
        ]
    )


@pytest.mark.kata_gate(
    "parse_topo accepts a cell that is no link kind (not X, NV#, PIX, PXB, PHB, NODE or SYS) on machines beyond the shipped ones"
)
def test_parse_refuses_unknown_kinds(topo: Any, topology: Any) -> None:
    r = random_for("unknown kinds")
    for case in range(25):
        t = random_machine(r, topology, n_gpus=r.randint(2, 8))
        a, b = r.sample(t.devices, 2)
        junk = junk_kind(r)
        bad = dict(t.link)
        bad[(a, b)] = bad[(b, a)] = junk  # both mirror cells: only the kind is wrong
        text = render(
            topology.Topology(t.devices, bad, t.cpu_affinity, t.numa_affinity, t.nic_names), r
        )
        with raises(
            ValueError,
            f"parse_topo must refuse the link kind {junk!r} between {a} and {b} (machine {case}):\n{text}\n",
        ):
            topo.parse_topo(text)


BREAKS = {  # how a matrix is broken -> what the gate says parse_topo accepts
    "diagonal": "a link kind on the diagonal (where X belongs)",
    "off-diagonal": "X between two different devices",
    "mirror": "a cell that differs from its mirror image",
    "short": "a row with too few cells",
    "missing": "a matrix with no row for a device of the header",
    "twice": "a matrix in which a device's row appears twice",
    "stranger": "a row for a device the header does not name",
}


def broken(r: random.Random, t: Any, text: str, how: str) -> tuple[str, str]:
    """`text` (t rendered) broken in one way; and what is wrong with it, in words."""
    lines = text.split("\n")
    row = r.randrange(1, len(t.devices) + 1)
    name = t.devices[row - 1]
    cells = lines[row].split()
    col = r.choice([c for c in range(1, len(t.devices) + 1) if c != row])
    other = t.devices[col - 1]
    if how == "diagonal":
        cells[row] = r.choice(PCIE + NV)
        what = f"row {name} has {cells[row]} on the diagonal"
    elif how == "off-diagonal":
        cells[col] = "X"
        mirror = lines[col].split()
        mirror[row] = "X"
        lines[col] = "\t".join(mirror)
        what = f"{name} and {other} are X to each other"
    elif how == "mirror":
        cells[col] = r.choice([k for k in PCIE + NV if k != cells[col]])
        what = f"{name}-{other} is {cells[col]} but {other}-{name} is {t.link[(other, name)]}"
    elif how == "short":
        cells = cells[: r.randint(1, len(t.devices) - 1)]
        what = f"row {name} has {len(cells) - 1} cells for {len(t.devices)} devices"
    elif how == "missing":
        what = f"there is no row for {name}"
    elif how == "twice":
        what = f"the row of {name} appears twice"
    else:
        kind = name[:3]
        count = len(t.gpus) if kind == "GPU" else len(t.nics)
        stranger = f"{kind}{count + r.randint(0, 3)}"
        cells[0] = stranger
        what = f"there is a row for {stranger}, which the header does not name"
    lines[row] = "\t".join(cells)
    if how == "missing":
        del lines[row]
    elif how == "twice":
        lines.insert(r.randint(row, len(t.devices) + 1), lines[row])
    elif how == "stranger":
        lines.insert(r.randint(row + 1, len(t.devices) + 1), lines[row])
        lines[row] = text.split("\n")[row]
    return "\n".join(lines), what


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(
            how, marks=pytest.mark.kata_gate(f"parse_topo accepts {what}, on random machines")
        )
        for how, what in BREAKS.items()
    ],
)
def test_parse_refuses_broken_machines(topo: Any, topology: Any, how: str) -> None:
    r = random_for(f"broken/{how}")
    for case in range(12):
        t = random_machine(r, topology, n_gpus=r.randint(2, 8))
        whole = render(t, r)
        assert (
            answer(f"parse_topo (machine {case}, unbroken)", topo.parse_topo, whole).link == t.link
        ), (
            f"parse_topo must read the unbroken matrix before it can refuse a broken one (machine {case}):\n{whole}"
        )
        text, what = broken(r, t, whole, how)
        with raises(
            ValueError,
            f"parse_topo must refuse a matrix in which {what} (machine {case}):\n{text}\n",
        ):
            topo.parse_topo(text)


# ------------------------------------------------------------------------------ bandwidth
def expected_gbps(kind: str, arch: str, cpu: str) -> float:
    """NCCL's link model, the grader's copy: NV# is # NVLinks of the arch's speed, every PCIe
    path PCI_BW, and SYS the smaller of PCIe and the CPUs' interconnect."""
    if kind.startswith("NV"):
        return int(kind[2:]) * ARCH_GBPS[arch]
    return min(12.0, SMP[cpu]) if kind == "SYS" else 12.0


@pytest.mark.kata_gate(
    "link_gbps differs from NCCL's link model (NV# is # x NVLINK_GBPS[arch], PCIe kinds PCI_GBPS, SYS the smaller of PCI_GBPS and SMP_GBPS[cpu]) for some link kind, arch and CPU vendor"
)
def test_bandwidth_every_kind_arch_and_cpu(topo: Any, topology: Any) -> None:
    # every arch and CPU vendor of the given tables (the grader's own values for each)
    for arch in topology.NVLINK_GBPS:
        for cpu in topology.SMP_GBPS:
            for kind in [f"NV{k}" for k in range(1, 19)] + PCIE:
                want = expected_gbps(kind, arch, cpu)
                got = answer(
                    f"link_gbps({kind!r}, {arch!r}, {cpu!r})", topo.link_gbps, kind, arch, cpu
                )
                assert got == pytest.approx(want), (
                    f"link_gbps({kind!r}, {arch!r}, {cpu!r}) = {got}, expected {want}"
                )


@pytest.mark.kata_gate(
    "bandwidth_matrix differs from NCCL's link model on machines beyond the shipped ones, for some arch and CPU vendor"
)
def test_bandwidth_matrix_any_machine(topo: Any, topology: Any) -> None:
    r = random_for("bandwidth")
    every = [(a, c) for a in topology.NVLINK_GBPS for c in topology.SMP_GBPS]
    for case in range(3 * len(every)):
        t = random_machine(r, topology)
        arch, cpu = every[case % len(every)]
        bw = answer(
            f"bandwidth_matrix(machine {case}, {arch!r}, {cpu!r})",
            topo.bandwidth_matrix,
            t,
            arch,
            cpu,
        )
        g = t.gpus
        assert len(bw) == len(g) and all(len(row) == len(g) for row in bw), (
            f"bandwidth_matrix on {len(g)} GPUs must be {len(g)} x {len(g)} (machine {case})"
        )
        for i, a in enumerate(g):
            for j, b in enumerate(g):
                k = "X" if a == b else t.link[(a, b)]
                want = 0.0 if a == b else expected_gbps(k, arch, cpu)
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
            got = answer(f"closest_nic({a})", topo.closest_nic, t, a)
            assert got == want_nic, (
                f"closest_nic({a}) = {got}, expected {want_nic}: links {[(n, t.link[(a, n)]) for n in t.nics]}"
            )
            for n in t.nics:
                level = r.choice([*PCIE, None])  # None: NCCL's default, PXB
                want = PCIE.index(t.link[(a, n)]) <= PCIE.index(level or "PXB")
                args = (t, a, n) if level is None else (t, a, n, level)
                said = "the default level" if level is None else f"level={level}"
                got = answer(f"gpudirect_rdma({a}, {n}, {said})", topo.gpudirect_rdma, *args)
                assert got is want, (
                    f"gpudirect_rdma({a}, {n}, {said}) with a {t.link[(a, n)]} link = {got!r}, expected {want}"
                )


# ------------------------------------------------------------------------------ ring
def show(bw: list[list[float]]) -> str:
    return "[" + ", ".join("[" + ", ".join(f"{x:g}" for x in row) + "]" for row in bw) + "]"


@pytest.mark.kata_gate(
    "best_ring's bottleneck is below an exhaustive search's on machines beyond the shipped ones"
)
def test_ring_any_machine(search: Any, checks: Any) -> None:
    r = random_for("ring")
    for case in range(75):
        n = r.randint(1, 8) if case < 50 else r.randint(9, 13)
        bw = random_bw(r, n)
        ring = answer(f"best_ring({show(bw)})", search.best_ring, bw)
        problem = checks.ring(ring, n)
        assert problem is None, f"best_ring on {show(bw)}: {problem}"
        want, got = best_ring_value(bw), ring_bw(bw, ring)
        assert got == want, (
            f"best_ring({show(bw)}) = {ring} runs at {got:g} GB/s; the best ring ({n} GPUs) runs at {want:g}"
        )


@pytest.mark.kata_gate(
    "best_ring misses a ring of the fastest links hidden among slower ones (9 to 14 GPUs)"
)
def test_ring_hidden_fast_ring(search: Any, checks: Any) -> None:
    r = random_for("hidden ring")
    for _ in range(60):
        n = r.randint(9, 14)
        bw, fast = hidden_cycle(r, n)
        ring = answer(f"best_ring({show(bw)})", search.best_ring, bw)
        problem = checks.ring(ring, n)
        assert problem is None, f"best_ring on {show(bw)}: {problem}"
        assert ring_bw(bw, ring) == fast, (
            f"best_ring({show(bw)}) = {ring} runs at {ring_bw(bw, ring):g} GB/s; a ring of {fast:g} GB/s links goes through all {n} GPUs"
        )


def test_ring_sixteen_gpus(search: Any, checks: Any, kata_budget: Any) -> None:
    """16 GPUs with a few link speeds, fresh from the run seed: at most 10x the reference's time
    (a factorial search of 15! orders never ends). Messages name the matrix by the run seed and
    a digest, not whole."""
    ref = kata_budget.reference.module("search")

    def setup(seed: int) -> Any:
        return (random_bw(random_for(f"ring16/{seed}"), 16),)

    def right(ring: Any, bw: Any) -> None:
        digest = hashlib.sha256(repr(bw).encode()).hexdigest()[:12]
        which = f"a random 16-GPU matrix of this run (sha256 {digest}), link speeds {sorted({x for row in bw for x in row if x > 0})}"
        assert checks.ring(ring, 16) is None, f"best_ring on {which}: {checks.ring(ring, 16)}"
        want = ring_bw(bw, ref.best_ring(bw))
        assert ring_bw(bw, ring) == want, (
            f"best_ring on {which} runs at {ring_bw(bw, ring):g} GB/s; a ring of links >= {want:g} exists"
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
        parent = answer(
            f"best_tree({show(bw)}, root={root}, fanout={fanout})",
            search.best_tree,
            bw,
            root,
            fanout,
        )
        problem = checks.tree(parent, n, root, fanout)
        assert problem is None, f"best_tree({bw}, root={root}, fanout={fanout}): {problem}"
        got = min((bw[i][p] for i, p in enumerate(parent) if p is not None), default=float("inf"))
        want = exhaustive_tree(bw, root, fanout) if n > 1 else float("inf")
        assert got == want, (
            f"best_tree({bw}, root={root}, fanout={fanout}) = {parent} runs at {got}; the best tree at {want}"
        )


@pytest.mark.kata_gate(
    "best_tree misses a tree of the fastest links hidden among slower ones (fanout 1: a chain from the root; fanout 2-3: the root's neighbours with the fewest fast links a dead end)"
)
def test_tree_hidden_fast_tree(search: Any, checks: Any) -> None:
    r = random_for("hidden tree")
    for case in range(50):
        if case % 2:
            fanout = 1
            bw, root, fast = hidden_path(r, r.randint(7, 12))
        else:
            fanout = r.choice([2, 3])
            bw, root, fast = dead_end_at_root(r, fanout)
        n = len(bw)
        parent = answer(
            f"best_tree({show(bw)}, root={root}, fanout={fanout})",
            search.best_tree,
            bw,
            root,
            fanout,
        )
        problem = checks.tree(parent, n, root, fanout)
        assert problem is None, f"best_tree({show(bw)}, root={root}, fanout={fanout}): {problem}"
        got = min(bw[i][p] for i, p in enumerate(parent) if p is not None)
        assert got == fast, (
            f"best_tree({show(bw)}, root={root}, fanout={fanout}) = {parent} runs at {got:g}; a tree of {fast:g} GB/s links spans the {n} GPUs"
        )


# ------------------------------------------------------------------------------ place
@pytest.mark.kata_gate("pick_gpus chooses GPUs whose best ring is slower than another set's")
def test_place_any_machine(search: Any) -> None:
    r = random_for("place")
    for _ in range(30):
        n = r.randint(2, 8)
        bw = random_bw(r, n)
        k = r.randint(1, n)
        got = answer(f"pick_gpus({show(bw)}, {k})", search.pick_gpus, bw, k)
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


@pytest.mark.kata_gate(
    "pick_gpus misses the only k GPUs with a ring of fast links when each of them has a faster link to a GPU outside"
)
def test_place_best_pair_leads_away(search: Any) -> None:
    r = random_for("pair trap")
    for _ in range(20):
        k = r.randint(3, 5)
        bw, fast = pair_trap(r, k)
        got = answer(f"pick_gpus({show(bw)}, {k})", search.pick_gpus, bw, k)
        n = len(bw)
        assert (
            isinstance(got, list)
            and len(set(got)) == k == len(got)
            and got == sorted(got)
            and all(0 <= g < n for g in got)
        ), f"pick_gpus({show(bw)}, {k}) = {got!r}: expected {k} distinct GPUs, sorted"
        assert best_ring_value(sub(bw, got)) == fast, (
            f"pick_gpus({show(bw)}, {k}) = {got}: its best ring runs at {best_ring_value(sub(bw, got)):g}; {k} GPUs with a ring of {fast:g} GB/s links exist"
        )
