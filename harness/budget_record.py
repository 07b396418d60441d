"""``kata verify --record``: write each kata's ``time_budget`` from the reference's own run time.

The budget is what the kata's tests may use in all before the rest fail at once (see
:mod:`harness.timekeeper`). It is recorded in ``kata.toml`` (shipped with the kata, so a learner's
run and a grader's run use the same figure) as a multiple of the time the reference solution's
tests took in the verify run, so a slower machine or a slower honest solution still fits:

    time_budget = 120  # kata verify --record: 5 x the reference's 7.9 s (at least time_limit + 30 s and 120 s)

and, for each test, the reference's own seconds (the longest of its parametrizations, fixtures
included), from which :func:`harness.timekeeper.scaled_limit` makes the test's own limit:

    [test_seconds]  # kata verify --record: the reference's seconds per test (limits at its scale)
    test_memory_blocks_and_waste = 0.05
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from .manifest import MANIFEST_NAME, Manifest
from .results import PASSED, KataResult

FACTOR = 5  # the budget over the reference's run time: slower machines, slower honest solutions
MIN_OVER_LIMIT_S = 30  # ... and at least one test's limit and this: one slow test never spends it
MIN_S = 120  # ... and this: tests waiting for the measurement lock under xdist count too
ROUND_S = 10


def budget_for(reference_s: float, time_limit: float) -> int:
    """The budget for a kata whose reference tests took `reference_s` seconds in all."""
    raw = max(FACTOR * reference_s, time_limit + MIN_OVER_LIMIT_S, MIN_S)
    return int(math.ceil(raw / ROUND_S) * ROUND_S)


def reference_seconds(kata: KataResult) -> float:
    return sum(t.duration for task in kata.tasks for t in task.tests)


_LINE = re.compile(r"^time_budget\s*=.*$", re.M)
_LIMIT = re.compile(r"^time_limit\s*=.*$", re.M)
_TABLE = re.compile(r"^\[", re.M)


def write_budget(manifest: Manifest, budget: int, reference_s: float) -> str:
    """Set ``time_budget`` in the kata's manifest (a top-level key, before any table)."""
    path: Path = manifest.dir / MANIFEST_NAME
    text = path.read_text(encoding="utf-8")
    line = (
        f"time_budget = {budget}  # kata verify --record: {FACTOR} x the reference's "
        f"{reference_s:.1f} s (at least time_limit + {MIN_OVER_LIMIT_S} s and {MIN_S} s)"
    )
    if _LINE.search(text):
        text = _LINE.sub(line, text, count=1)
    elif m := _LIMIT.search(text):
        text = text[: m.end()] + "\n" + line + text[m.end() :]
    else:
        m = _TABLE.search(text)
        at = m.start() if m else len(text)
        text = text[:at] + line + "\n" + text[at:]
    path.write_text(text, encoding="utf-8")
    return line


_SECONDS_TABLE = re.compile(r"^\[test_seconds\][^\n]*\n(?:(?!\[)[^\n]*\n?)*", re.M)


def test_seconds(kata: KataResult) -> dict[str, float]:
    """Each passing test function's longest time (over its parametrizations), rounded up to two
    figures (at least 0.01 s)."""
    out: dict[str, float] = {}
    for task in kata.tasks:
        for t in task.tests:
            if t.outcome == PASSED:
                base = t.name.split("[", 1)[0]
                out[base] = max(out.get(base, 0.0), t.duration)
    return {name: _two_figures(s) for name, s in sorted(out.items())}


def _two_figures(seconds: float) -> float:
    seconds = max(seconds, 0.01)
    step = 10 ** (math.floor(math.log10(seconds)) - 1)
    return round(math.ceil(seconds / step - 1e-9) * step, 10)


def write_test_seconds(manifest: Manifest, seconds: dict[str, float]) -> str:
    """Replace (or add, at the end) the manifest's ``[test_seconds]`` table."""
    path: Path = manifest.dir / MANIFEST_NAME
    text = path.read_text(encoding="utf-8")
    head = "[test_seconds]  # kata verify --record: the reference's seconds per test (limits at its scale)"
    table = head + "\n" + "".join(f"{name} = {s:g}\n" for name, s in seconds.items())
    if _SECONDS_TABLE.search(text):
        text = _SECONDS_TABLE.sub(lambda _m: table, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + table
    path.write_text(text, encoding="utf-8")
    return f"[test_seconds] for {len(seconds)} tests"
