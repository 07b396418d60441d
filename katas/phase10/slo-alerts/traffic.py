"""The simulated inference service (given): the series Prometheus would have scraped from it,
as promtool's `input_series`, for a story told in phases ("healthy for 2 h, then 3 % of requests
fail for 40 min"). The tests build their scenarios with it; you can too (README, "Trying your
rules"). It knows nothing about alerts: it only counts requests."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field

from .slo_spec import SLO

CODES = ["200", "201", "204", "400", "404", "409", "429", "499", "500", "502", "503", "504"]
LADDERS = {  # histogram bucket boundaries, as two client libraries spell them
    "go": ["0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"],
    "python": ["0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"],
}


@dataclass(frozen=True)
class Phase:
    """`minutes` of traffic in which a share `bad` of the requests fail the SLO (a 5xx for an
    availability SLO, slower than the threshold for a latency one), at `load` times the base rate."""

    minutes: int
    bad: float
    load: float = 1.0


@dataclass
class Traffic:
    """What the service did: promtool's input series, and at every scrape k (time k * step_s)
    the cumulative count of the SLO's requests (`total[k]`) and of its bad ones (`bad[k]`)."""

    step_s: int
    series: list[dict[str, str]] = field(default_factory=list)
    total: list[int] = field(default_factory=list)
    bad: list[int] = field(default_factory=list)


def _labels(metric: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{metric}{{{inner}}}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(round(x, 6))


def _values(incs: list[tuple[float, int]], resets: tuple[int, ...] = ()) -> str:
    """promtool's expanding notation for a counter that starts at 0 and grows by `inc` for
    `steps` scrapes, run after run: '0 5+5x9 62+12x4' is 0, 5, 10, ..., 50, 62, 74, ...
    At every scrape in `resets` the process had restarted: the counter reads 0 again (it
    counted nothing in that scrape's interval) and grows from there."""
    per: list[list[float]] = []  # runs of [inc, steps], split at the resets
    k = 0
    for inc, steps in incs:
        for at in sorted(r for r in resets if k < r <= k + steps):
            if at - 1 > k:
                per.append([inc, at - 1 - k])
            per.append([math.nan, 1])
            steps -= at - k
            k = at
        if steps:
            per.append([inc, steps])
        k += steps
    merged: list[list[float]] = []
    for inc, steps in per:
        if merged and merged[-1][0] == inc:
            merged[-1][1] += steps
        elif steps:
            merged.append([inc, steps])
    out, v = ["0"], 0.0
    for inc, steps in merged:
        if math.isnan(inc):
            out.append("0")
            v = 0.0
            continue
        out.append(f"{_num(v + inc)}+{_num(inc)}x{int(steps) - 1}")
        v += inc * steps
    return " ".join(out)


def _split(n: int, parts: int, rnd: random.Random) -> list[int]:
    """n requests over `parts` series, in random shares."""
    if parts == 1:
        return [n]
    cuts = sorted(rnd.randint(0, n) for _ in range(parts - 1))
    return [b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)]


