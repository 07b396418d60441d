"""Tasks "report" and "straggler": from what every host saw, what failed.

diagnose() gets each host's final view of the others (its detector's statuses) and names the
failed hosts and links; slow_links() gets each link's probe times and names the slow ones
against the same run's other links.
"""

from __future__ import annotations

from harness import todo

from .jobs import DEAD, SLOW_FACTOR, Diagnosis  # noqa: F401  (you will need them)


def diagnose(views: dict[int, dict[int, str]], hosts: list[int]) -> Diagnosis:
    """views[o][p]: the status ("alive", "suspect", "dead") observer o gives peer p, for every
    observer that could still report (a killed or hung host reports nothing). At least three
    hosts.

    A host failed when every other host that reported sees it dead (it is down, or cut off
    from everybody: its own view, if it has one, sees everybody dead). A link {a, b} failed when
    a sees b dead or b sees a dead, and neither a nor b is a failed host. Suspect is not dead:
    a slow or flapping link raises suspicion, not a verdict."""
    todo("diagnose")


def slow_links(probes: dict[tuple[int, int], list[float]]) -> list[tuple[int, int]]:
    """probes[(src, dst)]: the seconds each probe took from src to dst. A link {a, b} is slow
    when the median of its probes (both directions together) is more than SLOW_FACTOR times
    the median of every link's median, this run's own yardstick. Sorted (low, high) pairs."""
    todo("slow_links")
