"""The statistics of a performance budget: a learner's implementation against the reference.

No pytest here. `compare` measures both sides in one run and returns a :class:`Verdict`; the
plugin (:mod:`harness.budgets`) turns it into a pass, a failure and report metrics.

Why each step (see docs/budgets.md):

- **same run, interleaved** (A B, then B A, ...): whatever slows the machine down (the other core
  busy, a frequency change) slows both sides of a round alike, and alternating who goes first
  cancels slow drifts. Only the *ratio* of the two sides in one round is kept.
- **warm-up**: first calls pay for imports, allocator growth and cold caches; they are discarded.
- **fresh inputs for every call** (from `setup`): a learner who caches results across calls gains
  nothing, and a `setup(seed)` gives both sides of a round equal inputs built separately.
- **median of at least 7 ratios**: a round hit by a noisy neighbour is an outlier, and the median
  ignores up to three of seven.
- **grey zone**: a median within ±15% of the limit is measured again with more rounds before the
  verdict, so the decision near the threshold rests on more data.
- **suspicious results**: a learner far faster than the reference (100x by default) is not
  believable on equal inputs; it fails as suspicious instead of passing.
"""

from __future__ import annotations

import gc
import inspect
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["CLOCKS", "Comparison", "Settings", "Verdict", "compare", "describe", "unit"]

# The metrics measured by a clock: wall time, and process CPU time (all threads of this process;
# time other processes take from the core does not count).
CLOCKS: dict[str, Callable[[], int]] = {"time": time.perf_counter_ns, "cpu": time.process_time_ns}
MIN_TIMED_ROUNDS = 7


@dataclass
class Verdict:
    """The outcome of one budget comparison; `passed` is False for every failing case."""

    name: str
    metric: str
    limit: float
    ratio: float = math.nan  # median of the per-round ratios (learner / reference)
    ratios: list[float] = field(default_factory=list)
    calls_per_round: int = 1
    remeasured: bool = False  # the grey zone asked for more rounds
    stopped_early: bool = False  # clearly over budget, and the deadline came first
    suspicious: bool = False  # implausibly faster than the reference
    wrong: str = ""  # the checker rejected a result: why
    learner_cost: float = math.nan  # median per call, in the metric's unit (ns for clocks)
    reference_cost: float = math.nan
    recorded_reference: bool = False  # the reference cost came from kata.toml, not a run

    @property
    def rounds(self) -> int:
        return len(self.ratios)

    @property
    def passed(self) -> bool:
        return not self.wrong and not self.suspicious and self.ratio <= self.limit

    @property
    def spread(self) -> float:
        """Interquartile range of the ratios over their median: how noisy the run was."""
        if len(self.ratios) < 2 or not self.ratio:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.ratios, n=4, method="inclusive")
        return (q3 - q1) / self.ratio

    def message(self, suspicious_factor: float | None = None) -> str:
        if self.wrong:
            return self.wrong
        factor = f" (over {suspicious_factor:g}x)" if suspicious_factor else ""
        if self.suspicious:
            return (
                f"suspicious result: your {self.name} measured {1 / self.ratio:.0f}x faster than "
                f"the reference{factor}, which equal inputs do not allow. Does it reuse results "
                "across calls? Budget tests give every call fresh inputs."
            )
        text = f"your {self.name} {describe(self.ratio, self.metric, self.limit)}"
        if self.rounds:
            lo, hi = min(self.ratios), max(self.ratios)
            text += (
                f"; median of {self.rounds} interleaved rounds, ratios {_num(lo)}..{_num(hi)}"
                if not self.recorded_reference
                else f"; against the reference's {self.metric} recorded in kata.toml"
            )
        return text

    def as_metrics(self) -> dict[str, Any]:
        """Plain JSON values for `kata_metrics` and the reports."""
        return {
            "name": self.name,
            "metric": self.metric,
            "unit": unit(self.metric),
            "ratio": _round(self.ratio),
            "limit": self.limit,
            "passed": self.passed,
            "rounds": self.rounds,
            "ratios": [_round(r) for r in self.ratios],
            "spread": _round(self.spread),
            "calls_per_round": self.calls_per_round,
            "remeasured": self.remeasured,
            "suspicious": self.suspicious,
            "learner_cost": _round(self.learner_cost),
            "reference_cost": _round(self.reference_cost),
        }


def unit(metric: str) -> str:
    """What a ratio of `metric` is, as the report charts label it."""
    return {"time": "× reference time", "cpu": "× reference CPU time"}.get(
        metric, f"× reference {metric}"
    )


def describe(ratio: float, metric: str, limit: float) -> str:
    """ "is 3.4x slower than the reference (budget 2.0x)": the learner-facing comparison."""
    r, budget = _pair(ratio, limit)
    if metric == "time":
        what = (
            f"is {r}x slower than the reference"
            if ratio >= 1
            else f"takes {r}x the reference's time"
        )
    elif metric == "cpu":
        what = f"uses {r}x the reference's CPU time"
    else:
        what = f"takes {r}x the reference's {metric}"
    return f"{what} (budget {budget}x)"


