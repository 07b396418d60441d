"""Cold vs warm cost of `build_shared_library`: how much the build cache saves per test.

    python harness/benchmarks/bench_build_cache.py [--rounds 9] [--functions 40]

Each round builds a fresh source (cold: a new key, so gcc runs) and then rebuilds it (warm: served
from the cache). Cold and warm are measured alternately in the same run, so machine noise hits
both; the report is the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.native import build_shared_library, compile_count  # noqa: E402


def _source(round_no: int, functions: int) -> str:
    body = "\n".join(
        f"int f{i}(const int *xs, int n) {{ int s = {round_no}; "
        f"for (int j = 0; j < n; j++) s += xs[j] * {i + 1}; return s; }}"
        for i in range(functions)
    )
    return f"#include <stddef.h>\n{body}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--functions", type=int, default=40, help="size of the C file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-build-cache-") as tmp:
        os.environ["KATA_BUILD_CACHE"] = str(Path(tmp) / "cache")
        src_dir = Path(tmp) / "src"
        src_dir.mkdir()
        # Warm-up: imports, `cc --version` (memoised per process), the cache directories.
        warmup = src_dir / "warmup.c"
        warmup.write_text(_source(-1, args.functions))
        build_shared_library([warmup])
        cold_times: list[float] = []
        warm_times: list[float] = []
        for r in range(args.rounds):
            src = src_dir / f"r{r}.c"
            src.write_text(_source(r, args.functions))
            t0 = time.perf_counter()
            cold = build_shared_library([src])
            t1 = time.perf_counter()
            warm = build_shared_library([src])
            t2 = time.perf_counter()
            assert cold.compiled and not warm.compiled and cold.path == warm.path
            cold_times.append(t1 - t0)
            warm_times.append(t2 - t1)
        ratios = [c / w for c, w in zip(cold_times, warm_times, strict=True)]
        print(
            f"rounds: {args.rounds}, C file: {args.functions} functions, compiles: {compile_count()}"
        )
        print(f"cold build (gcc runs):     median {statistics.median(cold_times) * 1e3:8.2f} ms")
        print(f"warm build (cache hit):    median {statistics.median(warm_times) * 1e3:8.2f} ms")
        print(f"cold / warm ratio:         median {statistics.median(ratios):8.0f}x "
              f"(min {min(ratios):.0f}x, max {max(ratios):.0f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
