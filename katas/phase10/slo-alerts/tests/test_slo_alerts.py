"""Public tests: the README's worked numbers and its example service (slo_spec.EXAMPLE) through
promtool. The hidden tests do the same on specs, targets, periods, metric names, traffic and
stories nobody has seen, against a model of what each alert must do."""

from __future__ import annotations

import math
from typing import Any

import pytest

DAY = 86400

# ------------------------------------------------------------------------------ budget


def test_budget_worked_examples(budget: Any) -> None:
    assert budget.error_budget(0.999, 30 * DAY) == pytest.approx(2592.0), (
        "99.9 % over 30 days allows 43.2 minutes of total outage"
    )
    assert budget.burn_rate(0.0144, 0.999) == pytest.approx(14.4), (
        "1.44 % errors burn 99.9 % at 14.4x"
    )
    assert budget.burn_rate(0.001, 0.999) == pytest.approx(1.0), "exactly the allowed ratio: burn 1"
    for fraction, window_h, want in [
        (0.02, 1, 14.4),
        (0.05, 6, 6.0),
        (0.10, 24, 3.0),
        (0.10, 72, 1.0),
    ]:
        got = budget.burn_threshold(fraction, window_h * 3600, 30 * DAY)
        assert got == pytest.approx(want), (
            f"{fraction:.0%} of a 30-day budget in {window_h} h is a burn of {want}, got {got}"
        )
    assert budget.burn_threshold(0.02, 3600, 28 * DAY) == pytest.approx(13.44), "28-day period"
    assert budget.budget_remaining(5, 10_000, 0.999) == pytest.approx(0.5), (
        "5 failures in 10000 requests spend half of 99.9 %'s budget"
    )
    assert budget.budget_remaining(30, 10_000, 0.999) == pytest.approx(-2.0), "overspent: negative"
    assert budget.time_to_exhaustion(0.5, 14.4, 30 * DAY) == pytest.approx(90_000.0), (
        "half the budget at 14.4x lasts 25 hours"
    )
    assert budget.detection_time(1.0, 0.999, 14.4, 3600) == pytest.approx(51.84), (
        "a total outage trips the 1 h / 14.4x page after 0.864 minutes"
    )


def test_budget_edges(budget: Any) -> None:
    assert budget.budget_remaining(0, 0, 0.99) == 1.0, "no traffic yet: the whole budget is left"
    assert budget.time_to_exhaustion(0.3, 0.0, 30 * DAY) == math.inf, "no burn: never exhausted"
    assert budget.time_to_exhaustion(-0.1, 2.0, 30 * DAY) == 0.0, "overspent: exhausted now"
    assert budget.detection_time(0.01, 0.999, 14.4, 3600) == math.inf, (
        "1 % errors never reach 14.4x of a 0.1 % budget"
    )


# ------------------------------------------------------------------------------ recording


