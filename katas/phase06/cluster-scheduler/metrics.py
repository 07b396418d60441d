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

from collections.abc import Sequence
from dataclasses import dataclass

from harness import todo

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
    todo("job_metrics")


def fragmentation(free: Sequence[int], pod_sizes: Sequence[int]) -> float:
    """Expected free GPUs unusable by a pod whose size is drawn uniformly from `pod_sizes`
    (one entry per waiting job), given the free GPUs of each node."""
    todo("fragmentation")


def fragmentation_timeline(result: Result) -> list[tuple[float, float]]:
    """(time, fragmented GPUs) after every decision, from result.points."""
    todo("fragmentation_timeline")


def utilisation(result: Result) -> float:
    """Time-weighted GPUs running jobs over all the cluster's GPUs, 0..1 (see above)."""
    todo("utilisation")


def summarize(result: Result) -> Summary:
    """The run in numbers; ValueError for a run without jobs."""
    todo("summarize")
