"""The text exposition format 0.0.4 of the platform's metrics (the reference)."""

from __future__ import annotations

import bisect


class Histogram:
    """Observations counted into fixed buckets (upper bounds, seconds; +Inf implied)."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.bounds = tuple(sorted(float(b) for b in buckets))
        self.counts = [0] * (len(self.bounds) + 1)  # per bucket, not cumulative; last: +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bound's bucket (le is <=)
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def lines(self, name: str, labels: dict[str, str] | None = None) -> list[str]:
        base = [f'{k}="{escape(v)}"' for k, v in (labels or {}).items()]
        out, running = [], 0
        for bound, n in zip((*self.bounds, None), self.counts, strict=True):
            running += n
            le = "+Inf" if bound is None else repr(bound)
            out.append(
                f"{name}_bucket{{{','.join([*base, f'le={chr(34)}{le}{chr(34)}'])}}} {running}"
            )
        tail = "{" + ",".join(base) + "}" if base else ""
        out.append(f"{name}_sum{tail} {self.sum!r}")
        out.append(f"{name}_count{tail} {running}")
        return out


def escape(value: str) -> str:
    """A label value as the exposition format writes it between double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def family(name: str, kind: str, help_text: str, samples: list[str]) -> str:
    """`# HELP`, `# TYPE` and the samples of one family, each line ending in a newline."""
    help_escaped = help_text.replace("\\", "\\\\").replace("\n", "\\n")
    return "".join(
        f"{line}\n" for line in [f"# HELP {name} {help_escaped}", f"# TYPE {name} {kind}", *samples]
    )
