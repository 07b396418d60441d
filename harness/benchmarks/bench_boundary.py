"""The cost of the type-exact boundary (harness/boundary.py) per call of a learner function.

A scratch kata whose learner module returns each kind of value a kata returns (an int, a float,
a short and a long list of ints, a list of tuples, a dict, a given dataclass, a numpy array, a
method's int), loaded through the loader as the `kata` fixture does. Each is called in a tight
loop from here (outside learner code: checked) and, for comparison, through ``__wrapped__`` (the
learner's function itself). Prints nanoseconds per call for both and the difference; the
``internal`` row is learner code calling its own guarded function (the caller check only).

    python harness/benchmarks/bench_boundary.py [--seconds 0.3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.loader import KataContext  # noqa: E402
from harness.manifest import load_manifest  # noqa: E402

MANIFEST = """\
id = "bench-boundary"
title = "Boundary benchmark"
phase = 1
summary = "values"
languages = ["python"]
files = ["calc.py"]
given = ["model.py"]

[[tasks]]
id = "t"
title = "T"
points = 1
tests = ["test_*"]
"""

MODEL = """\
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    x: int
    y: float
"""

CALC = """\
from __future__ import annotations

import numpy as np

from .model import Point

LONG = list(range(1_000_000))
SHORT = list(range(1_000))
PAIRS = [(i, float(i)) for i in range(1_000)]
TABLE = {i: [i, i + 1] for i in range(1_000)}
ARRAY = np.arange(1_000_000, dtype=np.float64)


def scalar(a: int) -> int:
    return a + 1


def real(a: int) -> float:
    return a * 0.5


def short() -> list[int]:
    return SHORT


def long() -> list[int]:
    return LONG


def pairs() -> list[tuple[int, float]]:
    return PAIRS


def table() -> dict[int, list[int]]:
    return TABLE


def point() -> Point:
    return Point(1, 2.0)


def array() -> np.ndarray:
    return ARRAY


def internal(n: int) -> int:
    total = 0
    for i in range(n):
        total += scalar(i)
    return total


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def bump(self) -> int:
        self.n += 1
        return self.n
"""


def per_call(fn: Callable[[], Any], seconds: float) -> float:
    """Nanoseconds of CPU time per call of `fn` (process time: a busy machine preempts less
    of it than of the wall clock), the best of 5 rounds of ~seconds/5 each."""
    n = 1
    while True:  # calibrate
        start = time.process_time()
        for _ in range(n):
            fn()
        if time.process_time() - start > seconds / 20:
            break
        n *= 2
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - start) / n)
    return best * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="per measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kata = Path(tmp) / "katas" / "phase01" / "bench-boundary"
        kata.mkdir(parents=True)
        (kata / "kata.toml").write_text(MANIFEST)
        (kata / "model.py").write_text(MODEL)
        (kata / "calc.py").write_text(CALC)
        calc = KataContext(kata, load_manifest(kata), "learner").module("calc")
        counter = calc.Counter()
        raw_bump = calc.Counter.bump.__wrapped__
        rows: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
            ("int -> int", lambda: calc.scalar(1), lambda: calc.scalar.__wrapped__(1)),
            ("int -> float", lambda: calc.real(1), lambda: calc.real.__wrapped__(1)),
            ("list of 1e3 ints", calc.short, calc.short.__wrapped__),
            ("list of 1e6 ints", calc.long, calc.long.__wrapped__),
            ("list of 1e3 tuples", calc.pairs, calc.pairs.__wrapped__),
            ("dict of 1e3 lists", calc.table, calc.table.__wrapped__),
            ("given dataclass", calc.point, calc.point.__wrapped__),
            ("ndarray of 1e6", calc.array, calc.array.__wrapped__),
            ("method -> int", counter.bump, lambda: raw_bump(counter)),
            (
                "internal (per call)",
                lambda: calc.internal.__wrapped__(100) and None,
                lambda: sum(calc.scalar.__wrapped__(i) for i in range(100)) and None,
            ),
        ]
        print(f"{'returns':<22} {'guarded ns':>12} {'raw ns':>10} {'cost ns':>10}")
        for name, guarded, raw in rows:
            g = per_call(guarded, args.seconds)
            r = per_call(raw, args.seconds)
            if name.startswith("internal"):
                g, r = g / 100, r / 100
            print(f"{name:<22} {g:>12,.0f} {r:>10,.0f} {g - r:>10,.0f}")


if __name__ == "__main__":
    main()
