"""What the harness adds to a pytest run: start-up and per-test cost.

Same-run baselines: each measurement runs the same test files with the plugin and with it
blocked (``-p no:gpu_katas``), interleaved, and reports medians and ratios.

    python harness/benchmarks/bench_harness.py [--tests 400] [--rounds 7]

Goals (issue 3): start-up under 0.3 s, per-test cost under 5 ms. The per-test cost is shown
with the sandbox (the default: a child per kata, issue 5) and without it (--kata-no-sandbox).
Python's bytecode cache matters here: with PYTHONDONTWRITEBYTECODE=1 (set on some CI images)
every harness module is compiled, and assertion-rewritten by pytest, at every start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MANIFEST = """\
id = "bench"
title = "Benchmark kata"
phase = 1
summary = "many trivial tests"
languages = ["python"]
files = ["impl.py"]
[[tasks]]
id = "all"
title = "All"
points = 10
tests = ["test_*"]
"""


def make_tree(root: Path, n_tests: int) -> None:
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "--import-mode=importlib"\n'
    )
    kata = root / "katas" / "phase01" / "bench"
    (kata / "tests").mkdir(parents=True)
    (kata / "kata.toml").write_text(MANIFEST)
    (kata / "impl.py").write_text("def f():\n    return 1\n")
    body = "".join(f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(n_tests))
    (kata / "tests" / "test_many.py").write_text(body)
    plain = root / "plain"
    plain.mkdir()
    (plain / "test_many.py").write_text(body)
    (root / "empty").mkdir()
    (root / "empty" / "test_one.py").write_text("def test_one():\n    pass\n")


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=False, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_tree(root, args.tests)
        start_with, start_without, run_kata, run_plain, run_nosb = [], [], [], [], []
        for _ in range(args.rounds):  # interleaved: A B A B ...
            start_with.append(timed([*pytest_cmd, "empty"], root))
            start_without.append(timed([*pytest_cmd, "-p", "no:gpu_katas", "empty"], root))
            run_kata.append(timed([*pytest_cmd, "katas"], root))
            run_plain.append(timed([*pytest_cmd, "-p", "no:gpu_katas", "plain"], root))
            run_nosb.append(timed([*pytest_cmd, "--kata-no-sandbox", "katas"], root))
    med = statistics.median
    startup = med(a - b for a, b in zip(start_with, start_without, strict=True))
    per_test = med(
        ((a - sa) - (b - sb)) / args.tests
        for a, b, sa, sb in zip(run_kata, run_plain, start_with, start_without, strict=True)
    )
    per_test_nosb = med(
        ((a - sa) - (b - sb)) / args.tests
        for a, b, sa, sb in zip(run_nosb, run_plain, start_with, start_without, strict=True)
    )
    cache = "off (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(f"bytecode cache                     : {cache}")
    print(f"pytest start-up without the plugin : {med(start_without) * 1000:8.1f} ms")
    print(f"pytest start-up with the plugin    : {med(start_with) * 1000:8.1f} ms")
    print(f"  start-up added by the plugin     : {startup * 1000:8.1f} ms  (goal < 300 ms)")
    print(f"  ratio with/without               : {med(start_with) / med(start_without):8.2f}x")
    print(f"{args.tests} tests, plain               : {med(run_plain) * 1000:8.1f} ms")
    print(f"{args.tests} tests in a kata             : {med(run_kata) * 1000:8.1f} ms")
    print(f"  per-test cost added              : {per_test * 1000:8.3f} ms  (goal < 5 ms)")
    print(f"  ratio kata/plain                 : {med(run_kata) / med(run_plain):8.2f}x")
    print(f"  ... without the sandbox          : {per_test_nosb * 1000:8.3f} ms per test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
