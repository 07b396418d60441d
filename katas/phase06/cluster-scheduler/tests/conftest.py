"""Fixtures of the cluster-scheduler tests: your modules and the given ones, loaded once per
module; a fresh copy of checker.py (so that nothing done to the shared one at run time changes
what the tests check); and `simulate`, which runs a scheduler and replays every event through
the checker."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from harness.testing import fresh_module


@pytest.fixture(scope="module")
def placement(kata: Any) -> Any:
    """placement.py (yours): task "placement"."""
    return kata.module("placement")


@pytest.fixture(scope="module")
def scheduler(kata: Any) -> Any:
    """scheduler.py (yours): tasks "gang", "backfill", "preemption"."""
    return kata.module("scheduler")


@pytest.fixture(scope="module")
def metrics(kata: Any) -> Any:
    """metrics.py (yours): task "metrics"."""
    return kata.module("metrics")


@pytest.fixture(scope="module")
def cluster(kata: Any) -> Any:
    """cluster.py (given): topologies."""
    return kata.module("cluster")


@pytest.fixture(scope="module")
def engine(kata: Any) -> Any:
    """engine.py (given): the simulated cluster."""
    return kata.module("engine")


@pytest.fixture(scope="module")
def workload(kata: Any) -> Any:
    """workload.py (given): the shipped traces."""
    return kata.module("workload")


@pytest.fixture(scope="module")
def checker(kata: Any) -> Any:
    """checker.py (given), loaded again for the tests alone."""
    return fresh_module(kata.module("checker"))


@pytest.fixture(scope="module")
def toy(cluster: Any) -> Any:
    """16 GPUs: 2 racks x 2 nodes x 4 GPUs in NVLink pairs; GPUs 0-3 are node 0 (islands
    {0, 1} and {2, 3}), node 1 is 4-7 (rack 0), nodes 2 and 3 are rack 1."""
    return cluster.Topology("toy", 2, 2, 4, 2, island_penalty=1.5, rack_penalty=2.0)


@pytest.fixture(scope="module")
def simulate(engine: Any, checker: Any) -> Callable[..., Any]:
    """simulate(make, rows, topology, checkpoint_s) -> (result, replay): run the scheduler
    `make()` on trace rows [id, submit, pods, gpus_per_pod, duration, estimate, priority]
    and check every instant of its log."""

    def simulate(
        make: Callable[[], Any],
        rows: Sequence[Sequence[Any]],
        topology: Any,
        checkpoint_s: float = 0.0,
    ) -> tuple[Any, Any]:
        jobs, durations = engine.jobs_of(rows)
        result = engine.Engine(topology, checkpoint_s).run(make(), jobs, durations)
        return result, checker.check(result, rows)

    return simulate


@pytest.fixture(scope="module")
def measure() -> Callable[..., float]:
    """measure(replay, quantity): what the trace tests grade, computed here from the checked
    replay (never with your metrics.py): "mean_jct", "mean_wait" (queueing delay), "p99_wait",
    "makespan", "mean_wait_p1" (priority-1 jobs), "mean_jct_p0" (priority-0 jobs)."""

    def measure(rep: Any, quantity: str) -> float:
        ids = sorted(rep.finish)
        if quantity.endswith(("_p0", "_p1")):
            quantity, p = quantity[:-3], int(quantity[-1])
            ids = [j for j in ids if rep.priority[j] == p]
        jct = np.array([rep.finish[j] - rep.submit[j] for j in ids])
        wait = np.array([rep.first_start[j] - rep.submit[j] for j in ids])
        if quantity == "mean_jct":
            return float(jct.mean())
        if quantity == "mean_wait":
            return float(wait.mean())
        if quantity == "p99_wait":
            return float(np.percentile(wait, 99))
        if quantity == "makespan":
            return max(rep.finish.values()) - min(rep.submit.values())
        raise ValueError(f"unknown quantity {quantity!r}")

    return measure


@pytest.fixture(scope="module")
def fifo(engine: Any) -> Callable[[Callable[..., Any]], Any]:
    """fifo(place): a plain FIFO gang scheduler of the tests' own around the placement
    function `place`, so that the placement and metrics tests need no scheduler of yours."""

    class Fifo:
        def __init__(self, place: Callable[..., Any]) -> None:
            self.place = place

        def schedule(self, view: Any) -> Any:
            plan, free = engine.Plan(), [set(f) for f in view.free]
            for job in view.queue:
                pods = self.place(view.topology, free, job.pods, job.gpus_per_pod)
                if pods is None:
                    break
                plan.bind(job.id, pods)
                for pod in pods:
                    free[view.topology.node_of(pod[0])].difference_update(pod)
            return plan

    return Fifo


def _lowest_first(topology: Any, free: Sequence[Any], pods: int, g: int) -> list[list[int]] | None:
    left = [sorted(f) for f in free]
    out = []
    for _ in range(pods):
        n = next((n for n, f in enumerate(left) if len(f) >= g), None)
        if n is None:
            return None
        out.append(left[n][:g])
        left[n] = left[n][g:]
    return out


@pytest.fixture(scope="module")
def lowest_first() -> Callable[..., Any]:
    """The tests' own first fit (for runs that must not depend on your placement.py)."""
    return _lowest_first


@pytest.fixture(scope="module")
def trace_budget(workload: Any, checker: Any, measure: Any) -> Callable[..., Any]:
    """trace_budget(kata_budget, kind, make, quantities, tag): run the scheduler `make(None)`
    (yours) and `make(reference)` (a kata context of the reference) on traces/<kind>.json,
    check both, and hold each quantity (lower is better) within 1.05 x the
    reference's (or kata.toml's recorded value when this checkout has no reference)."""

    def run(
        kata_budget: Any, kind: str, make: Callable[[Any], Any], quantities: list[str], tag: str
    ) -> Any:
        trace = workload.load(kind)
        jobs, durations = workload.jobs_of(trace)
        mine = checker.check(
            workload.engine_for(trace).run(make(None), jobs, durations), trace["jobs"]
        )
        ref = None
        if kata_budget.reference_available:
            r = kata_budget.reference
            r_wl = r.module("workload")
            r_jobs, r_durations = r_wl.jobs_of(trace)
            r_res = r_wl.engine_for(trace).run(make(r), r_jobs, r_durations)
            ref = checker.check(r_res, trace["jobs"])
        for q in quantities:
            kata_budget.metrics[f"{q} ({kind}{tag}), hours"] = round(measure(mine, q) / 3600, 4)
            kata_budget.compare(
                lambda q=q: measure(mine, q),
                None if ref is None else (lambda q=q: measure(ref, q)),
                name=f"{q}-{kind}{tag}",
                metric="simulated seconds",
                ratio=1.05,
                rounds=1,
            )
        return mine

    return run