def _pair(ratio: float, limit: float) -> tuple[str, str]:
    # One decimal reads best; more when one decimal would make a failing ratio look like the limit.
    for digits in (1, 2, 3):
        r, b = f"{ratio:.{digits}f}", f"{limit:.{digits}f}"
        if r != b or ratio == limit:
            return r, f"{limit:g}"
    return f"{ratio:.4f}", f"{limit:g}"


def _num(x: float) -> str:
    return f"{x:.2f}"


def _round(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 4)


# --------------------------------------------------------------------------- inputs
class _Inputs:
    """Fresh arguments for every call: `setup()` or `setup(seed)`, returning a tuple of args."""

    def __init__(self, setup: Callable[..., Any] | None) -> None:
        self.setup = setup
        self.seeded = setup is not None and _takes_an_argument(setup)

    def make(self, seed: int) -> tuple[Any, ...]:
        if self.setup is None:
            return ()
        value = self.setup(seed) if self.seeded else self.setup()
        return value if isinstance(value, tuple) else (value,)


def _takes_an_argument(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params
    )


def first_arguments(setup: Callable[..., Any] | None) -> tuple[Any, ...]:
    """The arguments of a measurement's first call (seed 0), made as the measurement makes them."""
    return _Inputs(setup).make(0)


# --------------------------------------------------------------------------- one side of a round
def _run_side(
    fn: Callable[..., Any],
    args: Sequence[tuple[Any, ...]],
    clock: Callable[[], int] | None,
    cost: Callable[[Any], float] | None,
) -> tuple[float, list[Any]]:
    """(total cost, results) of calling `fn` once per argument tuple."""
    if clock is None:  # a counted metric: each call's result (or cost(result)) is its cost
        results = [fn(*a) for a in args]
        total = 0.0
        for r in results:
            value = cost(r) if cost is not None else r
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"a budget metric must be a number, got {value!r}")
            total += value
        return total, results
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside one side's timing would land on the wrong side
    try:
        t0 = clock()
        results = [fn(*a) for a in args]
        t1 = clock()
    finally:
        if gc_was_enabled:
            gc.enable()
    return float(t1 - t0), results


def _checked(
    check: Callable[..., Any] | None, name: str, results: list[Any], args: list[tuple], rnd: int
) -> str:
    """ "" when every result passes `check(result, *args)`, else the learner-facing reason."""
    if check is None:
        return ""
    for result, a in zip(results, args, strict=True):
        try:
            ok = check(result, *a)
        except AssertionError as e:
            detail = f": {e}" if str(e) else ""
            return f"your {name} returned a wrong result in budget round {rnd}{detail}"
        if ok is False:
            return f"your {name} returned a wrong result in budget round {rnd}"
    return ""


# --------------------------------------------------------------------------- the comparison
@dataclass(frozen=True)
class Settings:
    """How one budget is measured and judged (the keywords of :func:`compare`).

    `metric` is "time" (wall clock), "cpu" (process CPU time), or the name of a counted metric
    ("cycles", "instructions", ...): then each call returns its cost, or `cost(result)` does.
    `recorded` is a recorded reference cost per call (counted metrics, no reference function).
    `check(result, *args)` rechecks every timed learner result; it fails by raising
    AssertionError or returning False. `number` fixes the calls per round (clocks otherwise
    calibrate it so a round lasts about `round_target_s`). `rounds`, `warmup` and `max_rounds`
    default by metric (see :meth:`resolved`).
    """

    ratio: float
    name: str
    setup: Callable[..., Any] | None = None
    check: Callable[..., Any] | None = None
    metric: str = "time"
    cost: Callable[[Any], float] | None = None
    recorded: float | None = None
    rounds: int | None = None
    warmup: int | None = None
    grey: float = 0.15
    max_rounds: int | None = None
    round_target_s: float = 0.02
    deadline_s: float = 20.0
    suspicious: float | None = 100.0
    number: int | None = None

    @property
    def clock(self) -> Callable[[], int] | None:
        return CLOCKS.get(self.metric)

    def resolved(self, has_reference: bool) -> Settings:
        """These settings with the defaults filled in; ValueError for impossible ones."""
        name, timed = self.name, self.clock is not None
        if self.ratio <= 0:
            raise ValueError(f"budget {name!r}: ratio must be positive, got {self.ratio!r}")
        if not has_reference and (timed or self.recorded is None):
            raise ValueError(
                f"budget {name!r}: no reference, and no recorded {self.metric} to compare to"
            )
        rounds = self.rounds if self.rounds is not None else (MIN_TIMED_ROUNDS if timed else 3)
        if timed and rounds < MIN_TIMED_ROUNDS:
            raise ValueError(f"budget {name!r}: timed budgets need at least 7 rounds, got {rounds}")
        warmup = self.warmup if self.warmup is not None else (1 if timed else 0)
        max_rounds = max(self.max_rounds if self.max_rounds is not None else 5 * rounds, rounds)
        return replace(self, rounds=rounds, warmup=warmup, max_rounds=max_rounds)


