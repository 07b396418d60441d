"""Prometheus recording and alerting rules from an SLO spec (tasks "recording", "latency",
"alerts"). Return rule files as Python data: {"groups": [{"name": ..., "rules": [...]}]}; the
tests write them as JSON (which is YAML) and hand them to promtool. README, "The rules"."""

from __future__ import annotations

from typing import Any

from harness import todo

from .budget import burn_threshold  # noqa: F401  (task "alerts" needs it)
from .slo_spec import RECORD, SLO, WINDOWS, Spec, seconds  # noqa: F401  (you will need them)


def error_ratio_expr(slo: SLO, window: str) -> str:
    """PromQL for the share of `slo`'s requests that failed it over `window` ("5m"): for an
    availability SLO the requests whose status matches slo.bad_codes, for a latency SLO those
    slower than the bucket slo.le; every replica of the service counted, nobody else's."""
    return todo("error_ratio_expr: bad requests / all requests over the window, as PromQL")


def recording_rules(spec: Spec) -> dict[str, Any]:
    """A rule file recording, for every SLO of the spec and every window of WINDOWS, its error
    ratio as slo:error_ratio:rate<window> with the label slo="<the SLO's name>"."""
    return todo("recording_rules: one recording rule per SLO and window")


def alerting_rules(spec: Spec) -> dict[str, Any]:
    """A rule file of multiwindow, multi-burn-rate alerts: for every SLO and every row of
    spec.policy, an alert (labels severity and slo, annotations summary and description) that
    fires while the error ratio over the row's long AND short windows are both above its
    burn-rate threshold times the SLO's allowed error ratio."""
    return todo("alerting_rules: the policy's burn-rate alerts, per SLO")
