"""Performance budgets: the statistics on their own, then the plugin through pytester runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.budgets.measure import compare, describe

from .conftest import KataRepo

# --------------------------------------------------------------------------- the statistics
# Counted metrics make these exact: each call returns its cost.


def test_counted_metric_is_the_median_of_per_round_ratios() -> None:
    v = compare(lambda s: 30 + s % 2, lambda s: 10, ratio=4.0, name="f", metric="cycles",
                setup=lambda seed: seed)  # fmt: skip
    assert v.passed and v.rounds == 3 and v.ratio in (3.0, 3.1)
    assert v.as_metrics()["metric"] == "cycles"


def test_grey_zone_measures_more_rounds() -> None:
    # Ratios 1.9 / 2.1 alternate around a 2.0 budget: inside ±15%, and they vary.
    v = compare(lambda s: 19 + 2 * (s % 2), lambda s: 10, ratio=2.0, name="f", metric="cycles",
                setup=lambda seed: seed, rounds=3, max_rounds=12)  # fmt: skip
    assert v.remeasured and v.rounds == 12
    clear = compare(lambda s: 50 + s % 2, lambda s: 10, ratio=2.0, name="f", metric="cycles",
                    setup=lambda seed: seed, rounds=3)  # fmt: skip
    assert not clear.remeasured and clear.rounds == 3 and not clear.passed


def test_constant_counts_are_not_remeasured() -> None:
    v = compare(lambda: 21, lambda: 10, ratio=2.0, name="f", metric="instructions", rounds=1)
    assert v.rounds == 1 and not v.remeasured and not v.passed and v.ratio == 2.1


def test_seeded_setup_gives_both_sides_equal_but_separate_inputs() -> None:
    seen: dict[str, list] = {"mine": [], "ref": []}

    def mine(xs: list[int]) -> int:
        seen["mine"].append(list(xs))
        xs.append(-1)  # an in-place change must not reach the reference's copy
        return 1

    def ref(xs: list[int]) -> int:
        seen["ref"].append(list(xs))
        return 1

    compare(mine, ref, ratio=2.0, name="f", metric="n", setup=lambda seed: [seed] * 3)
    assert seen["mine"] == seen["ref"] and len({tuple(x) for x in seen["mine"]}) == 3


def test_checker_failure_is_a_failure_with_the_round() -> None:
    v = compare(lambda x: x + 1, lambda x: x, ratio=2.0, name="inc", metric="time",
                setup=lambda seed: seed, check=lambda out, x: out == x, round_target_s=0.001)  # fmt: skip
    assert not v.passed and "your inc returned a wrong result in budget round 0" in v.message()

    def strict(out: int, x: int) -> None:
        assert out == x, f"expected {x}, got {out}"

    v = compare(lambda x: x + 1, lambda x: x, ratio=2.0, name="inc", metric="n",
                setup=lambda seed: seed, cost=lambda out: 1, check=strict)  # fmt: skip
    assert not v.passed and "round 1: expected 0, got 1" in v.message()


def test_implausibly_fast_learner_is_suspicious_not_passing() -> None:
    v = compare(lambda: 1, lambda: 1000, ratio=2.0, name="f", metric="cycles")
    assert v.suspicious and not v.passed
    assert "1000x faster than the reference (over 100x)" in v.message(100)
    assert compare(lambda: 1, lambda: 1000, ratio=2.0, name="f", metric="c", suspicious=None).passed


def test_recorded_reference_and_arguments_checked() -> None:
    v = compare(lambda: 300, None, ratio=2.0, name="f", metric="cycles", recorded=100.0, rounds=1)
    assert not v.passed and v.ratio == 3.0 and "recorded in kata.toml" in v.message()
    with pytest.raises(ValueError, match="at least 7 rounds"):
        compare(lambda: 0, lambda: 0, ratio=2.0, name="f", rounds=5)
    with pytest.raises(ValueError, match="no recorded time"):
        compare(lambda: 0, None, ratio=2.0, name="f", recorded=1.0)


def test_clearly_over_budget_may_stop_early_but_never_pass_early() -> None:
    v = compare(lambda: 10, lambda: 1, ratio=2.0, name="f", metric="c", rounds=9, deadline_s=0)
    assert v.stopped_early and v.rounds == 3 and not v.passed
    v = compare(lambda: 1, lambda: 1, ratio=2.0, name="f", metric="c", rounds=9, deadline_s=0)
    assert not v.stopped_early and v.rounds == 9 and v.passed


def test_timed_comparison_of_equal_functions_passes() -> None:
    work = lambda xs: sum(x * x for x in xs)
    v = compare(work, work, ratio=2.0, name="sq", setup=lambda seed: (list(range(500)),))
    assert v.passed and v.rounds >= 7 and v.calls_per_round > 1, v.as_metrics()
    json.dumps(v.as_metrics())  # plain values only: they travel from xdist workers


def test_messages_read_well() -> None:
    assert describe(3.4, "time", 2.0) == "is 3.4x slower than the reference (budget 2x)"
    assert describe(2.04, "time", 2.0) == "is 2.04x slower than the reference (budget 2x)"
    assert describe(0.62, "time", 0.5) == "takes 0.6x the reference's time (budget 0.5x)"
    assert describe(1.5, "cycles", 1.2) == "takes 1.5x the reference's cycles (budget 1.2x)"


# --------------------------------------------------------------------------- the plugin
MANIFEST = """\
id = "speed"
title = "Speed kata"
phase = 1
summary = "sum of squares, fast"
languages = ["python"]
files = ["work.py"]
time_limit = 20
{extra}
[[tasks]]
id = "speed"
title = "Fast enough"
points = 10
tests = ["test_*"]
"""

REFERENCE = """\
def work(xs):
    total = 0
    for x in xs:
        total += x * x
    return total


