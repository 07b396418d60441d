"""GIVEN (not graded): jobs that share one GPU, and what a sharing mechanism did with them.

A job is described by two numbers, the model the sharing task simulates (README "Sharing"):

- `work_ms`: how long it would run alone if its kernels kept *every* SM busy;
- `fill`: the fraction of the GPU's SMs its kernels can keep busy (a small-batch inference
  server fills 0.25 of an A100; a large training step fills 1.0).

Alone on the whole GPU it therefore takes work_ms / fill. Given `rate` (the fraction of the
whole GPU's SMs working for it), it needs work_ms / rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean


@dataclass(frozen=True)
class Job:
    name: str
    work_ms: float
    fill: float
    memory_gb: float = 0.0

    def alone_ms(self) -> float:
        """Its run time alone on the whole GPU."""
        return self.work_ms / self.fill


@dataclass(frozen=True)
class Outcome:
    """When each job finished (ms after all started at 0)."""

    finish_ms: dict[str, float]

    @property
    def makespan_ms(self) -> float:
        return max(self.finish_ms.values())

    @property
    def mean_latency_ms(self) -> float:
        return mean(self.finish_ms.values())

    @property
    def throughput_per_s(self) -> float:
        """Jobs finished per second over the makespan."""
        return len(self.finish_ms) / self.makespan_ms * 1000.0


class OutOfMemory(Exception):
    """A job's allocation did not fit."""


# Two inference servers that each fill a quarter of the GPU, next to one training job: the
# mix of the README's table.
INFERENCE_AND_TRAINING = (
    Job("infer-a", 5.0, 0.25, 8.0),
    Job("infer-b", 5.0, 0.25, 8.0),
    Job("train", 60.0, 1.0, 30.0),
)

# Four copies of a small inference step: the case MPS was made for.
FOUR_SMALL = tuple(Job(f"small-{i}", 4.0, 0.2, 4.0) for i in range(4))
