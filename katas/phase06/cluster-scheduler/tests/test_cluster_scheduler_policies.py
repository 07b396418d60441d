"""Public tests of cluster-scheduler, tasks "gang", "backfill", "preemption" and "speed"
(scheduler.py).

Analytic cases run on the toy cluster (conftest.py: 4 nodes of 4 GPUs, racks of 2 nodes) with
best-fit placement; every start time below follows by hand from the rules in scheduler.py.
Job rows are [id, submit, pods, gpus_per_pod, duration, estimate, priority]. Every run goes
through checker.check (simulate, trace_budget): any broken invariant fails the test.
"""

from __future__ import annotations

import random
from typing import Any

import pytest


def starts(rep: Any) -> dict[int, float]:
    return {j: round(t, 6) for j, t in sorted(rep.first_start.items())}


# --------------------------------------------------------------------------- gang
def test_gang_fifo_whole_jobs(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [
        [0, 0.0, 2, 4, 100, 100, 0],  # nodes 0 and 1
        [1, 1.0, 1, 4, 50, 50, 0],  # node 2
        [2, 2.0, 2, 4, 100, 100, 0],  # needs two nodes, one is free: waits for job 1 (t=51)
        [3, 3.0, 1, 1, 10, 10, 0],  # fits now, but FIFO: it waits behind job 2
    ]
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit"), rows, toy)
    assert starts(rep) == {0: 0.0, 1: 1.0, 2: 51.0, 3: 100.0}, "head-of-line blocking"


def test_gang_never_binds_part_of_a_job(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [[0, 0.0, 1, 4, 100, 100, 0], [1, 0.0, 1, 4, 100, 100, 0], [2, 1.0, 3, 4, 10, 10, 0]]
    result, rep = simulate(lambda: scheduler.GangScheduler("best_fit"), rows, toy)
    # Two nodes are free at t=1, job 2 needs three: nothing of it may be bound before t=100.
    assert [e.time for e in result.log if e.job == 2 and e.kind == "bind"] == [100.0]
    assert starts(rep)[2] == 100.0


def test_gang_uses_the_named_placement(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [[0, 0.0, 1, 2, 100, 100, 0], [1, 0.0, 1, 3, 100, 100, 0], [2, 1.0, 1, 1, 10, 10, 0]]
    where = {}
    for name in ("first_fit", "best_fit"):
        result, _ = simulate(lambda name=name: scheduler.GangScheduler(name), rows, toy)
        where[name] = next(e.gpus for e in result.log if e.job == 2 and e.kind == "start")
    assert where == {"first_fit": (2,), "best_fit": (7,)}
    with pytest.raises(ValueError):
        scheduler.GangScheduler("round_robin")


def test_gang_trace_budget(scheduler: Any, trace_budget: Any, kata_budget: Any) -> None:
    """traces/dgx.json, FIFO gang with best fit: checked at every event; mean JCT within
    1.05 x the reference's."""
    trace_budget(
        kata_budget, "dgx", lambda ref: (ref.module("scheduler") if ref else scheduler).GangScheduler("best_fit"),
        ["mean_jct"], "-gang",
    )  # fmt: skip


# --------------------------------------------------------------------------- backfill
EASY = [
    [0, 0.0, 2, 4, 100, 100, 0],  # nodes 0, 1
    [1, 1.0, 3, 4, 100, 100, 0],  # the head: shadow time 100, nodes 0, 1, 2 reserved
    [2, 2.0, 1, 4, 200, 200, 0],  # runs past 100: only off the reservation (node 3)
    [3, 3.0, 1, 4, 40, 50, 0],  # ends by 53 <= 100: may use reserved node 2
    [4, 4.0, 1, 4, 300, 300, 0],  # at t=43 node 2 is free, but it would end after 100
]


def test_backfill_easy(scheduler: Any, simulate: Any, toy: Any) -> None:
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", backfill=True), EASY, toy)
    assert starts(rep) == {0: 0.0, 1: 100.0, 2: 2.0, 3: 3.0, 4: 202.0}
    _, fifo = simulate(lambda: scheduler.GangScheduler("best_fit"), EASY, toy)
    # Job 1 spans both racks (slowdown 2): 200 s. Without backfill jobs 3 and 4 wait for it.
    assert starts(fifo) == {0: 0.0, 1: 100.0, 2: 100.0, 3: 300.0, 4: 300.0}


def test_backfill_uses_estimates_not_durations(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [r[:] for r in EASY[:4]]
    rows[3][4:6] = [40, 150]  # it would really end at 43, but asked for 150: not before 100
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit", backfill=True), rows, toy)
    assert starts(rep)[3] == 202.0, "only the estimate is known: it waits for job 2's node"


def test_backfill_beats_fifo(scheduler: Any, workload: Any, checker: Any, measure: Any) -> None:
    """traces/dgx.json: backfilling cuts the mean queueing delay by more than half, and
    every event of both runs passes the checker (no head job delayed)."""
    trace = workload.load("dgx")
    jobs, durations = workload.jobs_of(trace)
    run = lambda **kw: checker.check(  # noqa: E731
        workload.engine_for(trace).run(scheduler.GangScheduler("best_fit", **kw), jobs, durations),
        trace["jobs"],
    )
    assert measure(run(backfill=True), "mean_wait") < 0.5 * measure(run(), "mean_wait")


def test_backfill_trace_budget(scheduler: Any, trace_budget: Any, kata_budget: Any) -> None:
    """traces/dgx.json, best fit + EASY backfill: mean JCT and mean queueing delay within
    1.05 x the reference's."""
    trace_budget(
        kata_budget, "dgx",
        lambda ref: (ref.module("scheduler") if ref else scheduler).GangScheduler("best_fit", backfill=True),
        ["mean_jct", "mean_wait"], "-backfill",
    )  # fmt: skip


# --------------------------------------------------------------------------- preemption
def test_preemption_pays_the_checkpoint(scheduler: Any, simulate: Any, toy: Any) -> None:
    # Jobs 0 and 1 fill racks 0 and 1; job 2 (priority 1) preempts the later id of the two.
    rows = [
        [0, 0.0, 2, 4, 1000, 1000, 0],
        [1, 0.0, 2, 4, 2000, 2000, 0],
        [2, 100.0, 1, 4, 100, 100, 1],
    ]
    make = lambda: scheduler.GangScheduler("best_fit", preemption=True)  # noqa: E731
    _, rep = simulate(make, rows, toy, checkpoint_s=10.0)
    assert rep.preemptions == {1: 1} and starts(rep) == {0: 0.0, 1: 0.0, 2: 100.0}
    # Job 1 did 100 s of its 2000, restarts when job 2 ends (t=200) and redoes 10 s.
    assert rep.finish[2] == pytest.approx(200.0) and rep.finish[1] == pytest.approx(2110.0)


def test_preemption_waits_for_a_job_about_to_end(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [
        [0, 0.0, 2, 4, 1000, 1000, 0],
        [1, 0.0, 2, 4, 1000, 1000, 0],
        [2, 995.0, 1, 4, 100, 100, 1],
    ]
    make = lambda: scheduler.GangScheduler("best_fit", preemption=True)  # noqa: E731
    _, rep = simulate(make, rows, toy, checkpoint_s=10.0)
    assert rep.preemptions == {}, "5 s to go is cheaper than a 10 s checkpoint"
    assert starts(rep)[2] == 1000.0


def test_preemption_victim_order(scheduler: Any, simulate: Any, toy: Any) -> None:
    rows = [
        [0, 0.0, 1, 4, 1000, 1000, 0],
        [1, 10.0, 1, 4, 1000, 1000, 0],
        [2, 20.0, 1, 4, 1000, 1000, 0],
        [3, 30.0, 1, 4, 1000, 1000, 1],
        [4, 40.0, 1, 4, 100, 100, 2],  # lowest priority first, then the latest start: job 2
    ]
    make = lambda: scheduler.GangScheduler("best_fit", preemption=True)  # noqa: E731
    _, rep = simulate(make, rows, toy, checkpoint_s=10.0)
    assert rep.preemptions == {2: 1}
    assert rep.finish[2] == pytest.approx(140.0 + 1000 - 20 + 10)
    # Without preemption the urgent job waits for the first to end.
    _, rep = simulate(lambda: scheduler.GangScheduler("best_fit"), rows, toy, checkpoint_s=10.0)
    assert starts(rep)[4] == 1000.0


def test_preemption_trace_budget(
    scheduler: Any, trace_budget: Any, kata_budget: Any, workload: Any, checker: Any, measure: Any
) -> None:
    """traces/priority.json (a fifth of the jobs are production, priority 1), best fit +
    backfill + preemption, 120 s checkpoints: production jobs wait less than without
    preemption; their mean JCT and everyone's within 1.05 x the reference's."""
    make = lambda ref, pre=True: (ref.module("scheduler") if ref else scheduler).GangScheduler(  # noqa: E731
        "best_fit", backfill=True, preemption=pre
    )
    mine = trace_budget(kata_budget, "priority", make, ["mean_jct_p1", "mean_jct"], "-preemption")
    trace = workload.load("priority")
    jobs, durations = workload.jobs_of(trace)
    without = checker.check(
        workload.engine_for(trace).run(make(None, False), jobs, durations), trace["jobs"]
    )
    assert measure(mine, "mean_wait_p1") < 0.5 * measure(without, "mean_wait_p1")
    kata_budget.metrics["preemptions"] = sum(mine.preemptions.values())


# --------------------------------------------------------------------------- speed
def test_speed_events_per_second(scheduler: Any, kata: Any, kata_budget: Any) -> None:
    """A deep queue: 210 jobs (gen_traces.py, "quads", seed 1001) arriving three times faster
    on a 256-GPU cluster (4 racks x 8 nodes x 8 GPUs in islands of 4), topology-aware placement
    with backfill and preemption. Simulated events per second at least 1/2.5 of the
    reference's (your wall time at most 2.5 x): a backfill pass that recomputes the shadow time
    for every waiting job, or copies every node's free set for every job, does not make it."""
    gen, cluster = kata.module("gen_traces"), kata.module("cluster")
    topo = cluster.Topology("speed", 4, 8, 8, 4, island_penalty=1.25, rack_penalty=1.3)
    rows = [[r[0], r[1] / 3, *r[2:]] for r in gen.generate("quads", 1001, size=0.7)["jobs"]]
    ref = kata_budget.reference
    ref_sched, ref_engine = ref.module("scheduler"), ref.module("engine")
    engine = kata.module("engine")
    make = lambda m: m.GangScheduler("topology_aware", backfill=True, preemption=True)  # noqa: E731
    run = lambda e, m, rows: e.Engine(topo, 120.0).run(make(m), *e.jobs_of(rows))  # noqa: E731
    ref_run = run(ref_engine, ref_sched, rows)

    def fresh(seed: int) -> tuple[list[list[Any]]]:
        # Every round its own arrival times (each job's moved by up to 1%): a round's decisions
        # are never the ones an earlier round saw, so nothing carries over between rounds.
        jitter = random.Random(seed)
        return ([[r[0], r[1] * jitter.uniform(0.99, 1.01), *r[2:]] for r in rows],)

    def same_schedule(result: Any, rows: list[list[Any]]) -> None:
        # What is timed must be the scheduler the other tests grade (backfill and preemption
        # included): fast because it skips them is not fast.
        want = [
            (j.id, round(j.first_start, 6), j.preemptions)
            for j in run(ref_engine, ref_sched, rows).jobs
        ]
        got = [(j.id, round(j.first_start, 6), j.preemptions) for j in result.jobs]
        assert got == want, (
            "the timed run schedules otherwise than the reference (starts, preemptions)"
        )

    verdict = kata_budget.compare(
        lambda rows: run(engine, scheduler, rows), lambda rows: run(ref_engine, ref_sched, rows),
        name="simulate", ratio=2.5, rounds=7, setup=fresh, check=same_schedule,
    )  # fmt: skip
    events = ref_run.events
    kata_budget.metrics["your events/s"] = round(events / (verdict.learner_cost / 1e9))
    kata_budget.metrics["reference events/s"] = round(events / (verdict.reference_cost / 1e9))
