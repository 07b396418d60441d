"""Error budgets and burn rates: reference."""

from __future__ import annotations

import math


def error_budget(target: float, period_s: float) -> float:
    """Seconds of total outage the period's budget allows (99.9 % over 30 d: 2592 s, 43.2 min)."""
    return (1.0 - target) * period_s


def burn_rate(error_ratio: float, target: float) -> float:
    """How many times faster than the budget allows the errors spend it (1.0: exactly used up
    at the end of the period)."""
    return error_ratio / (1.0 - target)


def burn_threshold(budget_fraction: float, window_s: float, period_s: float) -> float:
    """The burn rate that spends `budget_fraction` of the period's budget within `window_s`
    (2 % in 1 h of 30 d: 14.4)."""
    return budget_fraction * period_s / window_s


def budget_remaining(bad: float, total: float, target: float) -> float:
    """The share of the budget left after `bad` of `total` requests of the period failed
    (negative once overspent; 1.0 before any traffic)."""
    if total <= 0:
        return 1.0
    return 1.0 - (bad / total) / (1.0 - target)


def time_to_exhaustion(remaining: float, burn: float, period_s: float) -> float:
    """Seconds until the remaining budget is gone at burn rate `burn` (a burn of 1 spends the
    whole budget in one period): inf when nothing burns, 0 when nothing remains."""
    if remaining <= 0:
        return 0.0
    if burn <= 0:
        return math.inf
    return remaining * period_s / burn


def detection_time(error_ratio: float, target: float, threshold: float, window_s: float) -> float:
    """Seconds from the start of a sudden error ratio (after a clean window) until the window's
    burn rate reaches `threshold`: the window must collect threshold x (1 - target) x window_s
    worth of errors; inf when the ratio never gets there."""
    needed = threshold * (1.0 - target)
    if error_ratio < needed:
        return math.inf
    return window_s * needed / error_ratio
