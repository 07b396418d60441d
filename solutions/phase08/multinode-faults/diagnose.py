"""Tasks "report" and "straggler": from what every host saw, what failed.

diagnose() gets each host's final view of the others (its detector's statuses) and names the
failed hosts and links; slow_links() gets each link's probe times and names the slow ones
against the same run's other links.
"""

from __future__ import annotations

import statistics

from .jobs import DEAD, SLOW_FACTOR, Diagnosis


def diagnose(views: dict[int, dict[int, str]], hosts: list[int]) -> Diagnosis:
    """views[o][p]: the status ("alive", "suspect", "dead") observer o gives peer p, for every
    observer that could still report (a killed or hung host reports nothing). At least three
    hosts.

    A host failed when every other host that reported sees it dead (it is down, or cut off
    from everybody: its own view, if it has one, sees everybody dead). A link {a, b} failed when
    a sees b dead or b sees a dead, and neither a nor b is a failed host. Suspect is not dead:
    a slow or flapping link raises suspicion, not a verdict."""
    failed = []
    for h in hosts:
        others = [o for o in views if o != h]
        if others and all(views[o].get(h) == DEAD for o in others):
            failed.append(h)
    links = set()
    for o, view in views.items():
        for p, status in view.items():
            if status == DEAD and o not in failed and p not in failed:
                links.add((min(o, p), max(o, p)))
    return Diagnosis(sorted(failed), sorted(links))


def slow_links(probes: dict[tuple[int, int], list[float]]) -> list[tuple[int, int]]:
    """probes[(src, dst)]: the seconds each probe took from src to dst. A link {a, b} is slow
    when the median of its probes (both directions together) is more than SLOW_FACTOR times
    the median of every link's median, this run's own yardstick. Sorted (low, high) pairs."""
    per_link: dict[tuple[int, int], list[float]] = {}
    for (a, b), times in probes.items():
        per_link.setdefault((min(a, b), max(a, b)), []).extend(times)
    medians = {k: statistics.median(v) for k, v in per_link.items() if v}
    if not medians:
        return []
    yardstick = statistics.median(medians.values())
    return sorted(k for k, m in medians.items() if m > SLOW_FACTOR * yardstick)
