"""Budget reliability: how often a budget judges wrongly while the machine is busy.

The reference is judged against a copy of itself (ratio 1 expected: every failure is a false
failure) and against a copy that does the work three times (ratio 3: every pass is a miss), with
the budget at their geometric middle, 1.7x. Meanwhile `--busy` processes spin on the CPU (one is
"the other core busy" on a 2-core machine; two oversubscribe it).

    python harness/benchmarks/bench_budgets.py [--trials 50] [--busy 1] [--metric time]

Goals (issue 6): 0 false failures out of 50, and the 3x-slowed copy caught every time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from harness.budgets.measure import compare

SOURCE = """\
def work(xs):
    total = 0
    for _ in range(REPEAT):
        total = 0
        for x in xs:
            total += x * x
    return total
"""


def load(repeat: int) -> Callable[[list[int]], int]:
    # A separately compiled copy, as a learner's module would be.
    namespace: dict = {}
    exec(compile(SOURCE.replace("REPEAT", str(repeat)), f"<work x{repeat}>", "exec"), namespace)
    return namespace["work"]


def inputs(seed: int) -> tuple[list[int]]:
    return (list(range(seed % 7, seed % 7 + 2000)),)


def check(result: int, xs: list[int]) -> None:
    assert result == sum(x * x for x in xs)


def busy(n: int) -> list[subprocess.Popen]:
    code = "while True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def trials(candidate: Callable, reference: Callable, n: int, metric: str, limit: float) -> list:
    out = []
    for _ in range(n):
        out.append(
            compare(
                candidate,
                reference,
                ratio=limit,
                name="work",
                setup=inputs,
                check=check,
                metric=metric,
            )  # fmt: skip
        )
    return out


def describe(label: str, verdicts: list, goal_pass: bool) -> None:
    ratios = sorted(v.ratio for v in verdicts)
    wrong = sum(v.passed != goal_pass for v in verdicts)
    remeasured = sum(v.remeasured for v in verdicts)
    rounds = [v.rounds for v in verdicts]
    q = statistics.quantiles(ratios, n=20, method="inclusive")
    what = "false failures" if goal_pass else "misses (passed)"
    print(f"{label}: {wrong}/{len(verdicts)} {what}; remeasured {remeasured}; "
          f"rounds {min(rounds)}..{max(rounds)}")  # fmt: skip
    print(f"  median ratio: min {ratios[0]:.3f}  p5 {q[0]:.3f}  p25 {q[4]:.3f}  "
          f"p50 {q[9]:.3f}  p75 {q[14]:.3f}  p95 {q[18]:.3f}  max {ratios[-1]:.3f}")  # fmt: skip
    spreads = [v.spread for v in verdicts]
    print(f"  per-run spread (IQR/median of its rounds): median {statistics.median(spreads):.3f}, "
          f"max {max(spreads):.3f}; calls/round {verdicts[0].calls_per_round}")  # fmt: skip
    lo, hi = ratios[0], ratios[-1]
    bins = 10
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for r in ratios:
        counts[min(bins - 1, int((r - lo) / width))] += 1
    for i, c in enumerate(counts):
        print(f"    {lo + i * width:6.3f}..{lo + (i + 1) * width:6.3f} {'#' * c}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--slow-trials", type=int, default=None, help="default: --trials")
    ap.add_argument("--busy", type=int, default=1, help="spinning processes beside the budget")
    ap.add_argument("--metric", default="time", choices=("time", "cpu"))
    ap.add_argument(
        "--limit", type=float, default=1.7, help="the budget (geometric middle of 1, 3)"
    )
    args = ap.parse_args()

    reference, same, slow = load(1), load(1), load(3)
    print(f"cpus: {os.cpu_count()}  busy processes: {args.busy}  metric: {args.metric}  "
          f"budget: {args.limit}x  trials: {args.trials}")  # fmt: skip
    spinners = busy(args.busy)
    try:
        time.sleep(0.2)  # let the spinners start
        t0 = time.monotonic()
        self_verdicts = trials(same, reference, args.trials, args.metric, args.limit)
        t1 = time.monotonic()
        slow_verdicts = trials(
            slow, reference, args.slow_trials or args.trials, args.metric, args.limit
        )
        t2 = time.monotonic()
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    describe("reference vs itself", self_verdicts, goal_pass=True)
    print(f"  {(t1 - t0) / len(self_verdicts):.2f} s per budget")
    describe("3x-slowed copy", slow_verdicts, goal_pass=False)
    print(f"  {(t2 - t1) / len(slow_verdicts):.2f} s per budget")
    false_failures = sum(not v.passed for v in self_verdicts)
    misses = sum(v.passed for v in slow_verdicts)
    print(f"RESULT false_failures={false_failures}/{len(self_verdicts)} "
          f"caught={len(slow_verdicts) - misses}/{len(slow_verdicts)}")  # fmt: skip
    return 0 if false_failures == 0 and misses == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
