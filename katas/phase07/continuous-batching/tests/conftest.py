"""Fixtures of the continuous-batching tests: your modules and the given ones, loaded once per
module, and the few measurements the tests make themselves (never with your metrics.py)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def cost(kata: Any) -> Any:
    """cost.py (yours): task "cost"."""
    return kata.module("cost")


@pytest.fixture(scope="module")
def metrics(kata: Any) -> Any:
    """metrics.py (yours): task "metrics"."""
    return kata.module("metrics")


@pytest.fixture(scope="module")
def schedulers(kata: Any) -> Any:
    """schedulers.py (yours): tasks "static", "continuous", "chunked", "preemption"."""
    return kata.module("schedulers")


@pytest.fixture(scope="module")
def engine(kata: Any) -> Any:
    """engine.py (given): the simulated serving engine."""
    return kata.module("engine")


@pytest.fixture(scope="module")
def hardware(kata: Any) -> Any:
    """hardware.py (given): GPU and model specs."""
    return kata.module("hardware")


@pytest.fixture(scope="module")
def workload(kata: Any) -> Any:
    """workload.py (given): the shipped traces and their engines."""
    return kata.module("workload")


@pytest.fixture(scope="module")
def measure() -> Any:
    """measure(run, quantity): what the scheduler tests grade, computed here (with numpy), so
    that a wrong metrics.py never decides a scheduler's grade: "makespan" (last token time),
    "tpot_p99" (99th percentile over requests with 2+ tokens of their mean time per output
    token), "ttft_p99", "itl_p99" (over all gaps), "slo_met" (requests within both SLOs,
    given as slo=(ttft, tpot))."""
    import numpy as np

    def measure(run: Any, quantity: str, slo: tuple[float, float] | None = None) -> float:
        rs = run.results
        if quantity == "makespan":
            return run.end
        tpot = [
            (r.token_times[-1] - r.token_times[0]) / (len(r.token_times) - 1)
            for r in rs
            if len(r.token_times) > 1
        ]
        ttft = [r.token_times[0] - r.arrival for r in rs]
        if quantity == "tpot_p99":
            return float(np.percentile(tpot, 99))
        if quantity == "ttft_p99":
            return float(np.percentile(ttft, 99))
        if quantity == "itl_p99":
            return float(np.percentile(np.concatenate([np.diff(r.token_times) for r in rs]), 99))
        if quantity == "slo_met":
            assert slo is not None
            return float(sum(
                1 for r in rs
                if r.token_times[0] - r.arrival <= slo[0]
                and (len(r.token_times) < 2 or (r.token_times[-1] - r.token_times[0]) / (len(r.token_times) - 1) <= slo[1])
            ))  # fmt: skip
        raise ValueError(f"unknown quantity {quantity!r}")

    return measure


@pytest.fixture(scope="module")
def toy(engine: Any) -> Any:
    return engine.StepCost(
        weights_s=0.01, kv_s_per_token=0.0, flop_s_per_token=2e-4, swap_s_per_token=1e-3
    )
