"""Hidden tests of cluster-scheduler: any cluster state, other traces and seeds, edge cases,
and gates for the known shortcuts. Every run is replayed through a fresh checker.py.

Examples are derandomized (harness.testing.hidden_settings), so a grade never depends on luck.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.testing import hidden_settings


@pytest.fixture(scope="module")
def gen(kata: Any) -> Any:
    return kata.module("gen_traces")


def starts(rep: Any) -> dict[int, float]:
    return {j: round(t, 6) for j, t in sorted(rep.first_start.items())}


def run_trace(workload: Any, checker: Any, trace: dict[str, Any], sched: Any) -> Any:
    jobs, durations = workload.jobs_of(trace)
    return checker.check(workload.engine_for(trace).run(sched, jobs, durations), trace["jobs"])


def run_reference(kata_budget: Any, checker: Any, trace: dict[str, Any], make: Any) -> Any:
    """The reference's scheduler `make(module)` on its own engine."""
    ref = kata_budget.reference
    return run_trace(ref.module("workload"), checker, trace, make(ref.module("scheduler")))


# --------------------------------------------------------------------------- placement
@st.composite
def states(draw: Any) -> tuple[Any, list[set[int]], int, int]:
    # A seeded uniform draw, not hypothesis' small-first values: those are mostly one rack and
    # one pod, where first fit and topology-aware placement agree.
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    racks, per_rack, per_node = rng.randint(1, 3), rng.randint(1, 4), rng.choice([2, 4, 8])
    island = rng.choice([d for d in (1, 2, 4, 8) if per_node % d == 0])
    nodes = racks * per_rack
    free = [{n * per_node + i for i in range(per_node) if rng.random() < 0.5} for n in range(nodes)]
    return (racks, per_rack, per_node, island), free, rng.randint(1, 4), rng.randint(1, per_node)


