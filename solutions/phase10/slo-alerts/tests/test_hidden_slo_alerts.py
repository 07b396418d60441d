"""Hidden tests of slo-alerts: specs nobody has seen (targets, periods, policies, metric names,
selectors, status labels, histogram spellings drawn from the run seed), traffic stories told by
the given simulator, and what every rule must record and every alert must do decided by a model
written here: the error ratio over a window is the bad requests over all requests between the
scrape a window ago and now (promtool 2.x's closed ranges; Prometheus 3's left-open ones are
accepted too), and an alert's severity fires while any of its policy rows has both windows over
the row's limit. Alerts are checked only at evaluation times where the model's answer holds for
DELAY on either side and 2 % either side of every limit, so scrape alignment, rule-group order
and a `for:` of up to 5 minutes never decide a check."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace
from typing import Any

import pytest

from harness.testing import random_for

DAY = 86400
TARGETS = [0.98, 0.99, 0.995, 0.998, 0.999, 0.9995]
PERIODS = ["7d", "28d", "30d", "90d"]
VALUES = {
    "job": ["llm-gateway", "inference", "triton", "vllm", "embedder", "asr-api"],
    "model": ["llama-3-70b", "mistral-7b", "qwen2-72b", "whisper-large", "bge-m3"],
    "route": ["/v1/generate", "/v1/chat/completions", "/v1/embeddings", "/infer"],
    "namespace": ["prod-eu", "prod-us", "serving", "ml-platform"],
    "cluster": ["gke-a", "eks-b", "onprem-1"],
}
PREFIXES = ["inference", "http", "gateway", "serving", "model_server", "api"]
BAD_CODES = ["5..", "5..|429", "50[0-4]", "5[0-9]{2}"]


# ------------------------------------------------------------------------------ specs


def random_selector(r: random.Random) -> dict[str, str]:
    keys = r.sample(sorted(VALUES), r.randint(1, 3))
    return {k: r.choice(VALUES[k]) for k in keys}


def random_slo(r: random.Random, slo_spec: Any, kind: str, i: int) -> Any:
    prefix = r.choice(PREFIXES) + r.choice(["", "_v2", "_edge"])
    name = f"{r.choice(['chat', 'gen', 'embed', 'asr', 'rank'])}-{kind[:5]}-{i}"
    target = r.choice(TARGETS)
    if kind == "availability":
        return slo_spec.SLO(
            name=name,
            kind=kind,
            target=target,
            metric=f"{prefix}_requests_total",
            selector=random_selector(r),
            code_label=r.choice(["code", "status_code", "status", "http_status"]),
            bad_codes=r.choice(BAD_CODES),
        )
    style = r.choice(["go", "python"])
    ladder = {
        "go": ["0.1", "0.25", "0.5", "1", "2.5", "5"],
        "python": ["0.1", "0.25", "0.5", "1.0", "2.5", "5.0"],
    }[style]
    return slo_spec.SLO(
        name=name,
        kind=kind,
        target=target,
        metric=f"{prefix}_{r.choice(['request_duration', 'time_to_first_token', 'latency'])}_seconds",
        selector=random_selector(r),
        le=r.choice(ladder),
    )


def random_policy(r: random.Random, slo_spec: Any) -> tuple[Any, ...]:
    if r.random() < 0.5:
        return slo_spec.POLICY
    return tuple(
        replace(a, budget_fraction=round(a.budget_fraction * r.uniform(0.8, 1.25), 4))
        for a in slo_spec.POLICY
    )


def limits(spec: Any, slo: Any, slo_spec: Any) -> list[tuple[str, int, int, float]]:
    """(severity, long s, short s, error-ratio limit) of every policy row, for `slo`."""
    period = slo_spec.seconds(spec.period)
    return [
        (
            a.severity,
            slo_spec.seconds(a.long),
            slo_spec.seconds(a.short),
            a.budget_fraction * period / slo_spec.seconds(a.long) * (1 - slo.target),
        )
        for a in spec.policy
    ]


def scaled_policy(r: random.Random, slo_spec: Any) -> tuple[Any, ...]:
    """POLICY with every budget fraction scaled by one factor far from 1 (0.4-0.55 or 1.9-2.4):
    every limit moves by more than the tests' tolerances."""
    f = r.choice([r.uniform(0.4, 0.55), r.uniform(1.9, 2.4)])
    return tuple(
        replace(a, budget_fraction=round(a.budget_fraction * f, 4)) for a in slo_spec.POLICY
    )