def cycles(n):
    return 100 * n
"""

SLOW = """\
def work(xs):
    for _ in range(3):  # three times the reference's work
        total = 0
        for x in xs:
            total += x * x
    return total


def cycles(n):
    return 250 * n
"""

TESTS = """\
import pytest


def inputs(seed):
    return (list(range(seed % 5, seed % 5 + 3000)),)


def square_sum(result, xs):
    assert result == sum(x * x for x in xs)


def test_time_budget(kata, kata_budget):
    ref = kata_budget.reference.module("work")
    mine = kata.module("work")
    kata_budget.compare(mine.work, ref.work, ratio=1.7, name="work", setup=inputs,
                        check=square_sum)


def test_cycles_budget(kata, kata_budget):
    ref = kata_budget.reference.module("work") if kata_budget.reference_available else None
    mine = kata.module("work")
    kata_budget.compare(mine.cycles, ref and ref.cycles, ratio=2.0, name="cycles",
                        metric="cycles", setup=lambda seed: 10 + seed % 3)
"""


def speed_kata(repo: KataRepo, learner: str, tests: str = TESTS, solution: bool = True,
               extra: str = "") -> Path:  # fmt: skip
    repo.write("katas/phase01/speed/kata.toml", MANIFEST.format(extra=extra))
    repo.write("katas/phase01/speed/work.py", learner)
    repo.write("katas/phase01/speed/tests/test_speed.py", tests)
    if solution:
        repo.write("solutions/phase01/speed/work.py", REFERENCE)
    return repo.root / "katas/phase01/speed"


def records(repo: KataRepo) -> dict[str, dict]:
    data = json.loads((repo.root / ".kata" / "last-run.json").read_text())
    return {
        t["name"]: t for k in data["katas"] for task in k["tasks"] for t in task["tests"]
    }  # fmt: skip


def test_learner_as_fast_as_the_reference_passes(repo: KataRepo) -> None:
    speed_kata(repo, REFERENCE)
    result = repo.pytester.runpytest("katas")
    result.assert_outcomes(passed=2)
    m = records(repo)["test_time_budget"]["metrics"]
    assert m["ratio"] < 1.7 and m["budget"] == 1.7 and m["unit"] == "× reference time"
    (entry,) = m["budgets"]
    assert entry["name"] == "work" and entry["metric"] == "time" and entry["rounds"] >= 7


def test_three_times_slower_learner_fails_with_the_ratio(repo: KataRepo) -> None:
    speed_kata(repo, SLOW)
    result = repo.pytester.runpytest("katas")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    result.stdout.re_match_lines([r".*your work is [2-4]\.\dx slower than the reference "
                                  r"\(budget 1\.7x\); median of \d+ interleaved rounds.*"])  # fmt: skip
    assert "your cycles takes 2.5x the reference's cycles (budget 2x)" in out
    rec = records(repo)
    assert rec["test_time_budget"]["outcome"] == "failed"
    assert 2.4 < rec["test_time_budget"]["metrics"]["ratio"] < 3.8
    assert rec["test_cycles_budget"]["metrics"]["budgets"][0]["ratio"] == 2.5


def test_solution_run_and_kata_toml_ratio_override(repo: KataRepo) -> None:
    # --kata-impl=solution judges the reference against itself; [budgets] tunes a ratio.
    speed_kata(repo, SLOW, extra="[budgets]\ncycles = 3.0\n")
    result = repo.pytester.runpytest("katas", "--kata-impl=solution")
    result.assert_outcomes(passed=2)
    result = repo.pytester.runpytest("katas", "-k", "cycles")
    result.assert_outcomes(passed=1)
    assert records(repo)["test_cycles_budget"]["metrics"]["budget"] == 3.0


def test_grey_zone_is_remeasured_in_a_kata(repo: KataRepo) -> None:
    learner = "def cycles(n):\n    return 190 + 20 * (n % 2)\n"  # 1.9x / 2.1x around 2.0
    tests = """\
        def test_cycles(kata, kata_budget):
            ref = kata_budget.reference.module("work")
            kata_budget.compare(kata.module("work").cycles, lambda n: 100, ratio=2.0,
                                name="cycles", metric="cycles", setup=lambda seed: seed)
        """
    speed_kata(repo, learner, tests=tests)
    repo.pytester.runpytest("katas")
    (entry,) = records(repo)["test_cycles"]["metrics"]["budgets"]
    assert entry["remeasured"] is True and entry["rounds"] > 3


def test_no_budgets_option_skips_with_reason(repo: KataRepo) -> None:
    speed_kata(repo, SLOW)
    result = repo.pytester.runpytest("katas", "--kata-no-budgets", "-rs")
    result.assert_outcomes(skipped=2)
    assert "budgets are off (--kata-no-budgets)" in result.stdout.str()


def test_budgets_skip_under_the_cuda_sanitizer_with_reason(
    repo: KataRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from harness.cuda import sanitizer

    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: tmp_path / "compute-sanitizer")
    speed_kata(repo, SLOW)
    try:
        result = repo.pytester.runpytest("katas", "--kata-cuda-sanitize=memcheck", "-rs")
    finally:
        sanitizer.configure(None)
    result.assert_outcomes(skipped=2)
    assert "budgets are off under --kata-cuda-sanitize=memcheck (it slows every launch)" in (
        result.stdout.str()
    )


def test_without_a_reference_time_budgets_skip_and_recorded_counts_are_used(
    repo: KataRepo,
) -> None:
    speed_kata(repo, SLOW, solution=False,
               extra='[budgets.cycles]\nreference = 1100\nmetric = "cycles"\n')  # fmt: skip
    result = repo.pytester.runpytest("katas", "-rs")
    result.assert_outcomes(skipped=1, failed=1)
    out = result.stdout.str()
    assert "no reference implementation to compare against" in out
    assert "no solutions/ mirror of kata 'speed'" in out
    assert "your cycles takes 2.5x the reference's cycles (budget 2x)" in out
    assert "recorded in kata.toml" in out


INTERVALS = """\
import json, os, time