class Comparison:
    """One budget measured: rounds of (learner, reference) calls on equal fresh inputs."""

    def __init__(
        self,
        candidate: Callable[..., Any],
        reference: Callable[..., Any] | None,
        settings: Settings,
    ) -> None:
        self.candidate = candidate
        self.reference = reference
        self.settings = settings.resolved(reference is not None)
        self.verdict = Verdict(
            name=settings.name, metric=settings.metric, limit=float(settings.ratio)
        )
        self.inputs = _Inputs(settings.setup)
        self.seed = 0  # the next input's seed: each call gets its own
        self.calls = settings.number or 1  # per round and side
        self.mine_costs: list[float] = []
        self.ref_costs: list[float] = []

    def run(self) -> Verdict:
        s, v = self.settings, self.verdict
        start = time.monotonic()
        if not self._calibrate():
            return v
        for w in range(s.warmup or 0):
            if not self._round(-1 - w):
                return v
        index = 0
        while index < (s.rounds or 0):
            if not self._round(index):
                return v
            index += 1
            over = all(r > s.ratio * (1 + s.grey) for r in v.ratios)
            if index >= 3 and over and time.monotonic() - start > s.deadline_s:
                v.stopped_early = True  # clearly over budget: a fail may come early, a pass never
                break
        while not v.stopped_early and len(v.ratios) < (s.max_rounds or 0):
            near = abs(statistics.median(v.ratios) / s.ratio - 1) <= s.grey
            varies = max(v.ratios) > min(v.ratios)  # more rounds cannot move a constant
            if not (near and varies) or time.monotonic() - start > s.deadline_s:
                break
            v.remeasured = True
            for _ in range(min(s.rounds or 0, (s.max_rounds or 0) - len(v.ratios))):
                if not self._round(index):
                    return v
                index += 1
        v.ratio = statistics.median(v.ratios)
        v.learner_cost = statistics.median(self.mine_costs)
        v.reference_cost = statistics.median(self.ref_costs)
        v.recorded_reference = self.reference is None
        v.suspicious = s.suspicious is not None and v.ratio * s.suspicious < 1
        return v

    def _side(self, fn: Callable[..., Any], n: int) -> tuple[float, list[Any], list[tuple]]:
        args = [self.inputs.make(self.seed + i) for i in range(n)]  # made before the clock starts
        total, results = _run_side(fn, args, self.settings.clock, self.settings.cost)
        return total, results, args

    def _wrong(self, results: list[Any], args: list[tuple], rnd: int) -> bool:
        wrong = _checked(self.settings.check, self.settings.name, results, args, rnd)
        if wrong:
            self.verdict.wrong = wrong
        return bool(wrong)

    def _calibrate(self) -> bool:
        """One call each; a clock's round then lasts about round_target_s on the slower side.
        Both sides always make the same number of calls. False: the learner's result is wrong."""
        s = self.settings
        if s.clock is not None and s.number is None:
            t_mine, results, args = self._side(self.candidate, 1)
            if self._wrong(results, args, 0):
                return False
            t_ref, _, _ = self._side(self.reference, 1)  # type: ignore[arg-type]
            slowest_s = max(t_mine, t_ref, 1.0) / 1e9
            self.calls = max(1, min(100_000, math.ceil(s.round_target_s / slowest_s)))
            self.seed += 1
        self.verdict.calls_per_round = self.calls
        return True

    def _round(self, index: int) -> bool:
        """One round (warm-up rounds have negative indices and are discarded); False: the
        learner's result is wrong."""
        n = self.calls
        measured: dict[int, float] = {}
        for who in (0, 1) if index % 2 == 0 else (1, 0):  # A B, then B A: drift cancels
            if who == 0:
                total, results, args = self._side(self.candidate, n)
                if self._wrong(results, args, index + 1):
                    return False
                measured[0] = total
            elif self.reference is not None:
                measured[1] = self._side(self.reference, n)[0]
            else:
                measured[1] = float(self.settings.recorded) * n  # type: ignore[arg-type]
        self.seed += n
        if index >= 0:
            if measured[1] <= 0:
                raise ValueError(
                    f"budget {self.settings.name!r}: the reference measured {measured[1]:g}"
                )
            self.verdict.ratios.append(measured[0] / measured[1])
            self.mine_costs.append(measured[0] / n)
            self.ref_costs.append(measured[1] / n)
        return True


def compare(
    candidate: Callable[..., Any],
    reference: Callable[..., Any] | None,
    *,
    ratio: float,
    name: str,
    **options: Any,
) -> Verdict:
    """Measure `candidate` (the learner's) against `reference` and judge `median ratio <= ratio`.

    `options` are the other fields of :class:`Settings`. `reference=None` with `recorded=`
    compares against a recorded reference cost per call (counted metrics only).
    """
    return Comparison(candidate, reference, Settings(ratio=ratio, name=name, **options)).run()
