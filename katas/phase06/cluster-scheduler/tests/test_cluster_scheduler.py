"""Public tests of cluster-scheduler, tasks "placement" (placement.py) and "metrics"
(metrics.py). The toy cluster (conftest.py): 2 racks x 2 nodes x 4 GPUs in NVLink pairs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

FREE = lambda: [{1, 2, 3}, {4, 5, 6, 7}, {9}, {12, 13, 14, 15}]  # noqa: E731


def well_formed(topology: Any, free: list[set[int]], pods: list[list[int]], n: int, g: int) -> None:
    assert len(pods) == n and all(len(p) == g and p == sorted(p) for p in pods)
    flat = [x for p in pods for x in p]
    assert len(set(flat)) == len(flat), "a GPU given to two pods"
    assert all(len({topology.node_of(x) for x in p}) == 1 for p in pods), "a pod across nodes"
    assert all(x in free[topology.node_of(x)] for x in flat), "a GPU that is not free"


# --------------------------------------------------------------------------- placement
def test_placement_first_fit(placement: Any, toy: Any) -> None:
    free = FREE()
    assert placement.first_fit(toy, free, 1, 2) == [[1, 2]]
    assert placement.first_fit(toy, free, 1, 4) == [[4, 5, 6, 7]]
    assert placement.first_fit(toy, free, 2, 2) == [[1, 2], [4, 5]], "each pod sees the last"
    assert placement.first_fit(toy, free, 3, 4) is None
    assert free == FREE(), "free must not be modified"


def test_placement_best_fit(placement: Any, toy: Any) -> None:
    free = FREE()
    assert placement.best_fit(toy, free, 1, 1) == [[9]], "the node with the fewest free GPUs"
    assert placement.best_fit(toy, free, 1, 2) == [[1, 2]]
    assert placement.best_fit(toy, free, 3, 1) == [[9], [1], [2]]
    assert placement.best_fit(toy, free, 2, 4) == [[4, 5, 6, 7], [12, 13, 14, 15]]
    assert placement.best_fit(toy, free, 3, 4) is None
    assert free == FREE()


def test_placement_whole_or_nothing(placement: Any, toy: Any) -> None:
    for name in ("first_fit", "best_fit", "topology_aware"):
        place = getattr(placement, name)
        free = FREE()
        assert place(toy, free, 3, 4) is None, f"{name}: 3 pods of 4 do not fit"
        assert place(toy, free, 13, 1) is None, f"{name}: 13 GPUs do not fit in 12"
        for n, g in [(5, 1), (4, 2), (2, 4), (12, 1)]:
            well_formed(toy, free, place(toy, free, n, g), n, g)
        assert free == FREE()
    assert set(placement.PLACEMENTS) == {"first_fit", "best_fit", "topology_aware"}


def test_placement_topology_aware_keeps_a_pod_in_one_island(placement: Any, toy: Any) -> None:
    free = [{1, 2, 3}, {4, 5, 6, 7}, set(), set()]
    assert placement.first_fit(toy, free, 1, 2) == [[1, 2]]  # GPUs 1 and 2: two islands
    assert toy.slowdown([[1, 2]]) == 1.5 and toy.slowdown([[2, 3]]) == 1.0
    assert placement.topology_aware(toy, free, 1, 2) == [[2, 3]]
    assert placement.topology_aware(toy, free, 1, 1) == [[1]], "the island with the fewest free"
    # Three GPUs fit no island of two: the pod spans the fewest islands it can (two).
    assert placement.topology_aware(toy, [{0, 1, 2, 3}, set(), {9, 10, 11}, set()], 1, 3) == [
        [9, 10, 11]
    ]


def test_placement_topology_aware_keeps_a_job_in_one_rack(placement: Any, toy: Any) -> None:
    free = [{0, 1, 2, 3}, set(), {8, 9, 10, 11}, {12, 13, 14, 15}]
    assert placement.first_fit(toy, free, 2, 4) == [[0, 1, 2, 3], [8, 9, 10, 11]]  # two racks
    assert placement.best_fit(toy, free, 2, 4) == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert placement.topology_aware(toy, free, 2, 4) == [[8, 9, 10, 11], [12, 13, 14, 15]]
    # One pod: the rack with the fewest free GPUs that can host it (rack 0: 4 free).
    assert placement.topology_aware(toy, free, 1, 2) == [[0, 1]]


def test_placement_topology_pays_off(
    placement: Any, fifo: Any, workload: Any, checker: Any, measure: Any, kata_budget: Any
) -> None:
    """traces/quads.json (nodes of two 4-GPU islands) under the tests' FIFO gang scheduler:
    topology-aware placement finishes jobs sooner than first fit, and its mean JCT stays
    within 1.05 x the reference's."""
    trace = workload.load("quads")
    jobs, durations = workload.jobs_of(trace)
    run = lambda place: checker.check(  # noqa: E731
        workload.engine_for(trace).run(fifo(place), jobs, durations), trace["jobs"]
    )
    ff, topo = run(placement.first_fit), run(placement.topology_aware)
    assert measure(topo, "mean_jct") < 0.95 * measure(ff, "mean_jct")
    ref = kata_budget.reference.module("placement") if kata_budget.reference_available else None
    kata_budget.metrics["mean JCT, first fit (hours)"] = round(measure(ff, "mean_jct") / 3600, 3)
    kata_budget.metrics["mean JCT, topology-aware (hours)"] = round(
        measure(topo, "mean_jct") / 3600, 3
    )
    kata_budget.compare(
        lambda: measure(topo, "mean_jct"),
        None if ref is None else (lambda: measure(run(ref.topology_aware), "mean_jct")),
        name="mean_jct-quads-topology",
        metric="simulated seconds",
        ratio=1.05,
        rounds=1,
    )