def simulate(
    slo: SLO,
    phases: list[Phase],
    step_s: int = 60,
    rate: float = 100_000.0,
    rnd: random.Random | None = None,
    instances: int = 2,
    decoys: bool = True,
    skew: bool = False,
    restarts: int = 0,
) -> Traffic:
    """The series of `slo`'s service over `phases`, scraped every `step_s` seconds, at about
    `rate` requests per scrape over `instances` replicas in uneven shares. With `decoys`, a
    neighbour (same metric, one selector label different) fails half its requests all along: a
    rule that ignores the selector sees it. With `skew`, replicas fail at different ratios (one
    bad replica), so a phase's `bad` is only the replicas' typical ratio. With `restarts`, that
    many times a replica restarts: it serves nothing for one scrape and its counters start again
    from 0 (rate() and increase() count across the reset; a difference of raw counter values
    does not)."""
    rnd = rnd or random.Random(0)
    for p in phases:
        if p.minutes * 60 % step_s:
            raise ValueError(f"a phase of {p.minutes} min is not a whole number of scrapes")
    traffic = Traffic(step_s)
    shares = [rnd.uniform(0.5, 1.5) for _ in range(instances)]
    shares = [s / sum(shares) for s in shares]
    worse = [rnd.uniform(0.0, 3.0) if skew else 1.0 for _ in shares]
    per_instance: list[list[tuple[Phase, int]]] = [
        [
            (
                Phase(p.minutes, min(1.0, p.bad * w), p.load),
                max(1, round(rate * p.load * s * rnd.uniform(0.9, 1.1))),
            )
            for p in phases
        ]
        for s, w in zip(shares, worse, strict=True)
    ]
    total, bad = [0], [0]
    for p_i, p in enumerate(phases):
        n = sum(pi[p_i][1] for pi in per_instance)
        b = sum(round(pi[p_i][1] * pi[p_i][0].bad) for pi in per_instance)
        for _ in range(p.minutes * 60 // step_s):
            total.append(total[-1] + n)
            bad.append(bad[-1] + b)
    # scrape -> restarted replicas; a restart's scrape counts none of that replica's requests
    down: dict[int, set[int]] = {}
    for _ in range(restarts):
        down.setdefault(rnd.randint(3, len(total) - 1), set()).add(rnd.randrange(instances))
    if down:
        scrape_phase = [
            p_i for p_i, p in enumerate(phases) for _ in range(p.minutes * 60 // step_s)
        ]
        lost_n, lost_b = 0, 0
        for k in range(1, len(total)):
            for i in down.get(k, ()):
                p, n = per_instance[i][scrape_phase[k - 1]]
                lost_n, lost_b = lost_n + n, lost_b + round(n * p.bad)
            total[k] -= lost_n
            bad[k] -= lost_b
    traffic.total, traffic.bad = total, bad
    for i, runs in enumerate(per_instance):
        labels = {**slo.selector, "instance": f"10.0.{rnd.randint(0, 255)}.{i + 10}:8000"}
        resets = tuple(sorted(k for k, who in down.items() if i in who))
        traffic.series += _series(slo, labels, runs, step_s, rnd, resets)
    if decoys and slo.selector:
        key = rnd.choice(sorted(slo.selector))
        other = {**slo.selector, key: slo.selector[key] + rnd.choice(["-canary", "-batch", "2"])}
        # drawn like the replicas' own instances: only the selector tells the neighbour apart
        other["instance"] = f"10.0.{rnd.randint(0, 255)}.{rnd.randint(10, 9 + instances)}:8000"
        runs = [(Phase(p.minutes, 0.5, p.load), max(1, round(rate * 0.3))) for p in phases]
        traffic.series += _series(slo, other, runs, step_s, rnd)
    return traffic


def _series(
    slo: SLO,
    labels: dict[str, str],
    runs: list[tuple[Phase, int]],
    step_s: int,
    rnd: random.Random,
    resets: tuple[int, ...] = (),
) -> list[dict[str, str]]:
    steps = [p.minutes * 60 // step_s for p, _ in runs]
    if slo.kind == "availability":
        bad_codes = [c for c in CODES if re.fullmatch(slo.bad_codes, c)]
        good_codes = [c for c in CODES if not re.fullmatch(slo.bad_codes, c)]
        bad_c = rnd.sample(bad_codes, min(2, len(bad_codes)))
        good_c = ["200", *rnd.sample([c for c in good_codes if c != "200"], 2)]
        per_code: dict[str, list[tuple[float, int]]] = {c: [] for c in bad_c + good_c}
        for (p, n), k in zip(runs, steps, strict=True):
            nb = round(n * p.bad)
            good = [n - nb - (n - nb) // 5, *_split((n - nb) // 5, len(good_c) - 1, rnd)]
            for c, x in zip(bad_c + good_c, _split(nb, len(bad_c), rnd) + good, strict=True):
                per_code[c].append((x, k))
        return [
            {
                "series": _labels(slo.metric, {**labels, slo.code_label: c}),
                "values": _values(v, resets),
            }
            for c, v in per_code.items()
        ]
    if slo.kind != "latency":
        raise ValueError(f"unknown SLO kind {slo.kind!r}")
    ladder = next((lad for lad in LADDERS.values() if slo.le in lad), None)
    if ladder is None:
        ladder = sorted({*LADDERS["go"][:-1], slo.le}, key=float) + ["+Inf"]
    at = ladder.index(slo.le)
    below = sorted(rnd.uniform(0.1, 0.95) for _ in range(at))
    above = sorted(rnd.uniform(0.2, 0.95) for _ in range(len(ladder) - at - 2))
    buckets: dict[str, list[tuple[float, int]]] = {le: [] for le in ladder}
    count: list[tuple[float, int]] = []
    total_s: list[tuple[float, int]] = []
    thr = float(slo.le)
    for (p, n), k in zip(runs, steps, strict=True):
        slow = round(n * p.bad)
        fast = n - slow
        cum = [int(fast * f) for f in below] + [fast] + [fast + int(slow * g) for g in above] + [n]
        for le, c in zip(ladder, cum, strict=True):
            buckets[le].append((c, k))
        count.append((n, k))
        # The mean hides the tail: fast requests take 0.4 x the threshold, slow ones 1.6 x.
        total_s.append((round(fast * 0.4 * thr + slow * 1.6 * thr, 3), k))
    out = [
        {
            "series": _labels(slo.metric + "_bucket", {**labels, "le": le}),
            "values": _values(v, resets),
        }
        for le, v in buckets.items()
    ]
    out.append({"series": _labels(slo.metric + "_count", labels), "values": _values(count, resets)})
    out.append({"series": _labels(slo.metric + "_sum", labels), "values": _values(total_s, resets)})
    return out
