"""Fixtures of the slo-alerts tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest


@pytest.fixture(scope="module")
def slo_spec(kata: Any) -> Any:
    """slo_spec.py (given): SLO, Spec, BurnAlert, POLICY, WINDOWS, RECORD, EXAMPLE, seconds."""
    return kata.module("slo_spec")


@pytest.fixture(scope="module")
def traffic(kata: Any) -> Any:
    """traffic.py (given): the simulated service's series (Phase, simulate)."""
    return kata.module("traffic")


@pytest.fixture(scope="module")
def promtool(kata: Any) -> Any:
    """promtool.py (given): check_rules, run_tests, rule_file, failures."""
    return kata.module("promtool")


@pytest.fixture(scope="module")
def budget(kata: Any) -> Any:
    """budget.py (yours): task "budget"."""
    return kata.module("budget")


@pytest.fixture(scope="module")
def rules(kata: Any) -> Any:
    """rules.py (yours): tasks "recording", "latency", "alerts"."""
    return kata.module("rules")


@dataclass
class Story:
    """One promtool test group: the series of a few SLOs' services and the checks on them,
    each check with a sentence that says what it expects (the failure message)."""

    step_s: int
    series: list[dict[str, str]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[tuple[str, int], str] = field(default_factory=dict)
    # a check's plain query (what the learner's rules give), for the failure message
    plain: dict[tuple[str, int], str] = field(default_factory=dict)
    # a ratio check's accepted values, to say how far off the learner's value is
    wants: dict[tuple[str, int], list[float]] = field(default_factory=dict)

    def add(self, expr: str, minute: int, samples: list[dict[str, Any]], note: str) -> None:
        self.checks.append({"expr": expr, "eval_time": f"{minute}m", "exp_samples": samples})
        self.notes[(expr, minute * 60)] = note

    def firing(self, slo: str, minute: int, severities: set[str], why: str) -> None:
        """At `minute`, the firing alerts of SLO `slo` are exactly one per severity in
        `severities` (ALERTS{alertstate="firing"}, by the labels slo and severity)."""
        expr = f'max by (slo, severity) (ALERTS{{alertstate="firing",slo="{slo}"}})'
        samples = [{"labels": f'{{slo="{slo}",severity="{s}"}}', "value": 1} for s in severities]
        want = " and ".join(sorted(severities)) or "no alert"
        self.add(expr, minute, samples, f"{why}: at {minute} min, {slo} should fire {want}")

    def never(self, slo: str, minute: int, why: str) -> None:
        """No alert of `slo` fired at any evaluation up to `minute`."""
        expr = f'count by (slo, severity) (count_over_time(ALERTS{{alertstate="firing",slo="{slo}"}}[{minute}m]))'
        self.add(expr, minute, [], f"{why}: {slo} should never fire in the first {minute} min")

    def ratio(self, slo: str, window: str, minute: int, wants: list[float], why: str) -> None:
        """slo:error_ratio:rate<window>{slo=...} at `minute` is one of `wants` (relative 1e-6)."""
        got = f'sum by (slo) (slo:error_ratio:rate{window}{{slo="{slo}"}})'
        terms = " + ".join(
            f"(abs({got} - {w!r}) <= bool {1e-9 + 1e-6 * abs(w)!r})" for w in dict.fromkeys(wants)
        )
        expr = f"clamp_max({terms}, 1)"
        self.plain[(expr, minute * 60)] = got
        self.wants[(expr, minute * 60)] = list(wants)
        want = " or ".join(f"{w:.10g}" for w in dict.fromkeys(wants))
        self.add(
            expr,
            minute,
            [{"labels": f'{{slo="{slo}"}}', "value": 1}],
            f"{why}: slo:error_ratio:rate{window}{{slo={slo!r}}} at {minute} min should be {want}",
        )

    def group(self) -> dict[str, Any]:
        return {
            "interval": f"{self.step_s}s",
            "input_series": self.series,
            "promql_expr_test": self.checks,
        }


def _off(wants: list[float], got: str) -> str:
    """How far promtool's value ('{slo="x"} 2.0006E-02') is from the nearest accepted one."""
    import math
    import re

    m = re.search(r"\}\s*(\S+)\s*$", got)
    try:
        value = float(m.group(1)) if m else math.nan
    except ValueError:
        value = math.nan
    near = [w for w in wants if not math.isnan(w)]
    if math.isnan(value) or not near:
        return ""
    w = min(near, key=lambda x: abs(value - x))
    rel = f", {abs(value - w) / abs(w):.2g} relative" if w else ""
    return f"; off by {value - w:+.3g}{rel}"


def _seconds(go: str) -> int:
    """A Go duration as promtool prints it ("2h5m0s", "1d", "90m") in seconds."""
    import re

    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    return int(sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)(ms|[smhdwy])", go)))


class Lab:
    """Runs stories through promtool and words what failed."""

    def __init__(self, promtool: Any) -> None:
        self.promtool = promtool

    def run(
        self, rules: dict[str, Any], stories: list[Story], evaluation_interval: str
    ) -> list[str]:
        """The failed checks' sentences (empty: every check passed)."""
        ok, out = self.promtool.run_tests(rules, [s.group() for s in stories], evaluation_interval)
        if ok:
            return []
        notes: dict[tuple[str, int], str] = {}
        wants: dict[tuple[str, int], list[float]] = {}
        for s in stories:
            notes.update(s.notes)
            wants.update(s.wants)
        failed = [(e, _seconds(w), got) for e, w, _exp, got in self.promtool.failures(out)]
        values = self._values(rules, stories, failed, evaluation_interval)
        said = []
        for expr, when, got in failed:
            note = notes.get((expr, when), f"{expr} at {when} s")
            value = values.get((expr, when), got) or "nothing"
            off = _off(wants.get((expr, when), []), value)
            said.append(f"{note} (promtool got: {value}{off})")
        return said or [f"promtool test rules failed:\n{out[-2000:]}"]

    def _values(
        self, rules: dict[str, Any], stories: list[Story], failed: list[Any], interval: str
    ) -> dict[tuple[str, int], str]:
        """What the learner's rules gave for the failed ratio checks (their plain queries, run
        again and expected to be empty, so that promtool prints every value)."""
        groups, back = [], {}
        for s in stories:
            asks = []
            for expr, when, _ in failed[:8]:
                plain = s.plain.get((expr, when))
                if plain:
                    asks.append({"expr": plain, "eval_time": f"{when}s", "exp_samples": []})
                    back[(plain, when)] = (expr, when)
            if asks:
                groups.append({**s.group(), "promql_expr_test": asks})
        if not groups:
            return {}
        _, out = self.promtool.run_tests(rules, groups, interval)
        return {
            back[(e, _seconds(w))]: got
            for e, w, _, got in self.promtool.failures(out)
            if (e, _seconds(w)) in back
        }


@pytest.fixture(scope="module")
def lab(promtool: Any) -> Lab:
    """Story (one promtool test group) and Lab (runs stories, words failures)."""
    lab = Lab(promtool)
    lab.Story = Story  # type: ignore[attr-defined]
    return lab
