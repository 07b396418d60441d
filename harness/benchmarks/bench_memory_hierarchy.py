"""Memory-hierarchy reliability: how often `kata verify` of the kata holds on a busy machine.

The kata's machine tests (the flush probe's line size, the latency sweep's levels, STREAM and FMA
rates against same-run baselines) must pass with the reference on any machine, also when other
programs are busy. This runs `kata verify katas/phase01/memory-hierarchy` `--runs` times while
`--busy` processes spin on the CPU (the default, one per core, keeps every core busy), and prints
how many runs held, the time of each, the load average, and the first problem of each failure.

    python harness/benchmarks/bench_memory_hierarchy.py [--runs 10] [--busy N] [--extra ARGS]

Goal (issue 10): 10 of 10 with every core busy.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KATA = "katas/phase01/memory-hierarchy"


def busy(n: int) -> list[subprocess.Popen]:
    code = "while True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def verify_once(extra: list[str]) -> tuple[bool, float, str]:
    """One `kata verify` of the kata: (held, seconds, its output's problem lines)."""
    cmd = [sys.executable, "-m", "harness.cli", "verify", KATA, *extra]
    t0 = time.perf_counter()
    # Its own process group: an interrupted benchmark takes the verify and its pytest runs along.
    with subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    ) as child:  # fmt: skip
        try:
            out, err = child.communicate()
        except BaseException:
            os.killpg(child.pid, signal.SIGKILL)
            raise
    proc = subprocess.CompletedProcess(cmd, child.returncode, out, err)
    seconds = time.perf_counter() - t0
    problems = [line.strip() for line in proc.stdout.splitlines() if line.startswith("    ")]
    return proc.returncode == 0, seconds, "\n".join(problems) or proc.stderr[-500:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 2, help="spinning processes")
    parser.add_argument("--extra", default="", help="more arguments for kata verify")
    args = parser.parse_args()

    print(
        f"kata verify {KATA}, {args.runs} runs, {args.busy} busy processes, {os.cpu_count()} CPUs"
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that `finally` stops the spinners
    spinners = busy(args.busy)
    held, times = 0, []
    try:
        time.sleep(1.0)  # let the spinners start before the first run
        for run in range(1, args.runs + 1):
            ok, seconds, problems = verify_once(args.extra.split())
            held += ok
            times.append(seconds)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"run {run:2d}: {'held' if ok else 'FAILED'}  {seconds:5.1f} s  load {load}")
            if not ok:
                print("   ", problems.replace("\n", "\n    "))
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    print(f"held {held}/{args.runs}; verify took {min(times):.1f}-{max(times):.1f} s")
    return 0 if held == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
