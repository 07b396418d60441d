"""Prometheus recording and alerting rules from an SLO spec: reference."""

from __future__ import annotations

import json
from typing import Any

from .budget import burn_threshold
from .slo_spec import RECORD, SLO, WINDOWS, Spec, seconds


def _selector(labels: dict[str, str], extra: str = "") -> str:
    """{job="x",route="/v1"} with `extra` matchers appended; json.dumps quotes and escapes as
    PromQL's double-quoted strings do."""
    parts = [f"{k}={json.dumps(v)}" for k, v in labels.items()]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}"


def error_ratio_expr(slo: SLO, window: str) -> str:
    """PromQL for the share of `slo`'s requests that failed it over `window`: a ratio of sums
    over every replica (never an average of ratios)."""
    if slo.kind == "availability":
        bad = f"{slo.metric}{_selector(slo.selector, f'{slo.code_label}=~{json.dumps(slo.bad_codes)}')}"
        every = f"{slo.metric}{_selector(slo.selector)}"
        # A service with no 5xx yet has no 5xx series: count that as zero errors, not no data.
        return f"(sum(rate({bad}[{window}])) or vector(0)) / sum(rate({every}[{window}]))"
    if slo.kind == "latency":
        fast = f"{slo.metric}_bucket{_selector(slo.selector, f'le={json.dumps(slo.le)}')}"
        every = f"{slo.metric}_count{_selector(slo.selector)}"
        return f"1 - sum(rate({fast}[{window}])) / sum(rate({every}[{window}]))"
    raise ValueError(f"SLO {slo.name!r}: unknown kind {slo.kind!r}")


def recording_rules(spec: Spec) -> dict[str, Any]:
    """A rule file: per SLO, one group recording its error ratio over every window of WINDOWS as
    slo:error_ratio:rate<window>{slo="<name>"}."""
    groups = []
    for slo in spec.slos:
        rules = [
            {
                "record": RECORD.format(window=w),
                "expr": error_ratio_expr(slo, w),
                "labels": {"slo": slo.name},
            }
            for w in WINDOWS
        ]
        groups.append({"name": f"slo-recording-{slo.name}", "rules": rules})
    return {"groups": groups}


def alerting_rules(spec: Spec) -> dict[str, Any]:
    """A rule file: per SLO, one alert per severity of the policy, firing when any of its rows
    holds: the error ratio over the long AND the short window above threshold x (1 - target)."""
    period = seconds(spec.period)
    groups = []
    for slo in spec.slos:
        budget = 1.0 - slo.target
        rules = []
        for severity in dict.fromkeys(a.severity for a in spec.policy):
            conditions = []
            for a in spec.policy:
                if a.severity != severity:
                    continue
                limit = burn_threshold(a.budget_fraction, seconds(a.long), period) * budget
                sel = _selector({"slo": slo.name})
                long_r = RECORD.format(window=a.long) + sel
                short_r = RECORD.format(window=a.short) + sel
                conditions.append(f"({long_r} > {limit!r} and {short_r} > {limit!r})")
            rules.append(
                {
                    "alert": f"ErrorBudgetBurn{severity.capitalize()}",
                    "expr": "\n or ".join(conditions),
                    "labels": {"severity": severity, "slo": slo.name},
                    "annotations": {
                        "summary": f"{spec.service}: SLO {slo.name} is burning its error budget",
                        "description": (
                            f"{slo.name} ({slo.target:.4%} over {spec.period}): the error ratio "
                            "is {{ $value | humanizePercentage }}, fast enough to warrant a "
                            f"{severity}."
                        ),
                    },
                }
            )
        groups.append({"name": f"slo-alerts-{slo.name}", "rules": rules})
    return {"groups": groups}