def random_spec(r: random.Random, slo_spec: Any, kinds: list[str], policy: Any = None) -> Any:
    """A spec whose policy rows are well apart (each limit >= 1.8 x the next) and whose every
    SLO can burn at 1.3 x its fastest page's limit without failing every request. `policy`:
    draws the policy (default random_policy)."""
    while True:
        slos = tuple(random_slo(r, slo_spec, k, i) for i, k in enumerate(kinds))
        spec = slo_spec.Spec(
            service=r.choice(VALUES["job"]),
            slos=slos,
            period=r.choice(PERIODS),
            policy=(policy or random_policy)(r, slo_spec),
        )
        ok = True
        for slo in slos:
            lim = [x[3] for x in limits(spec, slo, slo_spec)]
            ok &= lim[0] * 1.3 < 0.95 and all(a >= 1.8 * b for a, b in itertools.pairwise(lim))
        if ok:
            return spec


def slo_rules(rules: Any, promtool: Any, spec: Any, alerts: bool) -> Any:
    """The learner's recording rules (task recording, latency), or for the alerts tasks the
    learner's alerting rules over the tests' own recording rules: an alert is graded on what it
    does with right ratios, whatever the learner's recording rules do.
    (Their group names start with tests-, so a learner's group names cannot clash.)"""
    if not alerts:
        return promtool.rule_file(rules.recording_rules(spec))
    return promtool.rule_file(true_recording(spec), rules.alerting_rules(spec))


def true_recording(spec: Any) -> dict[str, Any]:
    """slo:error_ratio:rate<w>{slo=...} for every SLO and window, as the tests write them."""
    import json

    def sel(slo: Any, *extra: str) -> str:
        return (
            "{"
            + ",".join([*(f"{k}={json.dumps(v)}" for k, v in slo.selector.items()), *extra])
            + "}"
        )

    groups = []
    for slo in spec.slos:
        recs = []
        for w in ("5m", "30m", "1h", "2h", "6h", "1d", "3d"):
            if slo.kind == "availability":
                bad = f"{slo.metric}{sel(slo, f'{slo.code_label}=~{json.dumps(slo.bad_codes)}')}"
                expr = f"(sum(increase({bad}[{w}])) or vector(0)) / sum(increase({slo.metric}{sel(slo)}[{w}]))"
            else:
                every = f"sum(increase({slo.metric}_count{sel(slo)}[{w}]))"
                fast = (
                    f"sum(increase({slo.metric}_bucket{sel(slo, f'le={json.dumps(slo.le)}')}[{w}]))"
                )
                expr = f"({every} - {fast}) / {every}"
            recs.append(
                {"record": f"slo:error_ratio:rate{w}", "expr": expr, "labels": {"slo": slo.name}}
            )
        groups.append({"name": f"tests-recording-{slo.name}", "rules": recs})
    return {"groups": groups}


def describe(spec: Any) -> str:
    return (
        f"spec {spec.service!r} (period {spec.period}, "
        + ", ".join(f"{s.name}: {s.kind} {s.target:.2%} on {s.metric}" for s in spec.slos)
        + ")"
    )


# ------------------------------------------------------------------------------ the model


class Model:
    """What the recorded ratios and the alerts of one SLO must be, from the simulator's counts."""

    def __init__(self, t: Any, spec: Any, slo: Any, slo_spec: Any) -> None:
        self.t, self.slo = t, slo
        self.rows = limits(spec, slo, slo_spec)
        self.seen: dict[tuple[int, bool, float], frozenset[str]] = {}

    def ratio(self, k: int, window_s: int, left_open: bool = False) -> float:
        n = (window_s - 1) // self.t.step_s if left_open else window_s // self.t.step_s
        j = max(0, k - n)
        total = self.t.total[k] - self.t.total[j]
        return (self.t.bad[k] - self.t.bad[j]) / total if total else math.nan

    def firing(self, k: int, left_open: bool = False, scale: float = 1.0) -> frozenset[str]:
        key = (k, left_open, scale)
        if key not in self.seen:
            self.seen[key] = self._firing(k, left_open, scale)
        return self.seen[key]

    def _firing(self, k: int, left_open: bool, scale: float) -> frozenset[str]:
        return frozenset(
            sev
            for sev, long_s, short_s, lim in self.rows
            if self.ratio(k, long_s, left_open) > lim * scale
            and self.ratio(k, short_s, left_open) > lim * scale
        )

    def stable(self, k: int, around: int) -> frozenset[str] | None:
        """The firing set at scrape k if it is the same at every scrape within `around` of k,
        for both range semantics and with every limit 2 % lower or higher; else None."""
        want = self.firing(k)
        last = len(self.t.total) - 1
        for q in range(max(0, k - around), min(last, k + around) + 1):
            for left_open in (False, True):
                for scale in (0.98, 1.02):
                    if self.firing(q, left_open, scale) != want:
                        return None
        return want


