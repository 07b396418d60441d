"""What the sandbox (harness/sandbox) costs: start-up, per test, and a restart after a crash.

Same-run baselines: one generated kata, run with the sandbox (a child per kata, the default),
with a child per test (``--kata-sandbox=test``) and in-process (``--kata-no-sandbox``), in
interleaved rounds; medians, printed as ms/test and ratios.

    python harness/benchmarks/bench_sandbox.py [--tests 300] [--crashes 30] [--rounds 5]

Times are pytest's session times (collection to summary), so the interpreter's start-up, the
same for every variant, does not add its noise.

- start-up: a kata of one test; the sandbox forks one child and waits for its hello.
- per test: (time for N tests - time for 1 test) / (N - 1), per mode.
- crash-restart: a kata whose every test segfaults, so every test costs a dead child and a new
  one (fork, limits, the tamper guard's snapshot), against the same tests passing in one child.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MANIFEST = """\
id = "{kid}"
title = "Sandbox benchmark kata"
phase = 1
summary = "many trivial tests"
languages = ["python"]
files = ["impl.py"]
time_limit = 30
[[tasks]]
id = "all"
title = "All"
points = 10
tests = ["test_*"]
"""
GOOD = "def f():\n    return 1\n"
CRASH = "import ctypes\n\n\ndef f():\n    return ctypes.string_at(0)\n"  # SIGSEGV


def make_kata(root: Path, kid: str, n_tests: int, impl: str) -> Path:
    kata = root / "katas" / "phase01" / kid
    (kata / "tests").mkdir(parents=True)
    (kata / "kata.toml").write_text(MANIFEST.format(kid=kid))
    (kata / "impl.py").write_text(impl)
    head = "import pytest\n\n\n@pytest.fixture\ndef impl(kata):\n    return kata.module('impl')\n\n"
    body = "".join(f"def test_{i}(impl):\n    assert impl.f() == 1\n\n" for i in range(n_tests))
    (kata / "tests" / f"test_{kid}.py").write_text(head + body)
    return kata


def make_tree(root: Path, n_tests: int, n_crashes: int) -> dict[str, Path]:
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "--import-mode=importlib -p no:cacheprovider"\n'
    )
    return {
        "one": make_kata(root, "one", 1, GOOD),
        "many": make_kata(root, "many", n_tests, GOOD),
        "ok": make_kata(root, "ok", n_crashes, GOOD),
        "crash": make_kata(root, "crash", n_crashes, CRASH),
    }


SESSION = re.compile(r"(?:passed|failed)\b.* in ([\d.]+)s")


def timed(args: list[str], cwd: Path, expect_fail: bool = False) -> float:
    """Seconds of the pytest session (collection to summary, as pytest reports it): the
    interpreter's start-up, the same for every variant, is left out of the noise."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args]
    proc = subprocess.run(cmd, cwd=cwd, check=False, capture_output=True, text=True)
    if (proc.returncode != 0) != expect_fail or proc.returncode not in (0, 1):
        sys.exit(f"benchmark run failed ({proc.returncode}): {' '.join(args)}\n{proc.stdout}")
    found = SESSION.findall(proc.stdout)
    if not found:
        sys.exit(f"no session time in the output of {' '.join(args)}\n{proc.stdout}")
    return float(found[-1])


MODES = {
    "in-process": ["--kata-no-sandbox"],
    "child per kata": [],
    "child per test": ["--kata-sandbox=test"],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", type=int, default=300)
    ap.add_argument("--crashes", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        katas = {
            k: str(p.relative_to(root))
            for k, p in make_tree(root, args.tests, args.crashes).items()
        }
        one: dict[str, list[float]] = {m: [] for m in MODES}
        many: dict[str, list[float]] = {m: [] for m in MODES}
        ok, crash = [], []
        for _ in range(args.rounds):  # interleaved: every variant once per round
            for mode, flags in MODES.items():
                one[mode].append(timed([*flags, katas["one"]], root))
                many[mode].append(timed([*flags, katas["many"]], root))
            ok.append(timed([katas["ok"]], root))
            crash.append(timed([katas["crash"]], root, expect_fail=True))
    med = statistics.median
    base = "in-process"
    per_test = {
        m: med((b - a) / (args.tests - 1) for a, b in zip(one[m], many[m], strict=True))
        for m in MODES
    }
    print(f"start-up (a kata of 1 test), {args.rounds} rounds, medians:")
    for m in MODES:
        extra = med(a - b for a, b in zip(one[m], one[base], strict=True))
        print(f"  {m:16s}: {med(one[m]) * 1000:8.1f} ms  (+{extra * 1000:6.1f} ms, "
              f"{med(one[m]) / med(one[base]):.2f}x)")  # fmt: skip
    print(f"per test ({args.tests} trivial tests in one kata):")
    for m in MODES:
        print(f"  {m:16s}: {per_test[m] * 1000:8.3f} ms/test  "
              f"(+{(per_test[m] - per_test[base]) * 1000:6.3f} ms, "
              f"{per_test[m] / per_test[base]:.2f}x)")  # fmt: skip
    restart = med((c - o) / args.crashes for c, o in zip(crash, ok, strict=True))
    print(f"crash-restart ({args.crashes} tests that all segfault vs the same tests passing):")
    print(f"  passing, one child : {med(ok) * 1000:8.1f} ms  ({med(ok) / args.crashes * 1000:.1f} "
          f"ms/test)")  # fmt: skip
    print(f"  segfaulting        : {med(crash) * 1000:8.1f} ms  "
          f"({med(crash) / args.crashes * 1000:.1f} ms/test)")  # fmt: skip
    print(f"  cost of a crash    : {restart * 1000:8.1f} ms/test  (death report + a new child)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
