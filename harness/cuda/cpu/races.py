"""Race checks of the cpu backend: run a kernel under several thread schedules, compare outputs.

A kernel whose threads read what other threads write without a barrier in between gives
different results when the threads of a block run in another order; the same launch under the
forward, reverse, random and (with a traced build) preempt schedules shows it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from harness._lazy import lazy_module
from harness.cuda.cpu.building import traced_toolchain
from harness.cuda.cpu.interface import SCHEDULES
from harness.cuda.cpu.marshal import Param
from harness.cuda.cpu.memory import CpuDeviceArray
from harness.cuda.errors import LaunchError, RaceDetected

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = ["compare_schedules", "default_schedules"]


@functools.cache
def default_schedules() -> tuple[str, ...]:
    """All schedules; "preempt" needs a traced build (a switch point at every memory access)."""
    return SCHEDULES if traced_toolchain() else SCHEDULES[:3]


def compare_schedules(
    kernel: str,
    params: Sequence[Param],
    args: Sequence[Any],
    schedules: Sequence[str],
    run: Callable[[str], tuple[dict[int, np.ndarray], float]],
    rtol: float,
) -> tuple[list[Any], float]:
    """Launch with `run(schedule)` (-> outputs by argument index, seconds) once per schedule;
    RaceDetected when two disagree. Returns the first schedule's outputs and launch time."""
    schedules = tuple(schedules)
    unknown = [s for s in schedules if s not in SCHEDULES]
    if unknown:
        raise LaunchError(f"{kernel}: unknown schedule(s) {unknown}; known: {SCHEDULES}")
    # Device arrays are updated in place: every schedule starts from the same contents.
    initial = {i: a.get() for i, a in enumerate(args) if isinstance(a, CpuDeviceArray)}
    runs = []
    seconds = 0.0
    for s in schedules:
        for i, a in initial.items():
            args[i].set(a)
        outputs, took = run(s)
        runs.append(outputs)
        seconds = seconds or took
    first = runs[0]
    for s, out in zip(schedules[1:], runs[1:], strict=True):
        for i in sorted(first):
            a, b = first[i], out[i]
            same = _same(a, b, rtol)
            if not same.all():
                raise _race_error(kernel, params, (schedules[0], s), i, a, b, same)
    return [first.get(i) for i in range(len(args))], seconds


def _same(a: np.ndarray, b: np.ndarray, rtol: float) -> np.ndarray:
    if a.dtype.kind in "fc":
        return np.isclose(a, b, rtol=rtol, atol=0.0, equal_nan=True)
    return a == b if a.dtype.fields is None else a.view(np.uint8) == b.view(np.uint8)


def _race_error(
    kernel: str,
    params: Sequence[Param],
    pair: tuple[str, str],
    index: int,
    a: np.ndarray,
    b: np.ndarray,
    same: np.ndarray,
) -> RaceDetected:
    bad = np.argwhere(~same)
    n = len(bad)
    shown = []
    for idx in bad[:5]:
        t = tuple(int(i) for i in idx)
        key = t if len(t) > 1 else t[0]
        shown.append(f"[{key}]: {a[t]} vs {b[t]}")
    pname = params[index].name if index < len(params) else f"#{index}"
    msg = (
        f"kernel {kernel}: output argument {index} ({pname}) differs between the {pair[0]} and "
        f"{pair[1]} thread schedules in {n} of {a.size} elements ({'; '.join(shown)}). Threads "
        "read memory that other threads write without a barrier in between: a missing "
        "__syncthreads() or a data race."
    )
    return RaceDetected(msg, kernel=kernel, schedules=pair, argument=index, mismatches=n)
