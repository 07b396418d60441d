"""YOUR FILE. Task "metrics": latency and throughput of a serving run.

Definitions (those of vLLM's benchmark_serving and of DistServe for goodput):

- TTFT, time to first token: first token's time - arrival (queueing + prefill);
- TPOT, time per output token: (last token's time - first token's time) / (tokens - 1); a
  request with one output token has none (None);
- ITL, inter-token latencies: the gaps between a request's consecutive tokens;
- E2E latency: last token's time - arrival;
- throughput: output tokens / duration, duration = last token of the run - first arrival;
- SLO attainment: the share of requests with TTFT <= ttft_slo AND TPOT <= tpot_slo (a request
  without a TPOT meets that part); goodput: such requests per second of duration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness import todo

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
    throughput: float  # output tokens / s
    request_rate: float  # finished requests / s
    ttft: dict[int, float]  # percentile (50, 90, 99) -> seconds
    tpot: dict[int, float]  # over requests that have a TPOT (0.0 for each if none has)
    itl: dict[int, float]  # over every gap of every request (0.0 for each if none)
    e2e: dict[int, float]
    slo_attainment: float  # 0 .. 1
    goodput: float  # requests meeting both SLOs / s


def request_metrics(r: RequestResult) -> RequestMetrics:
    """One request's TTFT, TPOT, ITLs and E2E latency. ValueError if it has no tokens."""
    todo("request_metrics")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) with linear interpolation between the closest ranks
    (numpy.percentile's default): sorted v, position (len(v) - 1) * q / 100. ValueError for no
    values or q outside [0, 100]."""
    todo("percentile")


def summarize(results: Sequence[RequestResult], *, ttft_slo: float, tpot_slo: float) -> Summary:
    """The run's Summary, percentiles at PERCENTILES. ValueError for no results."""
    todo("summarize")