import pytest

LOG = {log!r}


def record(name, seconds):
    start = time.time()
    time.sleep(seconds)
    with open(os.path.join(LOG, name), "w") as f:
        json.dump([start, time.time()], f)


@pytest.mark.parametrize("i", range(6))
def test_plain(i):
    record(f"plain{{i}}", 0.25)


def test_budget(kata_budget):
    record("budget", 0.6)
    kata_budget.compare(lambda: 1, lambda: 1, ratio=2.0, name="one", metric="n")


@pytest.mark.kata_budget
def test_marked_budget():
    record("marked", 0.4)
"""


def test_budget_tests_run_alone_under_xdist(repo: KataRepo) -> None:
    log = repo.root / "intervals"
    log.mkdir()
    speed_kata(repo, REFERENCE, tests=INTERVALS.format(log=str(log)))
    result = repo.pytester.runpytest_subprocess("katas", "-n", "2")
    result.assert_outcomes(passed=8)
    spans = {p.name: json.loads(p.read_text()) for p in log.iterdir()}
    plain = sorted(v for k, v in spans.items() if k.startswith("plain"))
    overlap = lambda a, b: a[0] < b[1] and b[0] < a[1]
    # The check can see overlaps: two workers do run plain tests side by side.
    assert any(overlap(a, b) for i, a in enumerate(plain) for b in plain[i + 1 :])
    for name in ("budget", "marked"):
        others = [v for k, v in spans.items() if k != name]
        assert not any(overlap(spans[name], o) for o in others), (name, spans)


C_SUM = """\
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long kata_run(long n) {
    long s = 0;
    for (long r = 0; r < REPEAT; r++)
        for (long i = 0; i < n; i++) s += i * i;
    return s;
}
int main(int argc, char **argv) { printf("%ld\\n", kata_run(atol(argv[1]))); return 0; }
"""


@pytest.mark.skipif(not (shutil.which("valgrind") and shutil.which("gcc")), reason="needs valgrind")
def test_instruction_count_budget_through_callgrind(repo: KataRepo) -> None:
    tests = """\
        def test_instructions(kata_budget, native):
            mine = native.executable("sum.c")
            ref = kata_budget.reference_native.executable("sum.c")
            kata_budget.compare_instructions(mine, ref, "20000", ratio=2.0, name="sum",
                                             function="kata_run")
        """
    speed_kata(repo, REFERENCE, tests=tests)
    repo.write("katas/phase01/speed/sum.c", C_SUM.replace("REPEAT", "3"))
    repo.write("solutions/phase01/speed/sum.c", C_SUM.replace("REPEAT", "1"))
    result = repo.pytester.runpytest("katas")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*your sum takes 3.0x the reference's instructions (budget 2x)*"])
    (entry,) = records(repo)["test_instructions"]["metrics"]["budgets"]
    assert entry["rounds"] == 1 and entry["metric"] == "instructions"


BORROWS = """\
import inspect
import sys
import types


