"""Given: the shipped canary scenarios, each with the decision a careful judge makes and why.

Latencies are milliseconds of one inference request (a median near 120 ms, a log-normal spread);
error and request counts are one 30-minute window. Several are built so that a naive rule
("roll back when the canary's error rate or mean latency is higher") is wrong: the judge must
weigh evidence (a test) and size (a margin), and wait when it has too little of either.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from statistics import NormalDist

from .release import HOLD, PROMOTE, ROLLBACK, Arm, Policy


@dataclass(frozen=True)
class Scenario:
    name: str
    baseline: Arm
    canary: Arm
    policy: Policy
    decision: str
    why: str


def quantile_latencies(n: int, median_ms: float = 120.0, sigma: float = 0.5) -> tuple[float, ...]:
    """n latencies at the evenly spaced quantiles of a log-normal: a sample without noise."""
    z = NormalDist()
    return tuple(
        round(median_ms * 2.718281828459045 ** (sigma * z.inv_cdf((i + 0.5) / n)), 3)
        for i in range(n)
    )


def random_latencies(
    r: random.Random, n: int, median_ms: float = 120.0, sigma: float = 0.5
) -> tuple[float, ...]:
    """n log-normal latencies drawn with `r` (to 0.1 ms, as a histogram would report them)."""
    return tuple(round(r.lognormvariate(0, sigma) * median_ms, 1) for _ in range(n))


def _scenarios() -> list[Scenario]:
    r = random.Random(20261206)
    p = Policy()
    lat = quantile_latencies
    heavy = list(lat(3000))
    for i in range(0, 3000, 50):  # 60 of the slower half become 10x slower: the mean moves
        heavy[1500 + i // 2] *= 10
    return [
        Scenario("healthy", Arm(20000, 100, random_latencies(r, 2000)),
                 Arm(20000, 103, random_latencies(r, 2000)), p, PROMOTE,
                 "same error rate and latency: the canary's 3 extra errors are noise"),
        Scenario("too-early", Arm(300, 0, lat(60)), Arm(300, 3, lat(60, 150.0)), p, HOLD,
                 "300 requests: below min_requests, no decision either way"),
        Scenario("error-regression", Arm(20000, 100, lat(2000)), Arm(20000, 400, lat(2000)),
                 p, ROLLBACK, "errors 0.5 % -> 2 %: significant and 3x the margin"),
        Scenario("latency-regression", Arm(20000, 100, lat(2000)),
                 Arm(20000, 98, lat(2000, 150.0)), p, ROLLBACK,
                 "median latency +25 %, errors unchanged"),
        Scenario("noisy-errors", Arm(5000, 2, lat(1000)), Arm(5000, 9, lat(1000)), p, HOLD,
                 "0.04 % -> 0.18 %: above the margin, but 11 errors in all (Fisher p = 0.033)"),
        Scenario("heavy-tail", Arm(20000, 100, lat(3000)), Arm(20000, 100, tuple(heavy)), p,
                 PROMOTE, "2 % of requests 10x slower: the mean is up 24 %, the median is not"),
        Scenario("significant-but-small", Arm(500000, 5000, lat(2000)),
                 Arm(500000, 5300, lat(2000)), p, PROMOTE,
                 "1.00 % -> 1.06 %: significant (p ~ 0.001) but below the 0.1-point margin"),
        Scenario("fewer-errors-slower", Arm(20000, 50, lat(2000)), Arm(20000, 0, lat(2000, 156.0)),
                 p, ROLLBACK, "no errors at all, but the median is 30 % slower"),
        Scenario("better", Arm(20000, 80, random_latencies(r, 2000)),
                 Arm(20000, 40, random_latencies(r, 2000, 100.0)), p, PROMOTE,
                 "fewer errors and faster"),
        Scenario("latency-unsure", Arm(3000, 10, lat(200)), Arm(3000, 10, lat(200, 132.0)), p,
                 HOLD, "median +10 % on 200 samples: above the margin, not significant"),
    ]  # fmt: skip


SCENARIOS: list[Scenario] = _scenarios()
