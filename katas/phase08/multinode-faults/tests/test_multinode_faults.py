"""Public tests of multinode-faults: tasks "detect", "report", "straggler" and "recover".

The drills are real clusters (conftest.py): hosts in network namespaces, a relay shaping the
links, a fault injected 0.6 s in. The recover tests run your train() on every host of one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

SUSPECT_AFTER, DEAD_AFTER = 0.3, 1.5  # the drills' thresholds (conftest.py)


def make_detector(detector: Any) -> Any:
    return lambda peers, start: detector.FailureDetector(peers, start, SUSPECT_AFTER, DEAD_AFTER)


def healthy(trace: dict[str, Any], peer: int) -> bool:
    """No silence of dead_after or more in this peer's heartbeats (this machine did not stall
    the drill so long that a correct detector must call a live peer dead)."""
    ts = [trace["start"], *trace["heartbeats"][peer], trace["end"]]
    return peer not in trace["closed"] and max(np.diff(ts)) < DEAD_AFTER


# --------------------------------------------------------------------------- detect
def test_detect_by_hand(detector: Any) -> None:
    d = detector.FailureDetector([1, 2], 0.0, 0.3, 1.0)
    assert d.status(1, 0.0) == "alive"
    assert d.status(1, 0.29) == "alive"
    assert d.status(1, 0.3) == "suspect"
    d.heartbeat(1, 0.5)
    assert d.status(1, 0.5) == "alive"
    assert d.status(2, 0.5) == "suspect"
    assert d.status(1, 1.0) == "suspect"
    assert d.status(2, 1.0) == "dead"
    d.heartbeat(2, 1.1)  # too late: dead is for ever
    assert d.status(2, 1.1) == "dead"
    d.heartbeat(1, 1.2)
    assert d.status(1, 1.2) == "alive"
    d.closed(1, 1.25)  # the kernel says the process is gone
    assert d.status(1, 1.25) == "dead"
    with pytest.raises(ValueError):
        d.status(7, 1.3)
    with pytest.raises(ValueError):
        detector.FailureDetector([1], 0.0, 1.0, 0.5)


def test_detect_late_heartbeat_after_death(detector: Any) -> None:
    d = detector.FailureDetector([3], 10.0, 0.5, 2.0)
    d.heartbeat(3, 11.0)
    d.heartbeat(3, 13.5)  # silent from 11.0 to 13.5: it died at 13.0, before this arrived
    assert d.status(3, 13.5) == "dead"


@pytest.mark.tier("cluster-sim")  # a real cluster
def test_detect_killed_host(detector: Any, drill: Any, replay: Any) -> None:
    make_detector(detector)([0, 1], 0.0)  # a stub stops here, before the drill runs
    dr = drill("kill")
    (dead,) = dr.faulty_hosts()
    for o, trace in dr.traces.items():
        timeline = replay(make_detector(detector), trace)
        when = [t for t, s in timeline[dead] if s == "dead"]
        assert when, f"host {o} never declared the killed host {dead} dead: {timeline[dead]}"
        assert when[0] < dr.fault_time + 1.0, (
            f"host {o} saw host {dead}'s connection close but declared it dead only "
            f"{when[0] - dr.fault_time:.2f} s after the kill"
        )
        for p in timeline:
            if p != dead and healthy(trace, p):
                assert all(s != "dead" for _t, s in timeline[p]), (
                    f"host {o} declared the live host {p} dead: {timeline[p]}"
                )


@pytest.mark.tier("cluster-sim")  # a real cluster
def test_detect_slow_link_is_not_dead(detector: Any, drill: Any, replay: Any) -> None:
    make_detector(detector)([0, 1], 0.0)
    dr = drill("slow")
    for o, trace in dr.traces.items():
        timeline = replay(make_detector(detector), trace)
        for p in timeline:
            if healthy(trace, p):
                assert all(s != "dead" for _t, s in timeline[p]), (
                    f"host {o} declared host {p} dead behind a slow link {dr.fault.link}: "
                    f"{timeline[p]}"
                )
    assert any(t["heartbeats"] for t in dr.traces.values())


# --------------------------------------------------------------------------- report
A, S, D = "alive", "suspect", "dead"


def test_report_partitioned_host(diagnose: Any, jobs: Any) -> None:
    # Host 2 is cut off: the others see it dead, it sees them all dead.
    views = {0: {1: A, 2: D, 3: A}, 1: {0: A, 2: D, 3: S}, 2: {0: D, 1: D, 3: D},
             3: {0: A, 1: A, 2: D}}  # fmt: skip
    assert diagnose.diagnose(views, [0, 1, 2, 3]) == jobs.Diagnosis([2], [])


def test_report_killed_host_reports_nothing(diagnose: Any, jobs: Any) -> None:
    views = {0: {1: D, 2: A}, 2: {0: A, 1: D}}
    assert diagnose.diagnose(views, [0, 1, 2]) == jobs.Diagnosis([1], [])


def test_report_one_link(diagnose: Any, jobs: Any) -> None:
    views = {0: {1: A, 2: A, 3: D}, 1: {0: A, 2: A, 3: A}, 2: {0: S, 1: A, 3: A},
             3: {0: D, 1: A, 2: A}}  # fmt: skip
    assert diagnose.diagnose(views, [0, 1, 2, 3]) == jobs.Diagnosis([], [(0, 3)])


def test_report_suspicion_is_not_failure(diagnose: Any, jobs: Any) -> None:
    views = {0: {1: S, 2: S}, 1: {0: S, 2: A}, 2: {0: S, 1: A}}
    assert diagnose.diagnose(views, [0, 1, 2]) == jobs.Diagnosis([], [])


# --------------------------------------------------------------------------- straggler
def test_straggler_by_hand(diagnose: Any) -> None:
    probes = {(0, 1): [0.010, 0.012], (1, 0): [0.011], (0, 2): [0.009, 0.5, 0.010],
              (2, 0): [0.010], (1, 2): [0.30, 0.31], (2, 1): [0.29, 0.9]}  # fmt: skip
    assert diagnose.slow_links(probes) == [(1, 2)]
    fast = {k: [t / 1000 for t in v] for k, v in probes.items()}  # a 1000x faster machine
    assert diagnose.slow_links(fast) == [(1, 2)]


@pytest.mark.tier("cluster-sim")  # a real cluster
def test_straggler_slow_drill(diagnose: Any, drill: Any) -> None:
    diagnose.slow_links({(0, 1): [0.01], (1, 0): [0.01], (0, 2): [0.01]})
    dr = drill("slow")
    probes = {
        (src, dst): tr["probes"][src] for dst, tr in dr.traces.items() for src in tr["probes"]
    }
    assert diagnose.slow_links(probes) == [dr.faulty_link()], (
        f"the drill slowed link {dr.faulty_link()}; medians: "
        f"{ {k: round(float(np.median(v)), 4) for k, v in probes.items() if v} }"
    )


# --------------------------------------------------------------------------- recover
def expected_state(
    jobs: Any, cfg: Any, res: Any, hosts: int, lost: int | None, at: int | None
) -> Any:
    """The job's state: every host's grads up to the last checkpoint before the fault's step,
    the survivors' from there on (each host's data as the cluster reported it)."""
    ckpt = 0 if at is None else (at // cfg.ckpt_every) * cfg.ckpt_every
    total = np.zeros(cfg.size, dtype=np.int64)
    for step in range(cfg.steps):
        members = (
            range(hosts) if at is None or step < ckpt else [h for h in range(hosts) if h != lost]
        )
        for h in members:
            total += jobs.grad(cfg, h, step, data=res.results[h].data)
    return total


def test_recover_no_fault(elastic: Any, netcluster: Any, jobs: Any) -> None:
    cfg = jobs.TrainConfig(steps=6, ckpt_every=2, seed=3)
    with netcluster.Cluster(3) as c:
        res = c.run(elastic.train, cfg, deadline=30)
    res.check_todo()
    want = expected_state(jobs, cfg, res, 3, None, None)
    for h in range(3):
        got = res.value(h)
        assert np.array_equal(got["state"], want), f"host {h}: {got['state']} != {want}"
        assert got["generation"] == 0 and got["members"] == [0, 1, 2] and got["rank"] == h
    assert not c.leftovers()


def test_recover_killed_host(elastic: Any, netcluster: Any, jobs: Any, kata_rng: Any) -> None:
    n = int(kata_rng.integers(3, 5))
    lost, at = int(kata_rng.integers(n)), int(kata_rng.integers(4, 9))
    cfg = jobs.TrainConfig(steps=12, ckpt_every=3, seed=int(kata_rng.integers(1000)))
    with netcluster.Cluster(n) as c:
        res = c.run(elastic.train, cfg, faults=[netcluster.Fault("kill", host=lost, step=at)],
                    deadline=40)  # fmt: skip
    res.check_todo()
    if not res.fired:
        for h in range(n):
            res.value(h)  # what a host raised, if one did
    assert res.fired, f"host {lost} never began step {at}: call node.begin_step(step) every step"
    survivors = [h for h in range(n) if h != lost]
    want = expected_state(jobs, cfg, res, n, lost, at)
    for new_rank, h in enumerate(survivors):
        got = res.value(h)
        assert got["members"] == survivors, f"host {h}: members {got['members']} != {survivors}"
        assert got["rank"] == new_rank, f"host {h}: rank {got['rank']} != {new_rank}"
        assert got["generation"] == 1, f"host {h}: generation {got['generation']} != 1"
        ckpt = (at // cfg.ckpt_every) * cfg.ckpt_every
        assert got["resumed_from"] == [ckpt], f"host {h}: resumed from {got['resumed_from']}"
        assert np.array_equal(got["state"], want), (
            f"host {h}: state {got['state']} != {want} (host {lost} killed at step {at}, "
            f"checkpoints every {cfg.ckpt_every} steps)"
        )
    assert not c.leftovers()
