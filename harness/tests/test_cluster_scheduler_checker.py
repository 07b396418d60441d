"""The cluster-scheduler kata's checker.py fails the schedules it exists to catch.

Its tests grade every simulation by replaying the log through the checker; here forged logs
show that each rule can fail: a double-booked GPU, a partial gang, a head job that waits while
it fits, a head job delayed past its reservation, a run shorter than its work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.loader import context_for

KATA = Path(__file__).resolve().parents[2] / "katas" / "phase06" / "cluster-scheduler"


@pytest.fixture(scope="module")
def kata() -> Any:
    ctx = context_for(KATA / "kata.toml", "solution")
    cluster, engine, checker = (ctx.module(m) for m in ("cluster", "engine", "checker"))
    toy = cluster.Topology("toy", 2, 2, 4, 2, island_penalty=1.5, rack_penalty=2.0)
    return engine, checker, toy


def replay(kata: Any, rows: list[list[Any]], log: list[tuple[Any, ...]]) -> Any:
    engine, checker, toy = kata
    entries = [engine.LogEntry(t, kind, j, tuple(g)) for t, kind, j, g in log]
    return checker.check(engine.Result(toy, 0.0, [], entries, [], 0.0, 0), rows)


ROWS = [[0, 0.0, 1, 4, 100.0, 100.0, 0], [1, 0.0, 1, 2, 50.0, 50.0, 0]]


def test_a_valid_schedule_passes(kata: Any) -> None:
    log = [
        (0.0, "submit", 0, ()), (0.0, "submit", 1, ()),
        (0.0, "bind", 0, (0, 1, 2, 3)), (0.0, "start", 0, (0, 1, 2, 3)),
        (0.0, "bind", 1, (4, 5)), (0.0, "start", 1, (4, 5)),
        (50.0, "finish", 1, (4, 5)), (100.0, "finish", 0, (0, 1, 2, 3)),
    ]  # fmt: skip
    rep = replay(kata, ROWS, log)
    assert rep.finish == {0: 100.0, 1: 50.0} and rep.first_start == {0: 0.0, 1: 0.0}


@pytest.mark.parametrize(
    "log, words",
    [
        (  # job 1 takes GPUs 2 and 3, which job 0 holds
            [(0.0, "submit", 0, ()), (0.0, "submit", 1, ()), (0.0, "bind", 0, (0, 1, 2, 3)),
             (0.0, "start", 0, (0, 1, 2, 3)), (0.0, "bind", 1, (2, 3))],
            "double-booked",
        ),
        (  # a 2-GPU pod across two nodes
            [(0.0, "submit", 1, ()), (0.0, "bind", 1, (3, 4))],
            "one node",
        ),
        (  # job 0 finishes after 60 s of its 100 s of work
            [(0.0, "submit", 0, ()), (0.0, "submit", 1, ()), (0.0, "bind", 0, (0, 1, 2, 3)),
             (0.0, "start", 0, (0, 1, 2, 3)), (0.0, "bind", 1, (4, 5)), (0.0, "start", 1, (4, 5)),
             (50.0, "finish", 1, (4, 5)), (60.0, "finish", 0, (0, 1, 2, 3))],
            "its work ends",
        ),
        (  # job 1 could start at 0 but waits
            [(0.0, "submit", 0, ()), (0.0, "submit", 1, ()), (0.0, "bind", 0, (0, 1, 2, 3)),
             (0.0, "start", 0, (0, 1, 2, 3))],
            "could start now",
        ),
    ],
)  # fmt: skip
def test_each_rule_can_fail(kata: Any, log: list[tuple[Any, ...]], words: str) -> None:
    with pytest.raises(AssertionError, match=words):
        replay(kata, ROWS, log)


def test_a_partial_gang_fails(kata: Any) -> None:
    rows = [[0, 0.0, 2, 4, 10.0, 10.0, 0]]
    with pytest.raises(AssertionError, match="partial gang"):
        replay(kata, rows, [(0.0, "submit", 0, ()), (0.0, "bind", 0, (0, 1, 2, 3))])


def test_a_backfilled_job_that_delays_the_head_fails(kata: Any) -> None:
    rows = [
        [0, 0.0, 2, 4, 100.0, 100.0, 0],  # nodes 0, 1 until 100
        [1, 1.0, 3, 4, 10.0, 10.0, 0],  # the head: reserved for t=100
        [2, 2.0, 1, 4, 500.0, 500.0, 0],  # backfilled on node 2 until 502: the head cannot start
        [3, 3.0, 1, 4, 500.0, 500.0, 0],  # and node 3
    ]
    log = [
        (0.0, "submit", 0, ()), (0.0, "bind", 0, tuple(range(8))), (0.0, "start", 0, tuple(range(8))),
        (1.0, "submit", 1, ()),
        (2.0, "submit", 2, ()), (2.0, "bind", 2, (8, 9, 10, 11)), (2.0, "start", 2, (8, 9, 10, 11)),
        (3.0, "submit", 3, ()), (3.0, "bind", 3, (12, 13, 14, 15)), (3.0, "start", 3, (12, 13, 14, 15)),
        (100.0, "finish", 0, tuple(range(8))),
        (502.0, "finish", 2, (8, 9, 10, 11)),
    ]  # fmt: skip
    with pytest.raises(AssertionError, match="reservation at t=100"):
        replay(kata, rows, log)
