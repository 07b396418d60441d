"""YOUR FILE. Task "sharing": time-slicing, MPS and MIG as simulations (README "Sharing").

- time-slicing: one context on the GPU at a time, round robin in the jobs' order, `slice_ms`
  each; switching to another context costs `switch_ms` of idle GPU. A job that finishes early
  gives the rest of its slice up. One context left: it keeps the GPU, no more switches.
- MPS: every job runs at once in one shared context, at rate min(fill, percentage / 100); when
  the rates add up to more than the whole GPU, each is scaled down by the same factor.
- MIG: each job alone in its instance, at rate min(fill, instance SMs / GPU SMs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness import todo

from .gpus import GPU  # noqa: F401  (you will need them)
from .workloads import Job, Outcome  # noqa: F401  (you will need them)


def time_slicing(jobs: Sequence[Job], slice_ms: float, switch_ms: float) -> Outcome:
    """Round robin over the jobs in their order, one context on the GPU at a time (running
    at its own fill), `slice_ms` each, `switch_ms` of idle GPU whenever another context takes
    over. ValueError unless slice_ms > 0 and switch_ms >= 0."""
    todo("time_slicing")


def mps(jobs: Sequence[Job], percentage: Mapping[str, float] | None = None) -> Outcome:
    """Every job at once; `percentage`: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per job name
    (default 100; ValueError outside (0, 100])."""
    todo("mps")


def mig(jobs: Sequence[Job], gpu: GPU, instance: Mapping[str, str]) -> Outcome:
    """Each job alone in its own MIG instance; `instance`: the profile name of each job's
    instance (on `gpu`)."""
    todo("mig")


def oom_failures(
    jobs: Sequence[Job], pool_gb: float, limits_gb: Mapping[str, float] | None = None
) -> list[str]:
    """The jobs whose allocation fails when they allocate in order from one pool of
    `pool_gb`, each also capped by its limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) if it has one.
    A failed job takes nothing from the pool."""
    todo("oom_failures")