def window_ratio(t: Any, minute: int, window_s: int) -> float:
    """The share of bad requests among the scrapes of the last window_s seconds up to `minute`
    (as rate() sees counters scraped exactly on the minute: from the sample window_s ago)."""
    k = minute * 60 // t.step_s
    j = max(0, k - window_s // t.step_s)
    return (t.bad[k] - t.bad[j]) / (t.total[k] - t.total[j])


def only(slo_spec: Any, kind: str) -> Any:
    ex = slo_spec.EXAMPLE
    return slo_spec.Spec(ex.service, tuple(s for s in ex.slos if s.kind == kind), ex.period)


def test_recording_example_rule_file(rules: Any, slo_spec: Any, promtool: Any) -> None:
    spec = only(slo_spec, "availability")
    got = rules.recording_rules(spec)
    promtool.check_rules(got)  # raises with promtool's words when the file is not valid
    records = {
        (r.get("record"), (r.get("labels") or {}).get("slo"))
        for g in got["groups"]
        for r in g["rules"]
    }
    for w in slo_spec.WINDOWS:
        want = (slo_spec.RECORD.format(window=w), "generate-availability")
        assert want in records, (
            f"recording_rules(EXAMPLE) should record {want[0]} with slo={want[1]!r}"
        )


def story_ratios(lab: Any, traffic: Any, slo: Any, phases: list[Any], slo_spec: Any) -> Any:
    import random

    # one replica restarts somewhere in the story: its counters start again from 0
    t = traffic.simulate(slo, phases, step_s=60, rnd=random.Random(7), restarts=1)
    story = lab.Story(60, series=t.series)
    end = sum(p.minutes for p in phases)
    for minute in (end - 30, end):
        for w in slo_spec.WINDOWS:
            want = window_ratio(t, minute, slo_spec.seconds(w))
            story.ratio(slo.name, w, minute, [want], "the README's example")
    return story


def test_recording_example_ratios(rules: Any, slo_spec: Any, traffic: Any, lab: Any) -> None:
    """4 h at 0.05 % errors, 90 min at 2 %, 20 min at 0.4 % under twice the load."""
    spec = only(slo_spec, "availability")
    phases = [traffic.Phase(240, 0.0005), traffic.Phase(90, 0.02), traffic.Phase(20, 0.004, 2.0)]
    story = story_ratios(lab, traffic, spec.slos[0], phases, slo_spec)
    failed = lab.run(rules.recording_rules(spec), [story], "10m")
    assert not failed, "\n".join(failed[:4])


# ------------------------------------------------------------------------------ latency


def test_latency_example_ratios(rules: Any, slo_spec: Any, traffic: Any, lab: Any) -> None:
    """The latency SLO: 3 h with 0.5 % of requests slower than 2.5 s, 1 h with 5 %, 40 min 0.2 %."""
    spec = only(slo_spec, "latency")
    phases = [traffic.Phase(180, 0.005), traffic.Phase(60, 0.05), traffic.Phase(40, 0.002, 1.5)]
    story = story_ratios(lab, traffic, spec.slos[0], phases, slo_spec)
    failed = lab.run(rules.recording_rules(spec), [story], "10m")
    assert not failed, "\n".join(failed[:4])


# ------------------------------------------------------------------------------ alerts


def example_rules(rules: Any, slo_spec: Any, promtool: Any) -> Any:
    spec = slo_spec.EXAMPLE
    return promtool.rule_file(rules.recording_rules(spec), rules.alerting_rules(spec))


def test_alerts_example_labels_and_annotations(rules: Any, slo_spec: Any, promtool: Any) -> None:
    got = rules.alerting_rules(slo_spec.EXAMPLE)
    promtool.check_rules(promtool.rule_file(rules.recording_rules(slo_spec.EXAMPLE), got))
    alerts = [r for g in got["groups"] for r in g["rules"] if "alert" in r]
    for slo in slo_spec.EXAMPLE.slos:
        severities = {
            (a.get("labels") or {}).get("severity")
            for a in alerts
            if (a.get("labels") or {}).get("slo") == slo.name
        }
        assert severities == {"page", "ticket"}, (
            f"alerting_rules(EXAMPLE): {slo.name} needs page and ticket alerts labelled "
            f"slo={slo.name!r}; found severities {severities}"
        )
    for a in alerts:
        notes = a.get("annotations") or {}
        assert notes.get("summary") and notes.get("description"), (
            f"alert {a.get('alert')!r} needs the annotations summary and description"
        )


def test_alerts_example_fast_burn_pages(
    rules: Any, slo_spec: Any, traffic: Any, lab: Any, promtool: Any
) -> None:
    """2 h healthy, then 10 % of requests fail for an hour (burn 100 on a 0.1 % budget): the
    1 h window crosses 14.4x after 8.6 min, so the page fires by minute 140 and not before 120;
    the tickets' windows (2 h, 6 h, and the 1 d and 3 d ones, which hold only 2 h of data yet)
    cross their thresholds too. The latency SLO stays healthy all along."""
    import random

    avail, latency = slo_spec.EXAMPLE.slos
    a = traffic.simulate(
        avail,
        [traffic.Phase(120, 0.0002), traffic.Phase(60, 0.10), traffic.Phase(60, 0.0002)],
        rnd=random.Random(1),
    )
    b = traffic.simulate(latency, [traffic.Phase(240, 0.001)], rnd=random.Random(2))
    story = lab.Story(60, series=a.series + b.series)
    story.firing(avail.name, 115, set(), "healthy so far")
    story.firing(avail.name, 140, {"page", "ticket"}, "20 min into a burn of 100x")
    story.firing(avail.name, 175, {"page", "ticket"}, "55 min into a burn of 100x")
    story.never(latency.name, 240, "the latency SLO is healthy")
    failed = lab.run(example_rules(rules, slo_spec, promtool), [story], "5m")
    assert not failed, "\n".join(failed[:4])


def test_alerts_example_slow_burn_tickets(
    rules: Any, slo_spec: Any, traffic: Any, lab: Any, promtool: Any
) -> None:
    """6 h healthy, then 4x the allowed ratio for a day and a half: slower than any page,
    faster than both tickets. The series start at minute 0, so for the first 3 days the 3 d
    window holds only what there is: it crosses 1x about 2 h into the burn."""
    import random

    avail, latency = slo_spec.EXAMPLE.slos
    a = traffic.simulate(
        avail,
        [traffic.Phase(360, 0.0001), traffic.Phase(36 * 60, 0.004)],
        step_s=120,
        rnd=random.Random(3),
    )
    b = traffic.simulate(latency, [traffic.Phase(42 * 60, 0.002)], step_s=120, rnd=random.Random(4))
    story = lab.Story(120, series=a.series + b.series)
    story.firing(avail.name, 300, set(), "healthy so far")
    story.firing(
        avail.name, 360 + 60, set(), "1 h into a burn of 4x: every window under its threshold"
    )
    story.firing(avail.name, 360 + 6 * 60, {"ticket"}, "6 h into a burn of 4x")
    story.firing(avail.name, 360 + 22 * 60, {"ticket"}, "22 h into a burn of 4x")
    story.firing(avail.name, 360 + 34 * 60, {"ticket"}, "34 h into a burn of 4x")
    story.never(latency.name, 42 * 60, "the latency SLO is healthy")
    failed = lab.run(example_rules(rules, slo_spec, promtool), [story], "30m")
    assert not failed, "\n".join(failed[:4])