# --------------------------------------------------------------------------- metrics
def hand_made(engine: Any, toy: Any) -> Any:
    P, J = engine.Point, engine.JobResult
    points = [
        P(0.0, (0, 4, 4, 4), (), 4, 0),  # empty queue: nothing fragmented
        P(2.0, (0, 1, 4, 4), (4, 2), 7, 0),  # pods of 4: node 1's 1; pods of 2: node 1's 1
        P(5.0, (1, 3, 2, 0), (2, 2, 1), 10, 0),  # pods of 2 (2/3): node 0's 1; pods of 1: none
        P(8.0, (4, 4, 4, 4), (), 0, 0),
    ]
    jobs = [
        J(0, 0.0, 1, 4, 0, 0.0, 8.0, 0),
        J(1, 1.0, 1, 2, 1, 2.0, 10.0, 1),
        J(2, 2.0, 1, 1, 0, 5.0, 6.0, 0),
    ]
    return engine.Result(toy, 0.0, jobs, [], points, 10.0, 7)


def test_metrics_jobs(metrics: Any, engine: Any, toy: Any) -> None:
    m = metrics.job_metrics(hand_made(engine, toy))
    assert [x.id for x in m] == [0, 1, 2]
    assert [x.jct for x in m] == pytest.approx([8.0, 9.0, 4.0])
    assert [x.queueing_delay for x in m] == pytest.approx([0.0, 1.0, 3.0])


def test_metrics_fragmentation(metrics: Any) -> None:
    f = metrics.fragmentation
    assert f([0, 1, 4, 4], [4, 2]) == pytest.approx(1.0)
    assert f([3, 3], [4]) == pytest.approx(6.0), (
        "a node that cannot host the pod: all its free GPUs"
    )
    assert f([3, 3], [2]) == pytest.approx(0.0), "a node that can: none"
    assert f([3, 3], []) == 0.0, "an empty queue fragments nothing"
    # pods of 1 (1/2): nothing; of 2 (1/4): node 2's 1 GPU; of 4 (1/4): 2 + 1 GPUs.
    assert f([2, 5, 1], [1, 1, 2, 4]) == pytest.approx(0.25 * 1 + 0.25 * 3)