def model_fit(free: list[set[int]], pods: int, g: int, best: bool) -> list[list[int]] | None:
    left = [sorted(f) for f in free]
    if sum(len(f) // g for f in left) < pods:
        return None
    out = []
    for _ in range(pods):
        ok = [n for n, f in enumerate(left) if len(f) >= g]
        n = min(ok, key=lambda n: (len(left[n]), n)) if best else ok[0]
        out.append(left[n][:g])
        left[n] = left[n][g:]
    return out


@pytest.mark.kata_gate(
    "first_fit() or best_fit() disagree with their rules on random cluster states"
)
@hidden_settings(max_examples=80)
@given(s=states())
def test_placement_first_and_best_fit_any_state(placement: Any, cluster: Any, s: Any) -> None:
    (racks, per_rack, per_node, island), free, pods, g = s
    topo = cluster.Topology("t", racks, per_rack, per_node, island)
    before = [set(f) for f in free]
    assert placement.first_fit(topo, free, pods, g) == model_fit(free, pods, g, best=False), (
        f"first_fit(free={free}, pods={pods}, gpus_per_pod={g}) must take each pod from the lowest node with room"
    )
    assert placement.best_fit(topo, free, pods, g) == model_fit(free, pods, g, best=True), (
        f"best_fit(free={free}, pods={pods}, gpus_per_pod={g}) must take each pod from the node with the fewest free GPUs that fits (ties: lowest id)"
    )
    assert free == before, "first_fit/best_fit must not change the free sets they are given"


def model_topology(topo: Any, free: list[set[int]], pods: int, g: int) -> list[list[int]] | None:
    """The grader's model of topology_aware's docstring rules (rack best fit, then per pod the
    node that spans fewest islands with fewest free GPUs, then the island pick)."""
    left = [sorted(f) for f in free]
    if sum(len(f) // g for f in left) < pods:
        return None
    nodes = list(range(topo.nodes))
    hosts = [
        r for r in range(topo.racks) if sum(len(left[n]) // g for n in topo.rack_nodes(r)) >= pods
    ]
    if hosts:
        rack = min(hosts, key=lambda r: (sum(len(left[n]) for n in topo.rack_nodes(r)), r))
        nodes = list(topo.rack_nodes(rack))

    def pick(n: int) -> list[int]:
        by: dict[int, list[int]] = {}
        for x in left[n]:
            by.setdefault(topo.island_of(x), []).append(x)
        whole = [i for i in by if len(by[i]) >= g]
        if whole:
            return by[min(whole, key=lambda i: (len(by[i]), i))][:g]
        out: list[int] = []
        for i in sorted(by, key=lambda i: (-len(by[i]), i)):
            out += by[i][: g - len(out)]
        return out[:g]

    need = -(-g // topo.island_size)
    out = []
    for _ in range(pods):
        fit = [n for n in nodes if len(left[n]) >= g]
        good = [n for n in fit if len({topo.island_of(x) for x in pick(n)}) <= need]
        n = min(good or fit, key=lambda n: (len(left[n]), n))
        taken = pick(n)
        out.append(sorted(taken))
        left[n] = [x for x in left[n] if x not in taken]
    return out


@pytest.mark.kata_gate(
    "topology_aware() disagrees with its docstring's rules (rack with fewest free GPUs, node,"
    " fullest island, then islands most-free-first) on random cluster states"
)
@hidden_settings(max_examples=120)
@given(s=states())
def test_placement_topology_aware_rules_any_state(placement: Any, cluster: Any, s: Any) -> None:
    (racks, per_rack, per_node, island), free, pods, g = s
    topo = cluster.Topology("t", racks, per_rack, per_node, island)
    got = placement.topology_aware(topo, [set(f) for f in free], pods, g)
    want = model_topology(topo, free, pods, g)
    got = None if got is None else [sorted(p) for p in got]
    assert got == want, (
        f"topology_aware(racks={racks}, nodes/rack={per_rack}, gpus/node={per_node},"
        f" island={island}, free={free}, pods={pods}, gpus_per_pod={g}) = {got}; the rules"
        f" give {want}"
    )


@pytest.mark.kata_gate(
    "topology-aware placement spans NVLink islands or racks on random cluster states where one"
    " island or one rack fits the job"
)
@hidden_settings(max_examples=80)
@given(s=states())
def test_placement_topology_aware_any_state(placement: Any, cluster: Any, s: Any) -> None:
    (racks, per_rack, per_node, island), free, pods, g = s
    topo = cluster.Topology("t", racks, per_rack, per_node, island)
    got = placement.topology_aware(topo, free, pods, g)
    want = model_fit(free, pods, g, best=False)
    if want is None:
        assert got is None, (
            f"topology_aware(free={free}, pods={pods}, gpus_per_pod={g}) returned {got}: the pods do not fit"
        )
        return
    assert got is not None and len(got) == pods, (
        f"topology_aware(free={free}, pods={pods}, gpus_per_pod={g}) returned {got}: the pods fit, {pods} pods expected"
    )
    flat = [x for p in got for x in p]
    assert len(set(flat)) == len(flat) and all(x in free[topo.node_of(x)] for x in flat), (
        f"topology_aware(free={free}, ...) returned {got}: GPUs given twice or not free"
    )
    assert all(len(p) == g and len({topo.node_of(x) for x in p}) == 1 for p in got), (
        f"topology_aware(..., gpus_per_pod={g}) returned {got}: every pod needs {g} GPUs on one node"
    )
    one_rack = [
        r for r in range(racks) if sum(len(free[n]) // g for n in topo.rack_nodes(r)) >= pods
    ]
    if one_rack:
        assert len({topo.rack_of(topo.node_of(p[0])) for p in got}) == 1, (
            f"rack {one_rack[0]} alone can host all {pods} pods, the placement spans racks"
        )
    if pods == 1 and g <= island:
        # The rack the rules pick: the one with the fewest free GPUs among those that can host.
        rack_free = lambda r: sum(len(free[n]) for n in topo.rack_nodes(r))  # noqa: E731
        rack = min(one_rack, key=lambda r: (rack_free(r), r))
        fits_island = any(
            sum(1 for x in free[n] if topo.island_of(x) == i) >= g
            for n in topo.rack_nodes(rack)
            for i in {topo.island_of(x) for x in free[n]}
        )
        if fits_island:
            assert len({topo.island_of(x) for x in got[0]}) == 1, (
                f"a pod of {g} fits in one NVLink island, but {got[0]} spans islands"
            )


@pytest.mark.kata_gate(
    "topology-aware placement spans NVLink islands or racks where one island or one rack fits"
    " the job (nodes of two quads, dgx racks)"
)
def test_placement_topology_aware_cases(placement: Any, cluster: Any, toy: Any) -> None:
    q = cluster.QUADS  # nodes of 8 in two islands of 4
    free = [set() for _ in range(q.nodes)]
    free[0] = {1, 2, 3, 4, 5}  # 3 in island 0, 2 in island 1
    free[1] = {8, 9, 10, 11, 12, 13, 14, 15}
    assert placement.topology_aware(q, free, 1, 3) == [[1, 2, 3]], (
        "topology_aware(quads, 1 pod of 3): [[1, 2, 3]], the island of node 0 with 3 free"
    )
    assert placement.topology_aware(q, free, 1, 4) == [[8, 9, 10, 11]], (
        "node 0 has no island of 4 free"
    )
    assert placement.topology_aware(q, free, 1, 2) == [[4, 5]], "the fullest island that fits"
    assert q.slowdown(placement.topology_aware(q, free, 1, 8)) == 1.0, (
        "topology_aware(quads, 1 pod of 8) must place it on a whole free node (slowdown 1.0)"
    )
    # Two pods of 8 on the dgx cluster: one rack has two free nodes.
    d = cluster.DGX_H100
    free = [set() for _ in range(d.nodes)]
    for n in (3, 4, 9, 10):  # rack 0: node 3; rack 1: node 4; rack 2: nodes 9 and 10
        free[n] = set(d.node_gpus(n))
    got = placement.topology_aware(d, free, 2, 8)
    assert got == [list(d.node_gpus(9)), list(d.node_gpus(10))], (
        f"topology_aware(dgx, 2 pods of 8) gave {got}: rack 2's nodes 9 and 10 hold both pods"
    )


# --------------------------------------------------------------------------- gang
@pytest.mark.kata_gate(
    "gang scheduling breaks an invariant of checker.py (a partial gang holding GPUs, a GPU bound"
    " twice, a head that waits while it fits) on generated dgx and quads traces"
)
@pytest.mark.parametrize(
    "kind,seed,place",
    [("dgx", 41, "first_fit"), ("quads", 42, "best_fit"), ("quads", 42, "topology_aware")],
)
def test_gang_other_traces_checked(
    scheduler: Any, workload: Any, gen: Any, checker: Any, kind: str, seed: int, place: str
) -> None:
    run_trace(workload, checker, gen.generate(kind, seed, size=0.5), scheduler.GangScheduler(place))


@pytest.mark.parametrize("kind,seed,place", [("dgx", 41, "first_fit"), ("quads", 42, "best_fit")])
def test_gang_other_traces_as_the_reference(
    scheduler: Any,
    workload: Any,
    gen: Any,
    checker: Any,
    kata_budget: Any,
    kind: str,
    seed: int,
    place: str,
) -> None:
    trace = gen.generate(kind, seed, size=0.5)
    rep = run_trace(workload, checker, trace, scheduler.GangScheduler(place))
    want = run_reference(kata_budget, checker, trace, lambda m: m.GangScheduler(place))
    assert starts(rep) == starts(want), (
        f"GangScheduler({place!r}) on {kind} seed {seed}: start times differ from the rules'"
    )


@pytest.mark.kata_gate(
    "gang scheduling: a 4-pod job queued behind four one-node jobs is not bound whole, at the"
    " instant the whole cluster is free (t=400)"
)
def test_gang_big_job_behind_small_ones(scheduler: Any, simulate: Any, toy: Any) -> None:
    # A 4-pod job waits for the whole cluster; binding its pods as nodes free would hold them.
    rows = [[i, 0.0, 1, 4, 100 * (i + 1), 100 * (i + 1), 0] for i in range(4)]
    rows.append([4, 1.0, 4, 4, 10, 10, 0])
    result, rep = simulate(lambda: scheduler.GangScheduler("best_fit"), rows, toy)
    assert starts(rep)[4] == 400.0, (
        f"GangScheduler(best_fit): the 4-pod job starts at {starts(rep)[4]}, not 400 (when the whole cluster is free)"
    )
    assert [e.time for e in result.log if e.job == 4 and e.kind == "bind"] == [400.0], (
        "GangScheduler(best_fit): the 4-pod job's pods are bound all at once at t=400"
    )


def test_gang_empty_and_single(scheduler: Any, simulate: Any, toy: Any) -> None:
    _, rep = simulate(
        lambda: scheduler.GangScheduler("topology_aware"), [[0, 5.0, 4, 4, 1, 1, 0]], toy
    )
    assert starts(rep) == {0: 5.0}, (
        f"GangScheduler(topology_aware): one job submitted at 5 s starts at {starts(rep)}, not {{0: 5.0}}"
    )


# --------------------------------------------------------------------------- backfill
@pytest.mark.kata_gate("backfill delays the head job's reservation (no shadow time honoured)")
@pytest.mark.parametrize(
    "kind,seed,place",
    [
        ("dgx", 41, "best_fit"),
        ("dgx", 44, "first_fit"),
        ("quads", 42, "topology_aware"),
        ("priority", 43, "best_fit"),
    ],
)
def test_backfill_other_traces_checked(
    scheduler: Any, workload: Any, gen: Any, checker: Any, kind: str, seed: int, place: str
) -> None:
    trace = gen.generate(kind, seed, size=0.5)
    run_trace(workload, checker, trace, scheduler.GangScheduler(place, backfill=True))


@pytest.mark.parametrize(
    "kind,seed,place", [("dgx", 41, "best_fit"), ("priority", 43, "first_fit")]
)
def test_backfill_other_traces_as_the_reference(
    scheduler: Any,
    workload: Any,
    gen: Any,
    checker: Any,
    kata_budget: Any,
    kind: str,
    seed: int,
    place: str,
) -> None:
    trace = gen.generate(kind, seed, size=0.5)
    rep = run_trace(workload, checker, trace, scheduler.GangScheduler(place, backfill=True))
    want = run_reference(
        kata_budget, checker, trace, lambda m: m.GangScheduler(place, backfill=True)
    )
    assert starts(rep) == starts(want), (
        f"GangScheduler({place!r}, backfill=True) on {kind} seed {seed}: start times differ from the rules'"
    )


@pytest.mark.kata_gate("backfill delays the head job's reservation (no shadow time honoured)")
def test_backfill_skips_and_goes_on(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [
        [0, 0.0, 3, 4, 100, 100, 0],  # nodes 0-2 (best fit: lowest ids), spans racks: 200 s
        [1, 1.0, 2, 4, 100, 100, 0],  # head: shadow 200, reserves nodes 0 and 1
        [2, 2.0, 1, 4, 500, 500, 0],  # node 3 is not reserved: backfills
        [3, 3.0, 1, 4, 50, 50, 0],  # nothing free: waits
        [4, 4.0, 1, 1, 10, 10, 0],  # nothing free either, until job 3 ends (t=250)
    ]
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", backfill=True), rows, toy)
    assert starts(rep) == {0: 0.0, 1: 200.0, 2: 2.0, 3: 200.0, 4: 250.0}, (
        f"GangScheduler(best_fit, backfill=True) starts {starts(rep)}, not {{0: 0, 1: 200, 2: 2, 3: 200, 4: 250}}"
    )


def test_backfill_skips_a_job_and_backfills_the_next(
    scheduler: Any, simulate: Any, toy: Any
) -> None:
    rows = [
        [0, 0.0, 2, 4, 100, 100, 0],  # nodes 0 and 1 until 100
        [1, 1.0, 3, 4, 100, 100, 0],  # the head: shadow 100, nodes 0-2 reserved
        [2, 2.0, 2, 4, 500, 500, 0],  # long, and only node 3 is off the reservation: skipped
        [3, 2.0, 1, 4, 40, 50, 0],  # behind it, ends by 52: backfills at once
    ]
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", backfill=True), rows, toy)
    assert starts(rep) == {0: 0.0, 1: 100.0, 2: 300.0, 3: 2.0}, (
        "skip a job that fits neither way, go on"
    )


@pytest.mark.kata_gate("backfill delays the head job's reservation (no shadow time honoured)")
def test_backfill_long_job_off_the_reservation(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [
        [0, 0.0, 1, 4, 100, 100, 0],  # node 0
        [1, 0.0, 1, 2, 1000, 1000, 0],  # node 1 (best fit of equals: lowest id), GPUs 4, 5
        [2, 1.0, 4, 4, 10, 10, 0],  # head: needs every node, shadow time 1000
        [3, 2.0, 1, 2, 5000, 5000, 0],  # would it hold GPUs the head needs? all are reserved
        [4, 3.0, 1, 4, 900, 900, 0],  # ends at 903 <= 1000: backfills on node 2
    ]
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", backfill=True), rows, toy)
    s = starts(rep)
    assert s[4] == 3.0 and s[2] == 1000.0 and s[3] >= 1000.0, (
        f"GangScheduler(best_fit, backfill=True) starts {s}: job 4 (ends before the shadow time) at 3, the head job 2 at 1000, job 3 not before 1000"
    )


# --------------------------------------------------------------------------- preemption
@pytest.mark.kata_gate("preemption ignores the checkpoint cost (preempts jobs about to end)")
@pytest.mark.parametrize("left", [1.0, 9.0, 10.0])
def test_preemption_checkpoint_cost(scheduler: Any, simulate: Any, toy: Any, left: float) -> None:
    rows = [
        [0, 0.0, 2, 4, 1000, 1000, 0],
        [1, 0.0, 2, 4, 1000, 1000, 0],
        [2, 1000.0 - left, 1, 4, 100, 100, 1],
    ]
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", preemption=True), rows, toy, 10.0)
    assert rep.preemptions == {}, f"{left} s to go is no more than the 10 s checkpoint"
    # And with 11 s to go, it preempts.
    rows[2][1] = 989.0
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", preemption=True), rows, toy, 10.0)
    assert rep.preemptions == {1: 1}, (
        f"GangScheduler(best_fit, preemption=True): with 11 s to go (> the 10 s checkpoint) job 1 is preempted; preemptions {rep.preemptions}"
    )


@pytest.mark.kata_gate("preemption ignores the checkpoint cost (preempts jobs about to end)")
def test_preemption_estimates_not_durations(scheduler: Any, simulate: Any, toy: Any) -> None:
    # Job 1 would really end 5 s after job 2 arrives, but asked for 1000 s: it is preempted.
    rows = [
        [0, 0.0, 2, 4, 1000, 1000, 0],
        [1, 0.0, 2, 4, 500, 1000, 0],
        [2, 495.0, 1, 4, 100, 100, 1],
    ]
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", preemption=True), rows, toy, 10.0)
    assert rep.preemptions == {1: 1}, (
        f"GangScheduler(best_fit, preemption=True) preempts {rep.preemptions}: job 1 asked for 1000 s, so it is expected to run 505 s more (> the checkpoint)"
    )


@pytest.mark.kata_gate(
    "a job is preempted though the placement of the job it makes room for uses none of its GPUs"
)
def test_preemption_spares_unused_victims(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [
        [0, 0.0, 1, 2, 5000, 5000, 2],  # node 0, GPUs 0-1 (not a victim: same priority)
        [1, 10.0, 1, 4, 5000, 5000, 0],  # node 1
        [2, 20.0, 1, 2, 5000, 5000, 0],  # node 0, GPUs 2-3: the first victim tried
        [3, 25.0, 2, 4, 5000, 5000, 2],  # nodes 2 and 3
        [4, 30.0, 1, 4, 100, 100, 2],  # job 2's GPUs are not enough; with job 1's it fits on node 1
    ]
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", preemption=True), rows, toy, 10.0)
    assert rep.preemptions == {1: 1}, "job 2 was tried but its GPUs are not used: spare it"


def test_preemption_none_without_lower_priorities(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [[0, 0.0, 4, 4, 100, 100, 1], [1, 1.0, 1, 1, 10, 10, 1]]  # job 0 spans racks: 200 s
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", preemption=True), rows, toy, 10.0)
    assert rep.preemptions == {} and starts(rep)[1] == 200.0, (
        f"GangScheduler(best_fit, preemption=True) with equal priorities: preemptions {rep.preemptions} (none), job 1 starts at {starts(rep)[1]} (200)"
    )


@pytest.mark.parametrize("seed", [43, 45])
def test_preemption_other_traces(
    scheduler: Any, workload: Any, gen: Any, checker: Any, kata_budget: Any, seed: int
) -> None:
    trace = gen.generate("priority", seed, size=0.5)
    make = lambda m: m.GangScheduler("best_fit", backfill=True, preemption=True)  # noqa: E731
    rep = run_trace(workload, checker, trace, make(scheduler))
    want = run_reference(kata_budget, checker, trace, make)
    assert want.preemptions, f"test data: the reference preempts nothing on priority seed {seed}"
    assert starts(rep) == starts(want), (
        f"GangScheduler(best_fit, backfill, preemption) on priority seed {seed}: start times"
        " differ from the rules'"
    )
    assert rep.preemptions == want.preemptions, (
        f"GangScheduler(best_fit, backfill, preemption) on priority seed {seed}: preemptions"
        f" {rep.preemptions}, the rules' {want.preemptions}"
    )


# --------------------------------------------------------------------------- metrics
@st.composite
def runs(
    draw: Any,
) -> tuple[list[tuple[float, tuple[int, ...], tuple[int, ...], int, int]], float, list]:
    n = draw(st.integers(1, 12))
    t, points = 0.0, []
    for _ in range(n):
        free = tuple(draw(st.lists(st.integers(0, 4), min_size=4, max_size=4)))
        queue = tuple(draw(st.lists(st.integers(1, 4), max_size=6)))
        held = draw(st.integers(0, 16 - sum(free)))  # GPUs of partial gangs: idle
        points.append((t, free, queue, 16 - sum(free) - held, held))
        t += draw(st.floats(0.0, 100.0))
    end = t
    jobs = []
    for i in range(draw(st.integers(1, 8))):
        submit = draw(st.floats(0, 50))
        start = submit + draw(st.floats(0, 50))
        jobs.append((i, submit, start, start + draw(st.floats(0.1, 50))))
    return points, end, jobs


@pytest.mark.kata_gate(
    "the timeline, utilisation or summary disagree with their definitions on random runs (GPUs"
    " held by partial gangs, empty queues, runs that span no time)"
)
@hidden_settings(max_examples=60)
@given(data=runs())
def test_metrics_any_run(metrics: Any, engine: Any, toy: Any, data: Any) -> None:
    points, end, jobs = data
    pts = [engine.Point(t, f, q, r, h) for t, f, q, r, h in points]
    js = [engine.JobResult(i, s, 1, 1, 0, a, f, i % 2) for i, s, a, f in jobs]
    result = engine.Result(toy, 0.0, js, [], pts, end, 0)

    def frag(free: Sequence[int], queue: Sequence[int]) -> float:
        if not queue:
            return 0.0
        return float(np.mean([sum(f for f in free if f < g) for g in queue]))

    approx = lambda x: pytest.approx(x, rel=1e-7, abs=1e-9)  # noqa: E731
    tl = metrics.fragmentation_timeline(result)
    assert [t for t, _ in tl] == [p[0] for p in points], (
        "fragmentation_timeline(result): one (time, value) per point, at the points' times"
    )
    assert [v for _, v in tl] == approx([frag(p[1], p[2]) for p in points]), (
        "fragmentation_timeline(result): the values must be fragmentation(point.free, point.queue)"
    )
    times = np.array([p[0] for p in points] + [end])
    span = times[-1] - times[0]
    w = np.diff(times)
    util = 0.0 if span <= 0 else float((np.array([p[3] for p in points]) * w).sum() / span / 16)
    assert metrics.utilisation(result) == approx(util), (
        f"utilisation(result) = {metrics.utilisation(result)}: the time-weighted running GPUs (held ones idle) over 16 is {util}"
    )
    s = metrics.summarize(result)
    jct = [f - s_ for _, s_, _, f in jobs]
    wait = [a - s_ for _, s_, a, _ in jobs]
    want = {
        "jobs": len(jobs), "makespan": end - min(s_ for _, s_, _, _ in jobs),
        "mean_jct": np.mean(jct), "p99_jct": np.percentile(jct, 99),
        "mean_queueing_delay": np.mean(wait), "p99_queueing_delay": np.percentile(wait, 99),
        "utilisation": util, "preemptions": sum(i % 2 for i, *_ in jobs),
        "mean_fragmentation": 0.0 if span <= 0 else float(
            (np.array([frag(p[1], p[2]) for p in points]) * w).sum() / span / 16
        ),
    }  # fmt: skip
    for name, value in want.items():
        assert getattr(s, name) == approx(value), f"summary.{name}"


@pytest.mark.kata_gate(
    "fragmentation() disagrees with its definition on random free GPUs per node and queues"
)
@hidden_settings(max_examples=60)
@given(
    free=st.lists(st.integers(0, 8), max_size=10), queue=st.lists(st.integers(1, 8), max_size=10)
)
def test_metrics_fragmentation_any(metrics: Any, free: list[int], queue: list[int]) -> None:
    want = float(np.mean([sum(f for f in free if f < g) for g in queue])) if queue else 0.0
    assert metrics.fragmentation(free, queue) == pytest.approx(want, rel=1e-9, abs=1e-12), (
        f"fragmentation({free}, {queue}) must be {want}"
    )


@pytest.mark.kata_gate(
    "job_metrics() disagrees with finish - submit and first start - submit on a checked run"
)
def test_metrics_jobs_of_a_real_run(
    metrics: Any, scheduler: Any, workload: Any, gen: Any, checker: Any
) -> None:
    trace = gen.generate("priority", 46, size=0.3)
    jobs, durations = workload.jobs_of(trace)
    result = workload.engine_for(trace).run(
        scheduler.GangScheduler("best_fit", backfill=True, preemption=True), jobs, durations
    )
    rep = checker.check(result, trace["jobs"])
    m = {x.id: x for x in metrics.job_metrics(result)}
    for j in rep.finish:
        assert m[j].jct == pytest.approx(rep.finish[j] - rep.submit[j]), (
            f"job_metrics: job {j}'s jct {m[j].jct} must be finish - submit = {rep.finish[j] - rep.submit[j]}"
        )
        assert m[j].queueing_delay == pytest.approx(rep.first_start[j] - rep.submit[j]), (
            f"job_metrics: job {j}'s queueing_delay {m[j].queueing_delay} must be first start - submit = {rep.first_start[j] - rep.submit[j]}"
        )


@pytest.mark.kata_gate(
    "backfill start times differ from the rules on the shipped dgx jobs with other true"
    " durations and the same estimates"
)
def test_backfill_shipped_jobs_with_other_durations(
    scheduler: Any, workload: Any, checker: Any, kata_budget: Any
) -> None:
    # The shipped dgx jobs with the same estimates but other true durations: a scheduler that
    # knows only estimates decides exactly as the reference does.
    trace = workload.load("dgx")
    for row in trace["jobs"]:
        row[4] = round(row[5] * (0.2 + 0.8 * ((row[0] * 7919) % 101) / 100), 3)
    make = lambda m: m.GangScheduler("best_fit", backfill=True)  # noqa: E731
    rep = run_trace(workload, checker, trace, make(scheduler))
    assert starts(rep) == starts(run_reference(kata_budget, checker, trace, make)), (
        "GangScheduler(best_fit, backfill=True) on the dgx jobs with other true durations: start times differ from the rules' (decided on estimates)"
    )


# --------------------------------------------------------------------------- fresh random traces
def random_rows(rng: random.Random, priorities: int) -> list[list[Any]]:
    """A small trace for the toy cluster (16 GPUs: 2 racks x 2 nodes x 4): 6 to 14 jobs of
    1 or 2 pods of 1, 2 or 4 GPUs (pods smaller than a node included), estimates 1 to 3 x the
    duration, arrivals close enough together that jobs queue."""
    rows, t = [], 0.0
    for i in range(rng.randint(6, 14)):
        t += rng.choice([0.0, 1.0, rng.uniform(0, 60)])
        pods = rng.choice([1, 1, 2])
        g = rng.choice([1, 2, 4, 4])
        duration = float(rng.randint(10, 400))
        estimate = float(math.ceil(duration * rng.uniform(1, 3)))
        rows.append([i, round(t, 3), pods, g, duration, estimate, rng.randrange(priorities)])
    return rows


def fresh_traces_like_the_reference(
    scheduler: Any,
    engine: Any,
    checker: Any,
    kata_budget: Any,
    toy: Any,
    flags: dict[str, bool],
    priorities: int,
    exercised: Any,
    what: str,
) -> None:
    """Random toy traces drawn at this run (hypothesis picks the seeds), each run by the
    submission and the reference (out of the learner's reach) and replayed by checker.py: the
    same start times and preemptions. `exercised(result, rows)` says whether the reference's run
    shows the task's point; most runs must."""
    ref_engine = kata_budget.reference.module("engine")
    ref_sched = kata_budget.reference.module("scheduler")
    shown = []

    @given(st.integers(0, 2**63 - 1))
    @hidden_settings(max_examples=40)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        rows = random_rows(rng, priorities)
        ckpt = rng.choice([0.0, 10.0, 30.0])
        jobs, durations = engine.jobs_of(rows)
        got = engine.Engine(toy, ckpt).run(scheduler.GangScheduler("best_fit", **flags), jobs,
                                           durations)  # fmt: skip
        rep = checker.check(got, rows)
        rjobs, rdur = ref_engine.jobs_of(rows)
        want = ref_engine.Engine(toy, ckpt).run(ref_sched.GangScheduler("best_fit", **flags),
                                                rjobs, rdur)  # fmt: skip
        wrep = checker.check(want, rows)
        shown.append(exercised(want, rows))
        assert starts(rep) == starts(wrep) and rep.preemptions == wrep.preemptions, (
            f"GangScheduler('best_fit', {flags}) on the 16-GPU toy cluster, checkpoint {ckpt} s,"
            f" rows {rows}: starts {starts(rep)}, preemptions {rep.preemptions}; the rules give"
            f" {starts(wrep)}, {wrep.preemptions}"
        )

    run()
    assert sum(shown) >= len(shown) // 4, (
        f"test data: the reference shows {what} in only {sum(shown)} of {len(shown)} random traces"
    )


def _starts_out_of_order(result: Any, rows: Any) -> bool:
    """Some job started before a job ahead of it in queue order that was already waiting."""
    first: dict[int, float] = {}
    for e in result.log:
        if e.kind == "start":
            first.setdefault(e.job, e.time)
    order = sorted(rows, key=lambda r: (-r[6], r[1], r[0]))
    return any(
        first[b[0]] < first[a[0]] and a[1] <= first[b[0]]
        for i, a in enumerate(order)
        for b in order[i + 1 :]
    )


def _small_multi_pod(result: Any, rows: Any) -> bool:
    return any(r[2] > 1 and r[3] < result.topology.gpus_per_node for r in rows) and any(
        p.queue for p in result.points
    )


@pytest.mark.kata_gate(
    "gang scheduling: start times differ from the rules on random 16-GPU traces drawn at this"
    " run (multi-pod jobs of pods smaller than a node among them)"
)
def test_gang_fresh_random_traces(
    scheduler: Any, engine: Any, checker: Any, kata_budget: Any, toy: Any
) -> None:
    fresh_traces_like_the_reference(
        scheduler, engine, checker, kata_budget, toy, {}, 1, _small_multi_pod,
        "a queued multi-pod job of pods smaller than a node",
    )  # fmt: skip


@pytest.mark.kata_gate(
    "EASY backfill: start times differ from the rules on random 16-GPU traces drawn at this run"
)
def test_backfill_fresh_random_traces(
    scheduler: Any, engine: Any, checker: Any, kata_budget: Any, toy: Any
) -> None:
    fresh_traces_like_the_reference(
        scheduler, engine, checker, kata_budget, toy, {"backfill": True}, 1, _starts_out_of_order,
        "a job started ahead of a waiting job before it in the queue (a backfill)",
    )  # fmt: skip


@pytest.mark.kata_gate(
    "preemption: start times or preemptions differ from the rules on random 16-GPU traces with"
    " three priorities drawn at this run"
)
@pytest.mark.parametrize("backfill", [False, True])
def test_preemption_fresh_random_traces(
    backfill: bool, scheduler: Any, engine: Any, checker: Any, kata_budget: Any, toy: Any
) -> None:
    fresh_traces_like_the_reference(
        scheduler, engine, checker, kata_budget, toy,
        {"backfill": backfill, "preemption": True}, 3,
        lambda result, rows: any(j.preemptions for j in result.jobs), "a preemption",
    )  # fmt: skip


@pytest.mark.kata_gate(
    "a job preempted to make room does not start again in the same instant, though GPUs"
    " elsewhere fit it"
)
def test_preemption_victim_restarts_in_the_same_instant(
    scheduler: Any, simulate: Any, toy: Any
) -> None:
    rows = [
        [0, 0.0, 1, 2, 5000, 5000, 0],  # node 0, GPUs 0-1
        [1, 1.0, 1, 2, 5000, 5000, 0],  # node 0, GPUs 2-3
        [2, 2.0, 1, 2, 5000, 5000, 1],  # node 1, GPUs 4-5 (6-7 stay free)
        [3, 3.0, 1, 4, 5000, 5000, 1],  # node 2
        [4, 4.0, 1, 4, 5000, 5000, 1],  # node 3
        [5, 10.0, 1, 4, 100, 100, 1],  # needs a whole node: jobs 1 then 0 are preempted
    ]
    result, rep = simulate(
        lambda: scheduler.GangScheduler("best_fit", preemption=True), rows, toy, 10.0
    )
    assert rep.preemptions == {0: 1, 1: 1}, f"preemptions {rep.preemptions}, expected jobs 0, 1"
    again = [e.time for e in result.log if e.job == 0 and e.kind == "start"]
    assert again[:2] == [0.0, 10.0], (
        f"job 0, preempted at t=10 while GPUs 6-7 are free, starts at {again}: it rejoins the"
        " queue at once and fits there in the same plan"
    )


# --------------------------------------------------------------------------- one plan, random states
def random_view(eng: Any, topo: Any, rng: random.Random, victims: bool = False) -> Any:
    """A random instant on `topo`: running jobs of three priorities whose expected ends are
    drawn from a few values (so several end together), long-running ones among them, and a
    queue of 2 to 6 jobs. victims=True: the running jobs are mostly small, low-priority and
    long-running (worth preempting), and the queue starts with a high-priority whole-node job."""
    now, per = 1000.0, topo.gpus_per_node
    free = [set(range(n * per, (n + 1) * per)) for n in range(topo.nodes)]
    ends = [now + d for d in rng.sample([20.0, 60.0, 120.0, 300.0, 900.0], 3)]
    running, jid = [], 0
    for _ in range(rng.randint(2, 8)):
        g = rng.choice([1, 1, 2]) if victims else rng.choice([1, 2, 2, 4])
        pods = 1 if victims else rng.choice([1, 1, 2])
        nodes = [n for n in range(topo.nodes) if len(free[n]) >= g]
        if len(nodes) < pods:
            continue
        placed = []
        for n in rng.sample(nodes, pods):
            pod = tuple(sorted(free[n])[:g])
            free[n] -= set(pod)
            placed.append(pod)
        prio = rng.choice([0, 0, 0, 1]) if victims else rng.randrange(3)
        start = now - rng.choice([400.0, 800.0] if victims and not prio else [5.0, 100.0, 400.0])
        slow = topo.slowdown(placed)
        end = rng.choice(ends)
        job = eng.Job(jid, start - 1.0, pods, g, (end - start) / slow, prio)
        running.append(eng.Running(job, tuple(placed), start, end, slow))
        jid += 1
    running.sort(key=lambda r: (r.start, r.job.id))
    queue = []
    if victims:  # a whole node that preempts, then a gang that waits for a reservation
        queue = [
            eng.Job(jid, now - 20.0, 1, per, 100.0, 2),
            eng.Job(jid + 1, now - 20.0, 2, per, 50.0, 1),
        ]
    jid += 2
    for k in range(rng.randint(2, 6)):
        g = rng.choice([1, 2, 4, 4])
        est = rng.choice([10.0, 50.0, 100.0, 250.0, 1000.0])
        queue.append(
            eng.Job(jid + k, now - 10.0 + k, rng.choice([1, 1, 2]), g, est, rng.randrange(3))
        )
    queue.sort(key=lambda j: j.order)
    return eng.View(
        now,
        topo,
        rng.choice([0.0, 10.0, 30.0]),
        tuple(frozenset(f) for f in free),
        tuple(queue),
        tuple(running),
        {},
    )


def _plan(plan: Any) -> tuple[list[int], dict[int, list[list[int]]]]:
    return sorted(plan.preempts), {j: sorted(sorted(p) for p in pods) for j, pods in plan.binds}


def one_plan_like_the_reference(
    scheduler: Any,
    engine: Any,
    toy: Any,
    kata_budget: Any,
    preemption: bool,
    exercised: Any,
    what: str,
) -> None:
    """schedule() once on random states (hypothesis picks the seeds) by the submission and by
    the reference (out of the learner's reach): the same preemptions and binds. `exercised(view,
    plan)` says whether the reference's plan shows the task's point; enough plans must."""
    ref_engine = kata_budget.reference.module("engine")
    ref = kata_budget.reference.module("scheduler").GangScheduler(
        "best_fit", backfill=True, preemption=preemption
    )
    mine = scheduler.GangScheduler("best_fit", backfill=True, preemption=preemption)
    shown = []

    @given(st.integers(0, 2**63 - 1))
    @hidden_settings(max_examples=120)
    def run(seed: int) -> None:
        view = random_view(engine, toy, random.Random(seed), victims=preemption)
        ref_view = random_view(ref_engine, toy, random.Random(seed), victims=preemption)
        ref_plan = ref.schedule(ref_view)
        shown.append(exercised(ref_view, ref_plan))
        want = _plan(ref_plan)
        got = _plan(mine.schedule(view))
        running = [(r.job.id, r.job.priority, r.pods, r.expected_end) for r in view.running]
        queue = [(j.id, j.priority, f"{j.pods}x{j.gpus_per_pod}", j.estimate) for j in view.queue]
        assert got == want, (
            f"GangScheduler('best_fit', backfill=True, preemption={preemption}).schedule on a"
            f" 16-GPU state at t={view.now} (checkpoint {view.checkpoint_s} s; running (id,"
            f" priority, pods, expected end): {running}; queue (id, priority, pods x GPUs,"
            f" estimate): {queue}): (preempted, binds) {got}; the rules give {want}"
        )

    run()
    assert sum(shown) >= len(shown) // 5, (
        f"test data: the reference shows {what} in only {sum(shown)} of {len(shown)} random states"
    )


def _backfilled_past_a_tie(view: Any, plan: Any) -> bool:
    """The plan starts a job behind one it leaves waiting, while two running jobs end together."""
    bound = {j for j, _ in plan.binds}
    head = next((k for k, j in enumerate(view.queue) if j.id not in bound), None)
    ends = [r.expected_end for r in view.running]
    return (
        head is not None
        and any(j.id in bound for j in view.queue[head + 1 :])
        and len(set(ends)) < len(ends)
    )


def _victim_starts_again(view: Any, plan: Any) -> bool:
    """A job preempted by the plan is bound again in it."""
    return bool(set(plan.preempts) & {j for j, _ in plan.binds})


@pytest.mark.kata_gate(
    "EASY backfill: one plan differs from the rules on random cluster states where running jobs"
    " end together"
)
def test_backfill_one_plan_random_states(
    scheduler: Any, engine: Any, toy: Any, kata_budget: Any
) -> None:
    one_plan_like_the_reference(
        scheduler, engine, toy, kata_budget, False, _backfilled_past_a_tie,
        "a backfill past a waiting head while running jobs end together",
    )  # fmt: skip


@pytest.mark.kata_gate(
    "preemption with backfill: one plan differs from the rules on random cluster states where"
    " long-running lower-priority jobs are worth preempting (their restart in the same plan)"
)
def test_preemption_one_plan_random_states(
    scheduler: Any, engine: Any, toy: Any, kata_budget: Any
) -> None:
    one_plan_like_the_reference(
        scheduler, engine, toy, kata_budget, True, _victim_starts_again,
        "a victim bound again in the plan that preempts it",
    )  # fmt: skip


def fixed_view(eng: Any, topo: Any, ckpt: float, running: list[Any], queue: list[Any]) -> Any:
    """A View at t=1000 from running rows (id, priority, pods, start, expected end) and queue
    rows (id, priority, pods, GPUs per pod, estimate); free GPUs are the others."""
    now, held = 1000.0, set()
    runs = []
    for jid, prio, pods, start, end in running:
        slow = topo.slowdown(pods)
        held |= {g for p in pods for g in p}
        job = eng.Job(jid, start - 1.0, len(pods), len(pods[0]), (end - start) / slow, prio)
        runs.append(eng.Running(job, pods, start, end, slow))
    per = topo.gpus_per_node
    free = tuple(
        frozenset(g for g in range(n * per, (n + 1) * per) if g not in held)
        for n in range(topo.nodes)
    )
    jobs = sorted(
        (eng.Job(j, now - 100.0 + j, p, g, est, prio) for j, prio, p, g, est in queue),
        key=lambda j: j.order,
    )
    runs.sort(key=lambda r: (r.start, r.job.id))
    return eng.View(now, topo, ckpt, free, tuple(jobs), tuple(runs), {})


@pytest.mark.kata_gate(
    "EASY backfill: the shadow time does not release running jobs that end together lower job"
    " id first (a fixed state where the order changes the reserved GPUs)"
)
def test_backfill_shadow_releases_equal_ends_by_lower_id(
    scheduler: Any, engine: Any, toy: Any
) -> None:
    # Jobs 0, 1 and 3 all end at t=1020: released 0, 1, 3 the head (job 8, 2 x 4 GPUs) fits
    # after job 0 on nodes 1 and 2, so job 9 may take GPUs 3 and 15; released 3, 1, 0 the
    # reservation is another one.
    view = fixed_view(
        engine, toy, 0.0,
        [(3, 0, ((1, 2),), 600.0, 1020.0), (0, 2, ((8, 9, 10, 11), (4, 5, 6, 7)), 900.0, 1020.0),
         (1, 0, ((0,),), 995.0, 1020.0), (2, 0, ((12,),), 995.0, 1060.0)],
        [(7, 1, 1, 2, 100.0), (8, 1, 2, 4, 1000.0), (9, 1, 2, 1, 50.0), (6, 0, 2, 2, 50.0)],
    )  # fmt: skip
    got = _plan(scheduler.GangScheduler("best_fit", backfill=True).schedule(view))
    want = ([], {7: [[13, 14]], 9: [[3], [15]]})
    assert got == want, (
        "GangScheduler('best_fit', backfill=True).schedule with jobs 0, 1, 3 ending together at"
        f" t=1020 and a 2 x 4 head waiting: (preempted, binds) {got}; the rules give {want}"
    )


@pytest.mark.kata_gate(
    "preemption: a victim restarted in the same plan is not judged on its remaining estimate"
    " plus the checkpoint (a fixed state where a backfill depends on it)"
)
def test_preemption_victim_restarts_on_its_remaining_estimate(
    scheduler: Any, engine: Any, toy: Any
) -> None:
    # Job 7 (priority 2, a whole node) preempts jobs 2 and 3 (priority 0, 100 and 400 s in);
    # job 8 (2 x 4) waits with a reservation; the victims' remaining estimates plus the 10 s
    # checkpoint let them backfill at once (3 on GPU 7, 2 on GPUs 14-15).
    view = fixed_view(
        engine, toy, 10.0,
        [(4, 0, ((4, 5),), 200.0, 1060.0), (0, 0, ((8, 9),), 600.0, 1300.0),
         (3, 0, ((2,),), 600.0, 1020.0), (6, 1, ((12, 13),), 600.0, 1300.0),
         (1, 0, ((10, 11),), 900.0, 1060.0), (2, 0, ((0, 1),), 900.0, 1060.0),
         (5, 1, ((6,),), 900.0, 1060.0)],
        [(7, 2, 1, 4, 100.0), (8, 1, 2, 4, 250.0), (9, 0, 1, 2, 250.0), (10, 0, 1, 1, 100.0)],
    )  # fmt: skip
    got = _plan(scheduler.GangScheduler("best_fit", backfill=True, preemption=True).schedule(view))
    want = ([2, 3], {7: [[0, 1, 2, 3]], 3: [[7]], 2: [[14, 15]]})
    assert got == want, (
        "GangScheduler('best_fit', backfill=True, preemption=True).schedule where job 7 preempts"
        f" jobs 2 and 3 and job 8 waits: (preempted, binds) {got}; the rules give {want}"
    )
