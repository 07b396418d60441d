"""Serving metrics per request and over a run (reference)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .engine import RequestResult

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class RequestMetrics:
    id: int
    ttft: float
    tpot: float | None
    itl: tuple[float, ...]
    e2e: float


@dataclass(frozen=True)
class Summary:
    requests: int
    output_tokens: int
    duration: float
    throughput: float
    request_rate: float
    ttft: dict[int, float]
    tpot: dict[int, float]
    itl: dict[int, float]
    e2e: dict[int, float]
    slo_attainment: float
    goodput: float


def request_metrics(r: RequestResult) -> RequestMetrics:
    t = r.token_times
    if not t:
        raise ValueError(f"request {r.id} has no output tokens")
    tpot = (t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else None
    itl = tuple(b - a for a, b in zip(t, t[1:], strict=False))
    return RequestMetrics(r.id, t[0] - r.arrival, tpot, itl, t[-1] - r.arrival)


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    v = sorted(values)
    pos = (len(v) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _pcts(values: Sequence[float]) -> dict[int, float]:
    return {p: percentile(values, p) if values else 0.0 for p in PERCENTILES}


def summarize(results: Sequence[RequestResult], *, ttft_slo: float, tpot_slo: float) -> Summary:
    if not results:
        raise ValueError("no results to summarize")
    ms = [request_metrics(r) for r in results]
    start = min(r.arrival for r in results)
    end = max(r.token_times[-1] for r in results)
    duration = end - start
    tokens = sum(len(r.token_times) for r in results)
    good = sum(1 for m in ms if m.ttft <= ttft_slo and (m.tpot is None or m.tpot <= tpot_slo))
    return Summary(
        requests=len(ms),
        output_tokens=tokens,
        duration=duration,
        throughput=tokens / duration,
        request_rate=len(ms) / duration,
        ttft=_pcts([m.ttft for m in ms]),
        tpot=_pcts([m.tpot for m in ms if m.tpot is not None]),
        itl=_pcts([x for m in ms for x in m.itl]),
        e2e=_pcts([m.e2e for m in ms]),
        slo_attainment=good / len(ms),
        goodput=good / duration,
    )
