"""The SLO spec (given): what the service promises, which series measure it, and the alerting
policy. Read it; your rules.py turns a Spec into Prometheus rules, your budget.py does the
error-budget arithmetic. Nothing here talks to Prometheus."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The error-ratio windows every SLO records (the SRE workbook's multiwindow, multi-burn-rate set).
WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")

# The name every recording rule of an SLO uses: slo:error_ratio:rate5m, ..., slo:error_ratio:rate3d
# (with the label slo="<the SLO's name>").
RECORD = "slo:error_ratio:rate{window}"

KINDS = ("availability", "latency")
SEVERITIES = ("page", "ticket")


@dataclass(frozen=True)
class BurnAlert:
    """One row of the alerting policy: fire `severity` when the error ratio over `long` AND over
    `short` both burn the budget at least as fast as spending `budget_fraction` of the whole
    period's budget in `long` would (the burn-rate threshold budget.burn_threshold computes)."""

    severity: str  # "page" (wake someone) or "ticket" (next working day)
    long: str  # the window that measures how much budget went ("1h")
    short: str  # the window that says it is still going ("5m"), 1/12 of long
    budget_fraction: float  # 0.02: 2 % of the period's budget spent within `long`


# The SRE workbook's policy (chapter 5, "Alerting on SLOs"), for a 30-day period:
# 2 % of the budget in 1 h (burn 14.4), 5 % in 6 h (6), 10 % in 1 d (3), 10 % in 3 d (1).
POLICY = (
    BurnAlert("page", "1h", "5m", 0.02),
    BurnAlert("page", "6h", "30m", 0.05),
    BurnAlert("ticket", "1d", "2h", 0.10),
    BurnAlert("ticket", "3d", "6h", 0.10),
)


@dataclass(frozen=True)
class SLO:
    """One objective. `kind` says which series measure it:

    - "availability": `metric` is a counter of requests with a status label `code_label`; a
      request failed when that label matches the regular expression `bad_codes` (PromQL's `=~`,
      anchored at both ends). Error ratio = failed requests / all requests.
    - "latency": `metric` is a histogram's base name (series `<metric>_bucket` with label `le`,
      `<metric>_count`, `<metric>_sum`); a request is too slow when it is not in the bucket whose
      `le` label is exactly `le` (as the exporter spells it: "0.5", "1", "2.5", "1.0"...).
      Error ratio = requests slower than le / all requests.

    `selector` holds the exact label values that pick this service's series (other jobs, models
    or routes share the metric). `target` is the share of good requests promised over the spec's
    period (0.999)."""

    name: str
    kind: str
    target: float
    metric: str
    selector: dict[str, str] = field(default_factory=dict)
    code_label: str = "code"
    bad_codes: str = "5.."
    le: str = ""
    description: str = ""


@dataclass(frozen=True)
class Spec:
    """A service's SLOs, the period they are measured over ("30d", "28d"), and the policy."""

    service: str
    slos: tuple[SLO, ...]
    period: str = "30d"
    policy: tuple[BurnAlert, ...] = POLICY


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def seconds(duration: str) -> int:
    """A Prometheus duration ("5m", "1h30m", "30d") in seconds."""
    parts = re.findall(r"(\d+)([smhdw])", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    return sum(int(n) * _UNITS[u] for n, u in parts)


# The service of the README: an LLM gateway's /v1/generate, 99.9 % available and 99 % of
# requests within 2.5 s, over 30 days.
EXAMPLE = Spec(
    service="llm-gateway",
    period="30d",
    slos=(
        SLO(
            name="generate-availability",
            kind="availability",
            target=0.999,
            metric="llm_requests_total",
            selector={"job": "llm-gateway", "route": "/v1/generate"},
            code_label="code",
            bad_codes="5..",
            description="requests to /v1/generate that do not fail with a 5xx",
        ),
        SLO(
            name="generate-latency",
            kind="latency",
            target=0.99,
            metric="llm_request_duration_seconds",
            selector={"job": "llm-gateway", "route": "/v1/generate"},
            le="2.5",
            description="requests to /v1/generate answered within 2.5 s",
        ),
    ),
)
