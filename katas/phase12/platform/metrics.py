"""The text exposition format 0.0.4 of the platform's metrics (the file you edit).

Families, types and labels: API.md's metrics table. A histogram is `<name>_bucket{le="..."}`
(cumulative: each bucket counts every observation <= its bound, `+Inf` all of them), then
`<name>_sum` and `<name>_count`; `le` is repr(float(bound)). Every family has `# HELP` and
`# TYPE` lines; label values escape \\, " and newlines.
"""

from __future__ import annotations

from harness import todo


class Histogram:
    """Observations counted into fixed buckets (upper bounds, seconds; +Inf implied)."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        todo("Histogram.__init__")

    def observe(self, value: float) -> None:
        todo("Histogram.observe")

    def lines(self, name: str, labels: dict[str, str] | None = None) -> list[str]:
        """The _bucket, _sum and _count samples (no HELP/TYPE: the family writes those once)."""
        todo("Histogram.lines")


def escape(value: str) -> str:
    """A label value as the exposition format writes it between double quotes."""
    todo("escape")


def family(name: str, kind: str, help_text: str, samples: list[str]) -> str:
    """`# HELP`, `# TYPE` and the samples of one family, each line ending in a newline."""
    todo("family")