def _reference():
    for name, m in list(sys.modules.items()):
        if "_solution_" in name and name.endswith(".work"):
            return m
    return None


def work(xs):
    ref = _reference()
    if ref is not None:  # rebound to these globals: the code is still the reference's
        # (unwrapped: the reference's functions are behind the boundary too, harness/boundary.py)
        return types.FunctionType(inspect.unwrap(ref.work).__code__, globals())(xs)
    return 0


def found():
    return _reference() is not None
"""


def test_learner_code_running_the_reference_fails_the_budget(repo: KataRepo) -> None:
    speed_kata(repo, BORROWS)
    result = repo.pytester.runpytest("katas", "-k", "time_budget")
    result.assert_outcomes(failed=1)
    assert "budget: your code ran the reference solution (work.py:work)" in result.stdout.str()


def test_a_test_after_a_budget_cannot_find_the_reference(repo: KataRepo) -> None:
    # The child that loaded the reference for a budget runs no further test: a fresh one does.
    tests = (
        TESTS
        + """\

def test_z_later(kata):
    assert not kata.module("work").found(), "the reference is still in sys.modules"
"""
    )
    speed_kata(repo, BORROWS, tests=tests)
    result = repo.pytester.runpytest("katas", "-p", "no:randomly")
    outcomes = {name: rec["outcome"] for name, rec in records(repo).items()}
    assert outcomes["test_z_later"] == "passed", result.stdout.str()