def test_metrics_timeline_utilisation_summary(metrics: Any, engine: Any, toy: Any) -> None:
    r = hand_made(engine, toy)
    tl = metrics.fragmentation_timeline(r)
    assert [t for t, _ in tl] == [0.0, 2.0, 5.0, 8.0]
    assert [v for _, v in tl] == pytest.approx([0.0, 1.0, 2 / 3, 0.0])
    # (4 x 2 s + 7 x 3 s + 10 x 3 s + 0 x 2 s) / 10 s / 16 GPUs
    assert metrics.utilisation(r) == pytest.approx(59 / 160)
    s = metrics.summarize(r)
    assert s.jobs == 3 and s.preemptions == 1
    assert s.makespan == pytest.approx(10.0)
    assert s.mean_jct == pytest.approx(7.0) and s.p99_jct == pytest.approx(8.98)
    assert s.mean_queueing_delay == pytest.approx(4 / 3) and s.p99_queueing_delay == pytest.approx(
        2.96
    )
    assert s.utilisation == pytest.approx(59 / 160)
    assert s.mean_fragmentation == pytest.approx((1.0 * 3 + 2 / 3 * 3) / 10 / 16)
    with pytest.raises(ValueError):
        metrics.summarize(engine.Result(toy, 0.0, [], [], [], 0.0, 0))


def test_metrics_agree_with_a_checked_run(
    metrics: Any, fifo: Any, lowest_first: Any, workload: Any, checker: Any, measure: Any
) -> None:
    """traces/dgx.json under the tests' own FIFO first fit: your summary matches what the
    tests measure on the checked log."""
    import numpy as np

    trace = workload.load("dgx")
    jobs, durations = workload.jobs_of(trace)
    result = workload.engine_for(trace).run(fifo(lowest_first), jobs, durations)
    rep = checker.check(result, trace["jobs"])
    s = metrics.summarize(result)
    assert s.mean_jct == pytest.approx(measure(rep, "mean_jct"))
    assert s.mean_queueing_delay == pytest.approx(measure(rep, "mean_wait"))
    assert s.p99_queueing_delay == pytest.approx(measure(rep, "p99_wait"))
    assert s.makespan == pytest.approx(measure(rep, "makespan"))
    t = np.array([p.time for p in result.points] + [result.end])
    busy = np.array([p.running for p in result.points])
    want = float((busy * np.diff(t)).sum() / (t[-1] - t[0]) / result.topology.gpus)
    assert s.utilisation == pytest.approx(want)


def test_metrics_fragmentation_picture(
    kata: Any, scheduler: Any, metrics: Any, workload: Any, kata_metrics: Any
) -> None:
    """The picture in the report: traces/quads.json under your gang scheduler with backfill,
    for the three placements: GPUs running and GPUs fragmented over time."""
    plot = kata.module("plot")
    trace = workload.load("quads")
    jobs, durations = workload.jobs_of(trace)
    gpus = workload.topology_of(trace).gpus
    series = {}
    for name in ("first_fit", "best_fit", "topology_aware"):
        r = workload.engine_for(trace).run(
            scheduler.GangScheduler(name, backfill=True), jobs, durations
        )
        series[name.replace("_", " ")] = (
            [(p.time, p.running / gpus) for p in r.points],
            [(t, v / gpus) for t, v in metrics.fragmentation_timeline(r)],
        )
    svg = plot.timeline_svg(series, title="quads trace, 128 GPUs: gang + EASY backfill")
    ET.fromstring(svg)
    kata_metrics["svg"] = svg
    kata_metrics["label"] = "your scheduler and metrics: GPUs running and fragmented over time"
    assert any(v > 0 for _, v in series["first fit"][1]), "some fragmentation while jobs wait"
