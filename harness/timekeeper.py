"""Every run ends in a known time: the kata's time budget, the run's budget, and fail-fast causes.

One :class:`TimeKeeper` per pytest process (each xdist worker has its own) decides, before each
kata test, whether it may run and for how long:

- a kata whose import hung, or whose tests used up its ``time_budget``, fails its remaining
  tests at once with one sentence naming the cause;
- time *lost* to limits (a test that hung or ran out its limit) is counted apart from honest run
  time: the first hang of a kata waits out the kata's ``time_limit``, later ones share what is
  left of the kata's :func:`hang_allowance` (a kata that hung already gets no full limit per
  distinct kernel), and a run that has lost its allowance (:data:`RUN_HANG_S`) gives each later
  test at most :data:`RUN_QUICK_S`, failing the rest at once after a quarter more. An honest
  solution loses nothing, however slow the machine: only the kata budget applies to it;
- a run budget (``--kata-time-budget``) is spread over the katas still to run, in proportion to
  their budgets, keeping a reserve for writing the reports;
- the test's own limit is the kata's ``time_limit`` cut to what the kata and the run have left.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .hangs import IMPORT, Hang

# A kata without a recorded figure gets this many times its per-test limit, within these bounds.
DEFAULT_BUDGET_LIMITS = 4
DEFAULT_BUDGET_MIN_S = 120.0
DEFAULT_BUDGET_MAX_S = 300.0
MIN_TEST_S = 0.5  # less than this left: fail at once rather than start a test that cannot finish

# Time lost to limits. A kata's first hang waits out its time_limit in full; after it the kata may
# lose that much again, at most AFTER_HANG_S more and KATA_HANG_CAP_S in all, unless time_limit
# alone is more (then time_limit + AFTER_HANG_MIN_S): with start-up, a kata that hangs everywhere
# ends within 2 minutes.
AFTER_HANG_S = 30.0
AFTER_HANG_MIN_S = 10.0
KATA_HANG_CAP_S = 90.0
# A run (each pytest process) that lost RUN_HANG_S to hangs gives every later test at most
# RUN_QUICK_S, and fails the rest at once after a quarter as much again: `pytest katas` with every
# learner file hanging ends within 10 minutes, however many katas there are.
RUN_HANG_S = 240.0
RUN_QUICK_S = 10.0


# A test's own limit, at its scale: TEST_LIMIT_FACTOR x the reference's time for it (recorded by
# `kata verify --record` in kata.toml's [test_seconds]), at least TEST_LIMIT_FLOOR_S and at most
# the kata's time_limit. It bounds the test's call (its fixtures keep the kata's time_limit: a
# module-scoped fixture's cost falls on whichever test runs first). Pure-Python katas only: where
# a test builds C, CUDA or Rust its time depends on the build cache, not on its own scale.
TEST_LIMIT_FACTOR = 10.0
TEST_LIMIT_FLOOR_S = 10.0


def scaled_limit(manifest: Any, test_name: str) -> TestLimit | None:
    """The limit of this test's call at its own scale, when that is below the kata's time_limit."""
    if set(getattr(manifest, "languages", ())) != {"python"}:
        return None
    base = test_name.split("[", 1)[0]
    ref = getattr(manifest, "test_seconds", {}).get(base)
    if ref is None:
        return None
    seconds = max(TEST_LIMIT_FLOOR_S, TEST_LIMIT_FACTOR * ref)
    if seconds >= float(manifest.time_limit):
        return None
    why = (
        f"{base}'s own limit: {TEST_LIMIT_FACTOR:g} x the reference's {ref:.2g} s, "
        f"at least {TEST_LIMIT_FLOOR_S:g} s"
    )
    return TestLimit(seconds, why)


def hang_allowance(time_limit: float) -> float:
    """Seconds a kata may lose to tests that hang or run out their limit."""
    again = min(time_limit, AFTER_HANG_S)
    return max(
        min(time_limit + again, KATA_HANG_CAP_S), time_limit + min(time_limit, AFTER_HANG_MIN_S)
    )


def default_budget(time_limit: float) -> float:
    return min(DEFAULT_BUDGET_MAX_S, max(DEFAULT_BUDGET_MIN_S, DEFAULT_BUDGET_LIMITS * time_limit))


def budget_of(manifest: Any) -> float:
    """The kata's time budget in seconds: its manifest's ``time_budget``, else the default."""
    value = getattr(manifest, "time_budget", None)
    return float(value) if value else default_budget(float(manifest.time_limit))


def run_reserve(budget: float) -> float:
    """Seconds of a run budget kept back for the reports and the processes' exit."""
    return min(30.0, max(3.0, 0.05 * budget))