def sure(m: Model, evaluation_s: int) -> list[tuple[int, frozenset[str]]]:
    """(minute, severities) at every evaluation time where the model is sure of the answer:
    it holds two evaluations, a `for: 5m` and a scrape either side."""
    step = m.t.step_s
    around = (2 * evaluation_s + 300) // step + 2
    out = []
    for k in range(0, len(m.t.total), evaluation_s // step):
        want = m.stable(k, around)
        if want is not None:
            out.append((k * step // 60, want))
    return out


def onsets(m: Model, evaluation_s: int) -> list[tuple[int, frozenset[str]]]:
    """(minute, severities) at the evaluation times just after a severity starts: its rows have
    held in every variant (both range semantics, limits 2 % either way) since one evaluation
    and 5 minutes earlier (and a scrape either side), so a `for:` of up to 5 minutes fires by
    then and a longer one does not; the other severities are off all around."""
    step, last = m.t.step_s, len(m.t.total) - 1
    hold = max(300, evaluation_s) // step + 2
    around = (2 * evaluation_s + 300) // step + 2
    variants = [(lo, scale) for lo in (False, True) for scale in (0.98, 1.02)]
    severities = {row[0] for row in m.rows}
    out = []
    every = evaluation_s // step
    for k in range(-(-hold // every) * every, last + 1, every):
        want = m.firing(k)
        if not want:
            continue
        on = all(
            sev in m.firing(q, lo, scale)
            for sev in want
            for q in range(k - hold, min(last, k + 2) + 1)
            for lo, scale in variants
        )
        off = not any(
            sev in m.firing(q, lo, scale)
            for sev in severities - want
            for q in range(max(0, k - around), min(last, k + around) + 1)
            for lo, scale in variants
        )
        if on and off:
            out.append((k * step // 60, want))
    return out


def draw(make: Any, wanted: Any, evaluation_s: int, what: str) -> tuple[Model, list[Any]]:
    """A model from make() whose sure checks satisfy wanted(checks) (a few tries)."""
    for _ in range(40):
        m = make()
        checks = sure(m, evaluation_s)
        if wanted(checks):
            return m, checks
    raise AssertionError(f"test data: no story where {what} in 40 tries")


def alert_story(
    lab: Any, spec: Any, drawn: list[tuple[Model, list[Any]]], why: str, evaluation_s: int
) -> Any:
    """A story checking every SLO's firing alerts at every evaluation time where the model is
    sure of them, and just after every onset (onsets())."""
    story = lab.Story(drawn[0][0].t.step_s)
    for m, checks in drawn:
        story.series += m.t.series
        sure_at = {minute for minute, _ in checks}
        for minute, want in checks:
            story.firing(m.slo.name, minute, set(want), f"{why} ({describe(spec)})")
        for minute, want in onsets(m, evaluation_s):
            if minute not in sure_at:
                story.firing(
                    m.slo.name,
                    minute,
                    set(want),
                    f"{why}, minutes after both windows crossed ({describe(spec)})",
                )
    return story


def burn(slo: Any, factor: float) -> float:
    """The bad-request share that burns `slo`'s budget `factor` times as fast as allowed."""
    return min(1.0, factor * (1 - slo.target))


def healthy(r: random.Random, slo: Any, lims: list[float], minutes: int, traffic: Any) -> Any:
    """A healthy phase: under 40 % of the lowest limit (`lims` are burn rates)."""
    return traffic.Phase(
        minutes, r.uniform(0.0, 0.4) * min(lims) * (1 - slo.target), r.uniform(0.7, 1.3)
    )


def run_alerts(
    lab: Any, rules: Any, promtool: Any, spec: Any, stories: list[Any], evaluation: str
) -> list[str]:
    return lab.run(slo_rules(rules, promtool, spec, alerts=True), stories, evaluation)


# ------------------------------------------------------------------------------ budget


def test_budget_random_against_formulas(budget: Any, kata_random: random.Random) -> None:
    r = kata_random
    for _ in range(300):
        target = r.choice([*TARGETS, round(r.uniform(0.9, 0.99999), 5)])
        period = r.choice([7, 28, 30, 90, 365]) * DAY
        allowed = 1 - target
        got = budget.error_budget(target, period)
        assert got == pytest.approx(allowed * period, rel=1e-9), (
            f"error_budget({target}, {period}) should be {allowed * period}, got {got}"
        )
        ratio = r.uniform(0, 1)
        got = budget.burn_rate(ratio, target)
        assert got == pytest.approx(ratio / allowed, rel=1e-9), (
            f"burn_rate({ratio}, {target}) should be {ratio / allowed}, got {got}"
        )
        fraction, window = (
            r.uniform(0.001, 0.5),
            r.choice([300, 1800, 3600, 7200, 6 * 3600, DAY, 3 * DAY]),
        )
        got = budget.burn_threshold(fraction, window, period)
        assert got == pytest.approx(fraction * period / window, rel=1e-9), (
            f"burn_threshold({fraction}, {window}, {period}) should be {fraction * period / window}, got {got}"
        )
        # one draw in ten: no traffic yet, the whole budget left
        total = 0 if r.random() < 0.1 else r.randint(1, 10**7)
        bad = r.randint(0, total // r.choice([1, 10, 1000]))
        want = 1 - (bad / total) / allowed if total else 1.0
        got = budget.budget_remaining(bad, total, target)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (
            f"budget_remaining({bad}, {total}, {target}) should be {want}, got {got}"
        )
        remaining, rate = r.uniform(-0.5, 1.0), r.choice([0.0, r.uniform(0.01, 50)])
        want = 0.0 if remaining <= 0 else (math.inf if rate <= 0 else remaining * period / rate)
        got = budget.time_to_exhaustion(remaining, rate, period)
        assert got == pytest.approx(want, rel=1e-9), (
            f"time_to_exhaustion({remaining}, {rate}, {period}) should be {want}, got {got}"
        )
        threshold = r.uniform(0.5, 20)
        needed = threshold * allowed
        ratio = r.uniform(0, min(1.0, 3 * needed))
        want = math.inf if ratio < needed else window * needed / ratio
        got = budget.detection_time(ratio, target, threshold, window)
        assert got == pytest.approx(want, rel=1e-9), (
            f"detection_time({ratio}, {target}, {threshold}, {window}) should be {want}, got {got}"
        )


# ------------------------------------------------------------------------------ recording


def ratio_story(
    lab: Any, traffic: Any, slo_spec: Any, spec: Any, r: random.Random, why: str, **sim: Any
) -> Any:
    """Each SLO's service through 4 to 6 random phases (about 10 h, loads and ratios changing,
    a replica or two restarting), its recorded ratio checked for every window at three times
    (end, and two random minutes)."""
    story = lab.Story(60)
    for slo in spec.slos:
        phases = [
            traffic.Phase(
                10 * r.randint(2, 15),
                r.choice([0.0, r.uniform(0, 0.002), r.uniform(0, 0.05), r.uniform(0.2, 1.0)]),
                r.uniform(0.3, 3.0),
            )
            for _ in range(r.randint(4, 6))
        ]
        t = traffic.simulate(
            slo,
            phases,
            step_s=60,
            rnd=r,
            instances=r.randint(1, 4),
            restarts=r.randint(1, 2),
            **sim,
        )
        story.series += t.series
        model = Model(t, spec, slo, slo_spec)
        end = sum(p.minutes for p in phases)
        for minute in {end, 10 * r.randint(1, end // 10), 10 * r.randint(end // 20, end // 10)}:
            for w in slo_spec.WINDOWS:
                ws = slo_spec.seconds(w)
                wants = [model.ratio(minute, ws), model.ratio(minute, ws, left_open=True)]
                story.ratio(slo.name, w, minute, wants, f"{why} ({describe(spec)})")
    return story


@pytest.mark.kata_gate(
    "slo:error_ratio:rate<window> is wrong for availability SLOs whose metric, selector, status "
    "label and bad-status pattern are not the example's"
)
def test_recording_random_specs(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, ["availability"] * r.randint(2, 3))
    story = ratio_story(lab, traffic, slo_spec, spec, r, "random phases")
    failed = lab.run(slo_rules(rules, promtool, spec, alerts=False), [story], "10m")
    assert not failed, "recording_rules: " + "\n".join(failed[:4])


def long_story(lab: Any, traffic: Any, slo_spec: Any, spec: Any, r: random.Random, why: str) -> Any:
    """Each SLO's service over 80-96 h at 5-minute scrapes, in phases of 2-12 h whose error
    ratios change from day to day (drawn until the last day's and the last three days' ratios
    differ by over 20 %), a replica restarting now and then; every window of at least two scrapes
    checked at the end and at two random hours after the first day (evaluate every hour)."""
    story = lab.Story(300)
    for slo in spec.slos:
        for _ in range(40):
            phases, left = [], 60 * r.randint(80, 96)
            while left:
                minutes = min(left, 60 * r.randint(2, 12))
                bad = r.choice([0.0, r.uniform(0, 0.002), r.uniform(0, 0.05), r.uniform(0.1, 0.6)])
                phases.append(traffic.Phase(minutes, bad, r.uniform(0.3, 3.0)))
                left -= minutes
            t = traffic.simulate(
                slo, phases, step_s=300, rnd=r, instances=r.randint(1, 3), restarts=r.randint(0, 2)
            )
            model = Model(t, spec, slo, slo_spec)
            end = len(t.total) - 1
            day, days = model.ratio(end, DAY), model.ratio(end, 3 * DAY)
            if abs(day - days) > 0.2 * max(day, days):
                break
        else:
            raise AssertionError(f"test data: no long story for {slo.name} in 40 tries")
        story.series += t.series
        hours = end * 300 // 3600
        for hour in {hours, r.randint(25, hours - 1), r.randint(25, hours - 1)}:
            for w in slo_spec.WINDOWS:
                ws = slo_spec.seconds(w)
                if ws < 600:
                    continue  # one scrape apart: no left-open range holds two samples
                k = hour * 12
                wants = [model.ratio(k, ws), model.ratio(k, ws, left_open=True)]
                story.ratio(slo.name, w, hour * 60, wants, f"{why} ({describe(spec)})")
    return story


@pytest.mark.kata_gate(
    "slo:error_ratio:rate<window> of an availability SLO is wrong on a story of 3-4 days, where "
    "the last day's, the last three days' and the whole story's error ratios differ"
)
def test_recording_long_windows(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, ["availability"] * r.randint(1, 2))
    story = long_story(lab, traffic, slo_spec, spec, r, "3-4 days of changing error ratios")
    failed = lab.run(slo_rules(rules, promtool, spec, alerts=False), [story], "1h")
    assert not failed, "recording_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "slo:error_ratio:rate<window> is not failed requests / all requests when replicas serve "
    "different loads and fail at different ratios"
)
def test_recording_replicas_fail_differently(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, ["availability", "availability"])
    story = ratio_story(lab, traffic, slo_spec, spec, r, "one bad replica", skew=True)
    failed = lab.run(slo_rules(rules, promtool, spec, alerts=False), [story], "10m")
    assert not failed, "recording_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "slo:error_ratio:rate<window> is missing instead of 0 while no request has failed yet (no "
    "bad-status series exists): the alerts that read it have no data"
)
def test_recording_no_failure_yet(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    """A service that has never failed has no series for a bad status at all: its error ratio
    is 0, not missing (else its alerts cannot even evaluate)."""
    import re

    r = random_for()
    spec = random_spec(r, slo_spec, ["availability"])
    slo = spec.slos[0]
    t = traffic.simulate(slo, [traffic.Phase(90, 0.0)], rnd=r, decoys=False)
    series = [
        s for s in t.series if not re.search(f'{slo.code_label}="(?:{slo.bad_codes})"', s["series"])
    ]
    assert len(series) < len(t.series), "test data: the bad-status series were dropped"
    story = lab.Story(60, series=series)
    for w in slo_spec.WINDOWS:
        story.ratio(slo.name, w, 90, [0.0], f"no bad-status series at all ({describe(spec)})")
    failed = lab.run(slo_rules(rules, promtool, spec, alerts=False), [story], "10m")
    assert not failed, "recording_rules: " + "\n".join(failed[:4])


# ------------------------------------------------------------------------------ latency


@pytest.mark.kata_gate(
    "slo:error_ratio:rate<window> of a latency SLO is not the share of requests above its le "
    "bucket, on histograms with other names, selectors and bucket spellings"
)
def test_latency_random_specs(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, ["latency"] * r.randint(2, 3))
    story = ratio_story(lab, traffic, slo_spec, spec, r, "random phases", skew=r.random() < 0.5)
    failed = lab.run(slo_rules(rules, promtool, spec, alerts=False), [story], "10m")
    assert not failed, "recording_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "slo:error_ratio:rate<window> of a latency SLO is wrong when le is spelled '1' (Go client) "
    "or '1.0' (Python client)"
)
def test_latency_le_spellings(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, ["latency", "latency"])
    a, b = spec.slos
    spec = replace(spec, slos=(replace(a, le="1"), replace(b, le=r.choice(["1.0", "5.0", "10.0"]))))
    story = ratio_story(lab, traffic, slo_spec, spec, r, "whole-number buckets")
    failed = lab.run(slo_rules(rules, promtool, spec, alerts=False), [story], "10m")
    assert not failed, "recording_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "slo:error_ratio:rate<window> of a latency SLO is wrong on a story of 3-4 days, where the "
    "last day's, the last three days' and the whole story's error ratios differ"
)
def test_latency_long_windows(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, ["latency"] * r.randint(1, 2))
    story = long_story(lab, traffic, slo_spec, spec, r, "3-4 days of changing error ratios")
    failed = lab.run(slo_rules(rules, promtool, spec, alerts=False), [story], "1h")
    assert not failed, "recording_rules: " + "\n".join(failed[:4])


# ------------------------------------------------------------------------------ alerts


def lims_of(spec: Any, slo: Any, slo_spec: Any) -> list[float]:
    return [x[3] / (1 - slo.target) for x in limits(spec, slo, slo_spec)]  # as burn rates


@pytest.mark.kata_gate(
    "the page does not fire within minutes of a fast burn's two windows crossing the threshold, "
    "or keeps firing after the short window has recovered"
)
def test_alerts_fast_burn_pages(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    """Healthy, then a burn 2.5-5 times the fastest page's threshold for 60-90 min, then
    healthy: the page fires within minutes of both windows crossing, and stops once the short
    window falls back."""
    r = random_for()
    spec = random_spec(
        r, slo_spec, r.sample(["availability", "latency", "availability"], r.randint(2, 3))
    )
    drawn = []
    for slo in spec.slos:
        lims = lims_of(spec, slo, slo_spec)

        def make(slo: Any = slo, lims: list[float] = lims) -> Model:
            phases = [
                healthy(r, slo, lims, r.randint(90, 180), traffic),
                traffic.Phase(
                    r.randint(60, 90), burn(slo, r.uniform(2.5, 5) * lims[0]), r.uniform(0.7, 1.5)
                ),
                healthy(r, slo, lims, r.randint(90, 150), traffic),
            ]
            return Model(traffic.simulate(slo, phases, rnd=r), spec, slo, slo_spec)

        drawn.append(draw(make, lambda c: any("page" in w for _, w in c), 300, "a fast burn pages"))
    story = alert_story(lab, spec, drawn, "a fast burn", 300)
    failed = run_alerts(lab, rules, promtool, spec, [story], "5m")
    assert not failed, "alerting_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "the alerts do not follow the spec's own policy (every budget fraction about half or twice "
    "the workbook's): a burn between the spec's and the workbook's fastest page limits pages "
    "only if the spec's rows say so"
)
def test_alerts_follow_the_spec_policy(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, r.sample(["availability", "latency"], 2), scaled_policy)
    workbook = replace(spec, policy=slo_spec.POLICY)
    drawn = []
    for slo in spec.slos:
        lims = lims_of(spec, slo, slo_spec)
        low, high = sorted((lims[0], lims_of(workbook, slo, slo_spec)[0]))
        for _ in range(40):
            phases = [
                healthy(r, slo, lims, r.randint(90, 150), traffic),
                traffic.Phase(
                    r.randint(60, 90),
                    burn(slo, r.uniform(1.15 * low, 0.85 * high)),
                    r.uniform(0.7, 1.5),
                ),
                healthy(r, slo, lims, r.randint(90, 150), traffic),
            ]
            m = Model(traffic.simulate(slo, phases, rnd=r), spec, slo, slo_spec)
            checks = sure(m, 300)
            other = Model(m.t, workbook, slo, slo_spec)
            if any(other.firing(minute) != want for minute, want in checks):
                break
        else:
            raise AssertionError(
                f"test data: no story where {slo.name}'s policy matters in 40 tries"
            )
        drawn.append((m, checks))
    story = alert_story(
        lab, spec, drawn, "a burn between the spec's and the workbook's limits", 300
    )
    failed = run_alerts(lab, rules, promtool, spec, [story], "5m")
    assert not failed, "alerting_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "the page does not follow a burn between the 6 h / 30 m and the 1 h / 5 m thresholds: on "
    "within minutes of both windows crossing, off once the 30 m window recovers"
)
def test_alerts_medium_burn_pages_on_the_6h_window(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, r.sample(["availability", "latency"], 2))
    drawn = []
    for slo in spec.slos:
        lims = lims_of(spec, slo, slo_spec)

        def make(slo: Any = slo, lims: list[float] = lims) -> Model:
            phases = [
                healthy(r, slo, lims, r.randint(60, 120), traffic),
                traffic.Phase(
                    r.randint(420, 480), burn(slo, r.uniform(1.2 * lims[1], 0.8 * lims[0]))
                ),
                healthy(r, slo, lims, 60, traffic),
            ]
            return Model(traffic.simulate(slo, phases, rnd=r), spec, slo, slo_spec)

        drawn.append(
            draw(make, lambda c: any("page" in w for _, w in c), 300, "a medium burn pages")
        )
    story = alert_story(lab, spec, drawn, "a medium burn", 300)
    failed = run_alerts(lab, rules, promtool, spec, [story], "5m")
    assert not failed, "alerting_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "the alerts are wrong in slow burns (under every page's threshold, over a ticket's: the "
    "1 d / 2 h row's or only the 3 d / 6 h row's): a ticket must fire and no page, and stop "
    "once the short windows recover"
)
def test_alerts_slow_burns_open_tickets(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, r.sample(["availability", "latency"], 2))
    drawn = []
    for i, slo in enumerate(spec.slos):
        lims = lims_of(spec, slo, slo_spec)
        low, high = (1.25 * lims[2], 0.8 * lims[1]) if i == 0 else (1.3 * lims[3], 0.75 * lims[2])

        def make(
            slo: Any = slo, lims: list[float] = lims, low: float = low, high: float = high
        ) -> Model:
            phases = [
                healthy(r, slo, lims, r.choice([240, 360, 480]), traffic),
                traffic.Phase(r.choice([60 * 60, 66 * 60]), burn(slo, r.uniform(low, high))),
                # the burn stops: the ticket resets with its short windows (2 h, 6 h), while
                # a ticket on the long windows alone would keep firing for days
                healthy(r, slo, lims, r.choice([600, 720]), traffic),
            ]
            return Model(traffic.simulate(slo, phases, step_s=300, rnd=r), spec, slo, slo_spec)

        drawn.append(
            draw(
                make,
                lambda c: any(w == {"ticket"} for _, w in c) and not any("page" in w for _, w in c),
                1800,
                "a slow burn tickets and never pages",
            )
        )
    story = alert_story(lab, spec, drawn, "a slow burn", 1800)
    failed = run_alerts(lab, rules, promtool, spec, [story], "30m")
    assert not failed, "alerting_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "an alert fires on blips that fill a short window but stay under every long window's threshold"
)
def test_alerts_blips_stay_quiet(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(
        r, slo_spec, r.sample(["availability", "latency", "latency"], r.randint(2, 3))
    )
    story = lab.Story(60)
    for slo in spec.slos:
        lims = lims_of(spec, slo, slo_spec)
        budget = 1 - slo.target
        x = lims[0] * budget  # the fastest page's limit, as an error ratio

        def make(
            slo: Any = slo, lims: list[float] = lims, budget: float = budget, x: float = x
        ) -> tuple[Model, int]:
            # About 7 x's worth of bad requests per blip: over 5 min that is 1.4 x, over 1 h
            # 0.12 x; the 1 d and 3 d windows hold only the hours since the start, so the
            # model decides whether a ticket's windows stay under (else another draw).
            mass = r.uniform(6, 8) * x
            minutes = max(r.randint(2, 4), math.ceil(mass / 0.95))
            phases = []
            for _ in range(3):
                phases += [
                    traffic.Phase(r.randint(150, 300), r.uniform(0, 0.1) * min(lims) * budget),
                    traffic.Phase(minutes, mass / minutes),
                ]
            phases.append(traffic.Phase(120, 0.0))
            return Model(traffic.simulate(slo, phases, rnd=r), spec, slo, slo_spec), minutes

        for _ in range(40):
            model, minutes = make()
            last = len(model.t.total) - 1
            quiet = not any(
                model.firing(k, lo, 0.9) for k in range(last + 1) for lo in (False, True)
            )
            loud = any(
                model.ratio(k, short, lo) > lim
                for k in range(last + 1)
                for lo in (False, True)
                for _, _, short, lim in model.rows
            )
            if quiet and loud:
                break
        else:
            raise AssertionError(
                f"test data: no quiet blips for {slo.name} that fill a short window in 40 tries"
            )
        story.series += model.t.series
        story.never(slo.name, last, f"blips of {minutes} min ({describe(spec)})")
    stories = [story]
    failed = run_alerts(lab, rules, promtool, spec, stories, "5m")
    assert not failed, "alerting_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "an alert fires in a healthy month (every window under 50 % of its threshold)"
)
def test_alerts_healthy_month_is_quiet(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, ["availability", "latency"])
    # 5-minute scrapes and 3-hour evaluations: a month costs promtool 1 s of CPU (1-minute
    # scrapes and hourly evaluations: 10 s); a healthy month never comes near a threshold.
    story = lab.Story(300)
    month = 30 * 24 * 60
    for slo in spec.slos:
        lims = lims_of(spec, slo, slo_spec)
        phases, left = [], month
        while left:
            minutes = min(left, r.choice([60, 120, 240, 480, 720]))
            phases.append(
                traffic.Phase(
                    minutes, r.uniform(0, 0.5) * min(lims) * (1 - slo.target), r.uniform(0.3, 2.0)
                )
            )
            left -= minutes
        t = traffic.simulate(slo, phases, step_s=300, rnd=r, instances=1, decoys=False)
        model = Model(t, spec, slo, slo_spec)
        assert not any(model.firing(k, False, 0.9) for k in range(0, len(t.total), 6)), (
            f"test data: {slo.name}'s month is healthy"
        )
        story.series += t.series
        story.never(slo.name, month, f"a healthy month ({describe(spec)})")
    failed = run_alerts(lab, rules, promtool, spec, [story], "3h")
    assert not failed, "alerting_rules: " + "\n".join(failed[:4])


def test_alerts_random_stories(
    rules: Any, promtool: Any, slo_spec: Any, traffic: Any, lab: Any
) -> None:
    """Healthy stretches, fast and medium burns, outages and blips in random order over 12 h."""
    r = random_for()
    spec = random_spec(
        r, slo_spec, r.sample(["availability", "latency", "availability", "latency"], 3)
    )
    drawn = []
    for slo in spec.slos:
        lims = lims_of(spec, slo, slo_spec)
        phases, left = [], 12 * 60
        while left > 0:
            kind = r.choice(["healthy", "healthy", "fast", "medium", "outage", "blip"])
            minutes = {
                "healthy": r.randint(30, 180),
                "fast": r.randint(10, 60),
                "medium": r.randint(60, 240),
                "outage": r.randint(3, 20),
                "blip": r.randint(1, 3),
            }[kind]
            minutes = min(minutes, left)
            bad = {
                "healthy": r.uniform(0, 0.5) * min(lims) * (1 - slo.target),
                "fast": burn(slo, r.uniform(1.1, 3) * lims[0]),
                "medium": burn(slo, r.uniform(lims[1], lims[0])),
                "outage": 1.0,
                "blip": burn(slo, r.uniform(1, 4) * lims[0]),
            }[kind]
            phases.append(traffic.Phase(minutes, bad, r.uniform(0.5, 2.0)))
            left -= minutes
        m = Model(traffic.simulate(slo, phases, rnd=r), spec, slo, slo_spec)
        drawn.append((m, sure(m, 300)))
    story = alert_story(lab, spec, drawn, "a random story", 300)
    failed = run_alerts(lab, rules, promtool, spec, [story], "5m")
    assert not failed, "alerting_rules: " + "\n".join(failed[:4])


@pytest.mark.kata_gate(
    "an alerting rule lacks the labels severity and slo or the annotations summary and description"
)
def test_alerts_labels_and_annotations_random_spec(
    rules: Any, promtool: Any, slo_spec: Any
) -> None:
    r = random_for()
    spec = random_spec(r, slo_spec, ["availability", "latency", "availability"])
    got = rules.alerting_rules(spec)
    promtool.check_rules(promtool.rule_file(true_recording(spec), got))
    alerts = [x for g in got["groups"] for x in g["rules"] if "alert" in x]
    for slo in spec.slos:
        severities = {
            (a.get("labels") or {}).get("severity")
            for a in alerts
            if (a.get("labels") or {}).get("slo") == slo.name
        }
        assert severities == {"page", "ticket"}, (
            f"alerting_rules({describe(spec)}): {slo.name} needs page and ticket alerts labelled "
            f"slo={slo.name!r}; found {severities}"
        )
    for a in alerts:
        notes = a.get("annotations") or {}
        assert isinstance(notes.get("summary"), str) and notes["summary"].strip(), (
            f"alerting_rules: alert {a.get('alert')!r} has no summary annotation"
        )
        assert isinstance(notes.get("description"), str) and notes["description"].strip(), (
            f"alerting_rules: alert {a.get('alert')!r} has no description annotation"
        )
