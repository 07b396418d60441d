"""YOUR FILE. Task "metrics": what a cluster team watches, from an engine.Result.

Definitions:

- JCT, job completion time: finish - submit; queueing delay: first start - submit.
- Time-weighted averages over the run: result.points[i] (the cluster after the i-th decision)
  holds from points[i].time until points[i + 1].time, the last one until result.end; the run
  spans points[0].time to result.end (a run that spans no time averages to 0).
- Utilisation: the time-weighted average of GPUs running jobs (Point.running) over all the
  cluster's GPUs (held GPUs of partial gangs do not count: they idle).
- Fragmentation (Weng et al., "Beware of Fragmentation", USENIX ATC '23): the expected number
  of free GPUs that a pod drawn from the queue cannot use. A node's free GPUs are all
  unusable for a pod of g GPUs when fewer than g are free there, and all usable otherwise;
  each waiting job's pod size is equally likely (Point.queue lists them). An empty queue
  fragments nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .engine import Result


@dataclass(frozen=True)
class JobMetrics:
    id: int
    jct: float
    queueing_delay: float


@dataclass(frozen=True)
class Summary:
    jobs: int
    makespan: float  # result.end - first submit
    mean_jct: float
    p99_jct: float  # numpy's default (linear) percentile
    mean_queueing_delay: float
    p99_queueing_delay: float
    utilisation: float  # 0..1
    mean_fragmentation: float  # time-weighted fragmented GPUs / all GPUs, 0..1
    preemptions: int


def job_metrics(result: Result) -> list[JobMetrics]:
    """One JobMetrics per job, in the order of result.jobs."""
    return [JobMetrics(j.id, j.finish - j.submit, j.first_start - j.submit) for j in result.jobs]


def fragmentation(free: Sequence[int], pod_sizes: Sequence[int]) -> float:
    """Expected free GPUs unusable by a pod whose size is drawn uniformly from `pod_sizes`
    (one entry per waiting job), given the free GPUs of each node."""
    if not pod_sizes:
        return 0.0
    n = len(pod_sizes)
    return sum(c / n * sum(f for f in free if f < g) for g, c in Counter(pod_sizes).items())


def fragmentation_timeline(result: Result) -> list[tuple[float, float]]:
    """(time, fragmented GPUs) after every decision, from result.points."""
    return [(p.time, fragmentation(p.free, p.queue)) for p in result.points]


def _time_weighted(result: Result, values: Sequence[float]) -> float:
    times = [p.time for p in result.points] + [result.end]
    span = times[-1] - times[0]
    if span <= 0:
        return 0.0
    return sum(v * (times[i + 1] - times[i]) for i, v in enumerate(values)) / span


def utilisation(result: Result) -> float:
    """Time-weighted GPUs running jobs over all the cluster's GPUs, 0..1 (see above)."""
    return (
        _time_weighted(result, [p.running + p.held for p in result.points]) / result.topology.gpus
    )


def summarize(result: Result) -> Summary:
    """The run in numbers; ValueError for a run without jobs."""
    if not result.jobs:
        raise ValueError("summarize: the run has no jobs")
    m = job_metrics(result)
    jct = np.array([x.jct for x in m])
    wait = np.array([x.queueing_delay for x in m])
    frag = [f for _, f in fragmentation_timeline(result)]
    return Summary(
        jobs=len(m),
        makespan=result.end - min(j.submit for j in result.jobs),
        mean_jct=float(jct.mean()),
        p99_jct=float(np.percentile(jct, 99)),
        mean_queueing_delay=float(wait.mean()),
        p99_queueing_delay=float(np.percentile(wait, 99)),
        utilisation=utilisation(result),
        mean_fragmentation=_time_weighted(result, frag) / result.topology.gpus,
        preemptions=sum(j.preemptions for j in result.jobs),
    )
