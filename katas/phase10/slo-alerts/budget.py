"""Error budgets and burn rates (task "budget"). Times are in seconds, ratios and targets are
shares (0.999, not 99.9). README, "Error budgets and burn rates", has every formula's story."""

from __future__ import annotations

from harness import todo


def error_budget(target: float, period_s: float) -> float:
    """Seconds of total outage the period's budget allows (99.9 % over 30 d: 2592 s, 43.2 min)."""
    return todo("error_budget: the share of requests allowed to fail, times the period")


def burn_rate(error_ratio: float, target: float) -> float:
    """How many times faster than the budget allows the errors spend it (1.0: the budget is
    exactly used up at the end of the period)."""
    return todo("burn_rate: the error ratio over the allowed error ratio")


def burn_threshold(budget_fraction: float, window_s: float, period_s: float) -> float:
    """The burn rate that spends `budget_fraction` of the period's budget within `window_s`
    (2 % in 1 h of 30 d: 14.4)."""
    return todo("burn_threshold: the burn rate that spends this share of the budget this fast")


def budget_remaining(bad: float, total: float, target: float) -> float:
    """The share of the budget left after `bad` of `total` requests of the period failed
    (negative once overspent; 1.0 before any traffic)."""
    return todo("budget_remaining: 1 - the share of the budget the bad requests used")


def time_to_exhaustion(remaining: float, burn: float, period_s: float) -> float:
    """Seconds until the remaining budget is gone at burn rate `burn` (a burn of 1 spends the
    whole budget in one period): math.inf when nothing burns, 0.0 when nothing remains."""
    return todo("time_to_exhaustion: remaining budget at this burn rate")


def detection_time(error_ratio: float, target: float, threshold: float, window_s: float) -> float:
    """Seconds from the start of a sudden, steady error ratio (after a window with no errors)
    until the window's burn rate reaches `threshold`; math.inf when it never does."""
    return todo("detection_time: how long the window takes to collect enough errors")
