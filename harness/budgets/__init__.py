"""Performance budgets: the learner's implementation against the reference, in the same run.

A pytest plugin loaded by :mod:`harness.plugin`. In a kata test::

    def test_matmul_budget(kata, kata_budget):
        ref = kata_budget.reference.module("matmul")  # skips when there is no reference
        mine = kata.module("matmul")
        kata_budget.compare(mine.matmul, ref.matmul, ratio=2.0, name="matmul", setup=make_inputs)

- :mod:`harness.budgets.measure`: the statistics (interleaved rounds, medians, grey zone);
- :mod:`harness.budgets.lock`: budget tests run alone, also under xdist;
- this module: the ``kata_budget`` fixture and marker, ``--kata-no-budgets``, report metrics.

docs/budgets.md is the instructor's guide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import Any

import pytest

from harness.api import ITEM_INFO, in_sandbox_child, results_dir
from harness.budgets.lock import BudgetLock
from harness.budgets.measure import CLOCKS, Verdict, compare, unit
from harness.layout import solution_dir
from harness.loader import KataContext

__all__ = ["KataBudget", "Verdict", "kata_budget"]

MARKER = "kata_budget"
OFF_REASON = "budgets are off (--kata-no-budgets)"
_ENTRY_KEYS = {"ratio", "reference", "metric"}
_IS_BUDGET = pytest.StashKey[bool]()
_LOCK = pytest.StashKey["BudgetLock | None"]()  # None: no budget test in this session, no locking


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: a performance-budget test (runs alone; skipped by --kata-no-budgets and "
        "under --kata-cuda-sanitize); "
        "tests using the kata_budget fixture are budget tests already",
    )
    config.stash[_LOCK] = None


def _off(config: pytest.Config) -> str:
    """Why budget tests do not run in this session, or ""."""
    if config.getoption("kata_no_budgets", default=False):
        return OFF_REASON
    tool = config.getoption("kata_cuda_sanitize", default=None)
    if tool:  # compute-sanitizer slows each launch many times over: a timing means nothing
        return f"budgets are off under --kata-cuda-sanitize={tool} (it slows every launch)"
    return ""


def _is_budget_item(item: pytest.Item) -> bool:
    return (
        MARKER in getattr(item, "fixturenames", ()) or item.get_closest_marker(MARKER) is not None
    )


@pytest.hookimpl(trylast=True)  # after harness.plugin has found each item's kata
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.stash.get(ITEM_INFO, None) is None or not _is_budget_item(item):
            continue
        item.stash[_IS_BUDGET] = True
        if reason := _off(config):
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_collection_finish(session: pytest.Session) -> None:
    # Lock only when a budget test will run: other sessions pay nothing. Every xdist worker
    # collects the same items, so all of them agree on this.
    config = session.config
    if _off(config) or not any(i.stash.get(_IS_BUDGET, False) for i in session.items):
        return
    config.stash[_LOCK] = BudgetLock(results_dir(config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator:
    # The whole protocol (setup, call, teardown) sits inside the lock: a module fixture set up or
    # torn down by a neighbour's test must not run beside a budget measurement either.
    lock = item.config.stash.get(_LOCK, None)
    if (
        lock is None
        or in_sandbox_child()  # the parent process holds the lock for this test already
        or item.stash.get(ITEM_INFO, None) is None
        or any(m.name == "skip" for m in item.iter_markers())  # skipped at once: nothing to guard
    ):
        return (yield)
    with lock.exclusive() if item.stash.get(_IS_BUDGET, False) else lock.shared():
        return (yield)


# --------------------------------------------------------------------------- the fixture
class KataBudget:
    """What the ``kata_budget`` fixture gives a test: the reference, and `compare`."""

    def __init__(
        self,
        kata: KataContext,
        metrics: dict[str, Any],
        deadline_s: float,
        sanitize: tuple[str, ...] = (),
    ) -> None:
        self.kata = kata
        self.metrics = metrics
        self.deadline_s = deadline_s
        self.sanitize = sanitize
        self.verdicts: list[Verdict] = []

    # ------------------------------------------------------------------ the reference
    @property
    def reference_available(self) -> bool:
        """Whether this checkout holds the reference (a solutions/ mirror of the kata)."""
        return self.kata.impl == "solution" or solution_dir(self.kata.dir) is not None

    @property
    def reference(self) -> KataContext:
        """The reference implementation, whatever ``--kata-impl`` says; skips the test when the
        checkout has none (a learner's repository)."""
        __tracebackhide__ = True
        if not self.reference_available:
            pytest.skip(_no_reference_reason(self.kata))
        return KataContext(self.kata.dir, self.kata.manifest, "solution")

    @property
    def reference_native(self) -> Any:
        """A `native` builder over the reference's sources: ``.executable("sum.c", ...)``."""
        from harness.native.fixtures import NativeBuilder

        ref = self.reference
        return NativeBuilder(ref.source, ref.search_path, self.sanitize)

    # ------------------------------------------------------------------ comparisons
    def compare(
        self,
        candidate: Callable[..., Any],
        reference: Callable[..., Any] | None,
        *,
        name: str,
        ratio: float | None = None,
        setup: Callable[..., Any] | None = None,
        check: Callable[..., Any] | None = None,
        metric: str = "time",
        cost: Callable[[Any], float] | None = None,
        moves: float = 0.0,
        flops: float = 0.0,
        peak: Any = None,
        **settings: Any,
    ) -> Verdict:
        """Fail the test unless `candidate` (the learner's) stays within `ratio` x `reference`.

        Every call gets fresh inputs: ``setup()`` or ``setup(seed)`` returns the arguments (a
        tuple, or one value). ``check(result, *args)`` rechecks each measured learner result.
        `metric`: "time" (wall clock), "cpu" (process CPU time), or a counted metric's name
        ("cycles", ...): then each call returns its cost, or ``cost(result)`` does.
        `reference=None` uses the reference cost recorded in kata.toml (``[budgets.<name>]``
        ``reference = ...``, counted metrics only). kata.toml's ``[budgets.<name>] ratio``
        overrides `ratio`. Other keywords go to :func:`harness.budgets.measure.compare`.

        `moves` (bytes one call moves) and `flops` (FLOPs one call does), with `peak` (a
        harness.physics.Peak: the device's, e.g. the cuda fixture's ``device_peak()``), bound the
        learner's rate by physics: above the peak (with harness.physics.MARGIN) the budget fails
        with that sentence. A time metric only: wall/CPU time, or a cost in seconds ("GPU
        seconds"). The report gets each side's rate and its fraction of the peak.
        """
        __tracebackhide__ = True
        entry = self._entry(name)
        limit = entry.get("ratio", ratio)
        if limit is None:
            raise TypeError(f"budget {name!r}: give ratio= or set [budgets.{name}] ratio")
        recorded = None
        if reference is None:
            recorded = entry.get("reference")
            if metric in CLOCKS or recorded is None or entry.get("metric", metric) != metric:
                pytest.skip(_no_reference_reason(self.kata, name, metric))
        settings.setdefault("deadline_s", self.deadline_s)
        if reference is not None and self.kata.impl != "solution":
            self._refuse_borrowed_reference(candidate, setup)
        verdict = compare(
            candidate,
            reference,
            ratio=float(limit),
            name=name,
            setup=setup,
            check=check,
            metric=metric,
            cost=cost,
            recorded=recorded,
            **settings,
        )
        if peak is not None and (moves or flops):
            self._bound_by_physics(verdict, metric, moves, flops, peak)
        self._record(verdict)
        if not verdict.passed:
            pytest.fail(verdict.message(settings.get("suspicious", 100.0)), pytrace=False)
        return verdict

    def _bound_by_physics(
        self, verdict: Verdict, metric: str, moves: float, flops: float, peak: Any
    ) -> None:
        if metric not in CLOCKS and "second" not in metric:
            raise TypeError(f"budget {verdict.name!r}: moves=/flops= need a time metric")
        scale = 1e-9 if metric in CLOCKS else 1.0  # clocks count ns
        why = self.rates(
            verdict.name,
            verdict.learner_cost * scale,
            moves=moves,
            flops=flops,
            peak=peak,
            reference_seconds=verdict.reference_cost * scale,
        )
        if why and not verdict.wrong:
            verdict.wrong = why

    def rates(
        self,
        name: str,
        seconds: float,
        *,
        moves: float = 0.0,
        flops: float = 0.0,
        peak: Any = None,
        reference_seconds: float | None = None,
    ) -> str | None:
        """Report a timed kernel's rates (bytes/s, FLOP/s) and their fraction of `peak` (a
        harness.physics.Peak); return the failure sentence when the learner's rate is above the
        peak (harness.physics.MARGIN) and the reference's is not, else None. When the
        reference too is above it, the peak is not this measurement's bound (a cache holds the
        data): no verdict, a note. `physical()` is the same, failing the test."""
        from harness.physics import impossible, rate_text

        rates = self.metrics.setdefault("rates", {})
        if peak is not None:
            rates["peak"] = {"device": peak.device, "how": peak.how}
        for who, secs in (("yours", seconds), ("reference", reference_seconds)):
            if secs is None or not (secs > 0 and math.isfinite(secs)):
                continue
            entry: dict[str, Any] = {}
            if moves:
                entry["bytes/s"] = rate_text(moves / secs, "B/s")
            if flops:
                entry["FLOP/s"] = rate_text(flops / secs, "FLOP/s")
            if peak is not None:
                share = peak.fraction(
                    bytes_per_s=moves / secs if moves else 0.0,
                    flops_per_s=flops / secs if flops else 0.0,
                )
                entry["of peak"] = round(share, 3)
            rates[f"{name} ({who})"] = entry
        if peak is not None and seconds > 0 and math.isfinite(seconds):
            self._draw(name, moves / seconds, flops / seconds, peak)
        why = impossible(peak, bytes_moved=moves, flops=flops, seconds=seconds)
        if (
            why
            and reference_seconds is not None
            and impossible(peak, bytes_moved=moves, flops=flops, seconds=reference_seconds)
        ):
            rates["note"] = f"the reference too is above {peak.device}'s peak: no bound applied"
            return None
        return f"budget {name!r}: {why}" if why else None

    def _draw(self, name: str, bytes_per_s: float, flops_per_s: float, peak: Any) -> None:
        """The learner's timed kernels on the device's roofline: the report's picture."""
        from harness.physics import roofline_svg

        points = self.metrics.setdefault("roofline", [])
        points.append([name, bytes_per_s, flops_per_s])
        self.metrics["svg"] = roofline_svg(peak, [tuple(p) for p in points])
        self.metrics["label"] = (
            f"your kernels on {peak.device}'s roofline (its peaks from the device's own "
            "attributes): each one's share of the roof it is bound by"
        )

    def physical(self, name: str, seconds: float, **kw: Any) -> None:
        """`rates(...)`, failing the test with its sentence when the speed beats physics."""
        __tracebackhide__ = True
        why = self.rates(name, seconds, **kw)
        if why:
            pytest.fail(why, pytrace=False)

    def instructions(
        self, program: Any, *args: str, function: str | None = None, stdin: str | None = None
    ) -> int:
        """Callgrind's instruction count (deterministic) of running `program` (a BuildResult
        from ``native.executable`` or a path) with `args`; `function` counts only inside it."""
        __tracebackhide__ = True
        from harness.native.callgrind import CallgrindError, instruction_count
        from harness.toolchain import ToolNotFoundError

        try:
            return instruction_count(program, *args, function=function, stdin=stdin)
        except ToolNotFoundError as e:
            pytest.skip(f"instruction-count budgets need valgrind: {e}")
        except CallgrindError as e:
            pytest.fail(f"the program failed under callgrind: {e}", pytrace=False)

    def _refuse_borrowed_reference(
        self, candidate: Callable[..., Any], setup: Callable[..., Any] | None
    ) -> None:
        """One untimed call of `candidate` watched for the reference's code: the reference this
        budget loaded is in the same process, and running it must not pass for the learner's."""
        __tracebackhide__ = True
        from harness.budgets.measure import first_arguments
        from harness.sandbox import fence

        args = first_arguments(setup)
        _, ran = fence.reference_calls(self.kata._package(), candidate, *args)
        if ran:
            pytest.fail(
                f"budget: your code ran the reference solution ({', '.join(ran[:3])}) instead "
                "of its own; the budget measures yours",
                pytrace=False,
            )

    def compare_instructions(
        self,
        mine: Any,
        reference: Any | None,
        *args: str,
        name: str,
        ratio: float | None = None,
        function: str | None = None,
        stdin: str | None = None,
    ) -> Verdict:
        """The instruction count of the learner's program over the reference's: one run each
        (the count repeats exactly). `reference=None` uses ``[budgets.<name>] reference``."""
        __tracebackhide__ = True
        count = lambda program: (
            lambda: self.instructions(program, *args, function=function, stdin=stdin)
        )
        return self.compare(
            count(mine),
            None if reference is None else count(reference),
            name=name,
            ratio=ratio,
            metric="instructions",
            rounds=1,
        )

    # ------------------------------------------------------------------ internals
    def _entry(self, name: str) -> dict[str, Any]:
        """kata.toml's ``[budgets]`` entry for `name`: ``name = 2.0`` or a table."""
        __tracebackhide__ = True
        raw = self.kata.manifest.budgets.get(name, {})
        where = f"{self.kata.manifest.path}: budgets.{name}"
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            raw = {"ratio": raw}
        if not isinstance(raw, dict) or set(raw) - _ENTRY_KEYS:
            pytest.fail(
                f"{where}: must be a ratio or a table of {', '.join(sorted(_ENTRY_KEYS))}",
                pytrace=False,
            )
        for key in ("ratio", "reference"):
            value = raw.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
            ):
                pytest.fail(
                    f"{where}.{key}: must be a positive number, got {value!r}", pytrace=False
                )
        return raw

    def _record(self, verdict: Verdict) -> None:
        # All comparisons under "budgets"; the worst one also as ratio/budget/unit, the keys the
        # reports draw as a chart.
        self.verdicts.append(verdict)
        self.metrics.setdefault("budgets", []).append(verdict.as_metrics())
        worst = max(self.verdicts, key=lambda v: (not v.passed, v.ratio / v.limit))
        self.metrics["ratio"] = round(worst.ratio, 4)
        self.metrics["budget"] = worst.limit
        self.metrics["unit"] = unit(worst.metric)


