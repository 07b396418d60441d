"""Time-slicing, MPS and MIG as simulations of the jobs of workloads.py (README "Sharing").

- time-slicing: one context on the GPU at a time, round robin in the jobs' order, `slice_ms`
  each; switching to another context costs `switch_ms` of idle GPU. A job that finishes early
  gives the rest of its slice up. One context left: it keeps the GPU, no more switches.
- MPS: every job runs at once in one shared context, at rate min(fill, percentage / 100); when
  the rates add up to more than the whole GPU, each is scaled down by the same factor.
- MIG: each job alone in its instance, at rate min(fill, instance SMs / GPU SMs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .gpus import GPU
from .workloads import Job, Outcome

EPS = 1e-9


def time_slicing(jobs: Sequence[Job], slice_ms: float, switch_ms: float) -> Outcome:
    """Round robin over the jobs in their order, one context on the GPU at a time (running
    at its own fill), `slice_ms` each, `switch_ms` of idle GPU whenever another context takes
    over. ValueError unless slice_ms > 0 and switch_ms >= 0."""
    if slice_ms <= 0 or switch_ms < 0:
        raise ValueError("slice_ms must be > 0 and switch_ms >= 0")
    left = {j.name: j.alone_ms() for j in jobs}
    finish: dict[str, float] = {}
    t, last = 0.0, None
    while left:
        for j in jobs:
            if j.name not in left:
                continue
            if last is not None and len(jobs) > 1:
                t += switch_ms
            run = min(slice_ms, left[j.name])
            t += run
            last = j.name
            if left[j.name] - run <= EPS:
                finish[j.name] = t
                del left[j.name]
            else:
                left[j.name] -= run
    return Outcome(finish)


def mps(jobs: Sequence[Job], percentage: Mapping[str, float] | None = None) -> Outcome:
    """Every job at once; `percentage`: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per job name
    (default 100; ValueError outside (0, 100])."""
    percentage = percentage or {}
    demand = {}
    for j in jobs:
        pct = percentage.get(j.name, 100.0)
        if not 0 < pct <= 100:
            raise ValueError(f"{j.name}: active thread percentage {pct} not in (0, 100]")
        demand[j.name] = min(j.fill, pct / 100.0)
    left = {j.name: j.work_ms for j in jobs}
    finish: dict[str, float] = {}
    t = 0.0
    while left:
        total = sum(demand[n] for n in left)
        scale = 1.0 if total <= 1.0 else 1.0 / total
        rate = {n: demand[n] * scale for n in left}
        dt = min(left[n] / rate[n] for n in left)
        t += dt
        for n in list(left):
            left[n] -= rate[n] * dt
            if left[n] <= EPS * max(1.0, t):
                finish[n] = t
                del left[n]
    return Outcome(finish)


def mig(jobs: Sequence[Job], gpu: GPU, instance: Mapping[str, str]) -> Outcome:
    """Each job alone in its own MIG instance; `instance`: the profile name of each job's
    instance (on `gpu`)."""
    finish = {}
    for j in jobs:
        p = gpu.profile(instance[j.name])
        rate = min(j.fill, p.sms / gpu.sms)
        finish[j.name] = j.work_ms / rate
    return Outcome(finish)


def oom_failures(
    jobs: Sequence[Job], pool_gb: float, limits_gb: Mapping[str, float] | None = None
) -> list[str]:
    """The jobs whose allocation fails when they allocate in order from one pool of
    `pool_gb`, each also capped by its limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) if it has one.
    A failed job takes nothing from the pool."""
    limits_gb = limits_gb or {}
    free = pool_gb
    failed = []
    for j in jobs:
        cap = limits_gb.get(j.name)
        if (cap is not None and j.memory_gb > cap) or j.memory_gb > free + EPS:
            failed.append(j.name)
        else:
            free -= j.memory_gb
    return failed