@dataclass
class TestLimit:
    seconds: float  # 0: no limit
    why: str  # "the kata's time_limit", "what is left of the kata's 120 s time budget"


@dataclass
class KataClock:
    """Time charged to one kata: the sum of its tests' times, so a worker that runs other katas'
    tests in between (xdist) does not charge them to this one."""

    budget: float
    allowance: float = math.inf  # seconds it may lose to limits (hang_allowance)
    share_note: str = ""  # set when the run budget cut the kata's budget
    used: list[tuple[str, float, str]] = field(default_factory=list)  # (test, seconds, hung in)
    lost: list[tuple[str, float, str]] = field(default_factory=list)  # those that overran
    fatal: str = ""  # a cause that fails every remaining test (an import that hung)

    @property
    def left(self) -> float:
        return self.budget - sum(u[1] for u in self.used)

    @property
    def hang_left(self) -> float:
        return self.allowance - sum(u[1] for u in self.lost)


class TimeKeeper:
    def __init__(
        self,
        run_budget: float = 0.0,
        run_started: float | None = None,
        hang_allowance: float = RUN_HANG_S,
    ) -> None:
        self.run_budget = run_budget
        # Past hang_allowance lost, later tests get RUN_QUICK_S; past a quarter more, none.
        self.hang_allowance = hang_allowance
        self.hang_stop = 1.25 * hang_allowance
        # The run's end in this process's monotonic clock; run_started is a time.time() stamp
        # (the xdist controller's), so every worker counts from the same moment.
        started = time.time() if run_started is None else run_started
        self.run_deadline = (
            time.monotonic() - (time.time() - started) + run_budget - run_reserve(run_budget)
            if run_budget > 0
            else math.inf
        )
        self.katas: dict[Path, KataClock] = {}
        self.lost: list[tuple[str, float, str]] = []  # every test of the run that overran

    @property
    def run_lost(self) -> float:
        return sum(u[1] for u in self.lost)

    # ----------------------------------------------------------------- before a test
    def clock(self, manifest: Any, upcoming: list[Any]) -> KataClock:
        """The kata's clock, started on its first test; `upcoming`: the manifests of the katas
        still to run from here on (this one first), for sharing the run budget."""
        key = manifest.dir
        if key not in self.katas:
            now = time.monotonic()
            budget = budget_of(manifest)
            clock = KataClock(budget, hang_allowance(float(manifest.time_limit)))
            if self.run_deadline < math.inf:
                weights = {m.dir: budget_of(m) for m in upcoming}
                weights.setdefault(key, budget)
                share = max(0.0, self.run_deadline - now) * budget / sum(weights.values())
                if share < budget:
                    clock.budget = share
                    clock.share_note = f" (its share of the run's {self.run_budget:g} s budget)"
            self.katas[key] = clock
        return self.katas[key]

    def fail_now(self, manifest: Any, upcoming: list[Any], enabled: bool = True) -> str:
        """A reason to fail the next test of this kata at once, or "". `enabled`: kata budgets
        apply (not under --kata-no-timeout); the run budget always does."""
        clock = self.clock(manifest, upcoming)
        if clock.fatal:
            return clock.fatal
        if enabled and clock.hang_left < MIN_TEST_S:
            return f"the kata lost its {clock.allowance:.0f} s allowance for hangs: " + _worst(
                clock.lost
            )
        if enabled and self.run_lost >= self.hang_stop:
            return (
                f"the run lost {self.run_lost:.0f} s to tests that hung or ran out their limit "
                f"(its allowance is {self.hang_stop:.0f} s): " + _worst(self.lost)
            )
        now = time.monotonic()
        if min(clock.left if enabled else math.inf, self.run_deadline - now) < MIN_TEST_S:
            return self._ran_out(clock, now)
        return ""

    def limit(self, manifest: Any, upcoming: list[Any], enabled: bool = True) -> TestLimit:
        """The wall limit of the next test of this kata."""
        per_test = float(manifest.time_limit) if enabled else 0.0
        clock = self.clock(manifest, upcoming)
        now = time.monotonic()
        kata_left = clock.left
        run_left = self.run_deadline - now
        best = TestLimit(per_test, "the kata's time_limit")
        if enabled and kata_left < (best.seconds or math.inf):
            best = TestLimit(
                max(MIN_TEST_S, kata_left),
                f"what was left of the kata's {clock.budget:.0f} s time budget{clock.share_note}",
            )
        if enabled and clock.lost and clock.hang_left < (best.seconds or math.inf):
            best = TestLimit(
                max(MIN_TEST_S, clock.hang_left),
                f"what was left of the kata's {clock.allowance:.0f} s allowance for hangs: "
                + _worst(clock.lost),
            )
        run_quick = min(RUN_QUICK_S, self.hang_stop - self.run_lost)
        if (
            enabled
            and self.run_lost >= self.hang_allowance
            and run_quick < (best.seconds or math.inf)
        ):
            best = TestLimit(
                max(MIN_TEST_S, run_quick),
                f"the run has lost {self.run_lost:.0f} s to tests that hung: later tests get "
                f"{RUN_QUICK_S:.0f} s",
            )
        if run_left < (best.seconds or math.inf):
            best = TestLimit(
                max(MIN_TEST_S, run_left),
                f"what was left of the run's {self.run_budget:g} s budget",
            )
        return best

    # ----------------------------------------------------------------- after a test
    def spent(
        self, manifest: Any, test: str, seconds: float, hang: Hang | None = None, lost: bool = False
    ) -> None:
        """Charge a test's time to its kata. The time is *lost* when the test hung (`hang`) or a
        time limit stopped it (`lost`); a test that ends by itself, however slowly, loses none."""
        clock = self.katas.get(manifest.dir)
        if clock is None:
            return
        entry = (test, seconds, hang.label if hang else "")
        clock.used.append(entry)
        if hang is not None or lost:
            clock.lost.append(entry)
            kata = getattr(manifest, "id", manifest.dir.name)
            self.lost.append((f"{test} of {kata}", seconds, entry[2]))
        if hang is not None and hang.kind == IMPORT and not clock.fatal:
            clock.fatal = f"{hang.cause} (in {hang.test})"

    def _ran_out(self, clock: KataClock, now: float) -> str:
        if self.run_deadline - now < MIN_TEST_S and self.run_deadline - now <= clock.left:
            head = f"the run's {self.run_budget:g} s time budget ran out"
        else:
            head = f"the kata's {clock.budget:.0f} s time budget{clock.share_note} ran out"
        if not clock.used:
            return head + " before this kata started"
        return f"{head}: {_worst(clock.used)}"


def _worst(used: list[tuple[str, float, str]]) -> str:
    """The test that used the most time: "test_x used 20 s (hung in calc.py)"."""
    if not used:
        return "no test"
    test, seconds, where = max(used, key=lambda u: u[1])
    return f"{test} used {seconds:.0f} s" + (f" (hung in {where})" if where else "")