def _no_reference_reason(kata: KataContext, name: str = "", metric: str = "time") -> str:
    what = f"budget {name!r}" if name else "budget test"
    recorded = (
        f", and kata.toml records no [budgets.{name}] reference {metric}"
        if name and metric not in CLOCKS
        else ""
    )
    return (
        f"{what} skipped: no reference implementation to compare against (this checkout has "
        f"no solutions/ mirror of kata {kata.manifest.id!r}{recorded})"
    )


@pytest.fixture
def kata_budget(
    request: pytest.FixtureRequest, kata: KataContext, kata_metrics: dict[str, Any]
) -> KataBudget:
    """Compare the learner's implementation with the reference: ``kata_budget.compare(...)``.
    A test using it is a budget test: it runs alone and ``--kata-no-budgets`` skips it."""
    config = request.config
    if reason := _off(config):
        pytest.skip(reason)
    limit = kata.manifest.time_limit
    # Stop re-measuring well before the kata's per-test time limit fires.
    deadline = 60.0 if config.option.kata_no_timeout else max(1.0, 0.5 * limit)
    option = config.getoption("kata_sanitize", default=None)
    sanitize = tuple(s for s in (option or "").split(",") if s)
    return KataBudget(kata, kata_metrics, min(deadline, 20.0), sanitize)
