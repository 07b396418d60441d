"""Ring all-reduce: busbw against message size, next to the same run's link bandwidth.

For N = 2..4 ranks (real processes over loopback TCP, the kata's given cluster.py) and message
sizes from 1 KiB to 16 MiB, times the ring (ring_allreduce), recursive doubling
(recursive_doubling_allreduce) and all_reduce (its default threshold between them) the way
nccl-tests' all_reduce_perf does -- the best of a few calls, from the last rank's start to the
last rank's end -- and prints busbw = S / t x 2(N-1)/N next to cluster.link_bandwidth(N, S):
every link busy at once with the same bytes, no arithmetic (the bound busbw approaches). Writes
an SVG plot, one panel per N, log-log.

    python harness/benchmarks/bench_ring_allreduce.py [--impl solution|learner|shortcut:NAME]
        [--ranks 2 3 4] [--max-mib 16] [--svg ring-busbw.svg]

The kata's README figure (katas/phase08/ring-allreduce/ring-busbw.svg) is this plot of the
reference on the machine that wrote it; the numbers under it say which machine that was.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from harness.reports.busbw import ALGORITHMS, LABELS, busbw_svg, human

ROOT = Path(__file__).resolve().parents[2]
KATA = ROOT / "katas" / "phase08" / "ring-allreduce"


def load(impl: str) -> tuple[Any, Any]:
    """The kata's ring and cluster modules of implementation `impl`, as the tests load them."""
    sys.path.insert(0, str(ROOT))
    from harness.loader import context_for

    ctx = context_for(KATA / "kata.toml", impl)
    return ctx.module("ring"), ctx.module("cluster")


def best_call(cluster: Any, fn: Any, n: int, count: int, repeat: int) -> float:
    """Seconds of the fastest of `repeat` calls, from the last rank's start to the last end."""
    xs = [np.ones(count, np.float32) for _ in range(n)]
    job = cluster.run(fn, xs, op="sum", repeat=repeat, deadline=120.0)
    outs = job.outputs()
    if any(not np.array_equal(o, np.full(count, n, np.float32)) for o in outs):
        raise SystemExit(f"{fn.__name__}(n={n}, {count} x float32) returned a wrong sum")
    rs = job.results
    return min(
        max(r.times[i][1] for r in rs) - max(r.times[i][0] for r in rs) for i in range(repeat)
    )


def measure(
    ring: Any, cluster: Any, ranks: list[int], sizes: list[int], rounds: int
) -> dict[int, list[dict]]:
    """Each (N, size) `rounds` times, the rounds apart in time (a busy moment of the machine
    hits one of them): the best busbw of each algorithm, and the best link bandwidth."""
    best: dict[tuple[int, int], dict[str, float]] = {}
    for _ in range(rounds):
        for n in ranks:
            for nbytes in sizes:
                repeat = max(5, min(30, (4 << 20) // nbytes))
                row = best.setdefault((n, nbytes), {"bytes": nbytes})
                row["link"] = max(row.get("link", 0.0), cluster.link_bandwidth(n, nbytes, rounds=3))
                for name in ALGORITHMS:
                    t = best_call(cluster, getattr(ring, name), n, nbytes // 4, repeat)
                    if cluster.busbw(nbytes, t, n) > row.get(name, 0.0):
                        row[name] = cluster.busbw(nbytes, t, n)
                        row[name + "_us"] = t * 1e6
    rows: dict[int, list[dict]] = {}
    for n in ranks:
        rows[n] = [best[(n, nbytes)] for nbytes in sizes]
        for row in rows[n]:
            print(
                f"N={n} {human(row['bytes']):>8}  link {row['link'] / 1e6:7.1f} MB/s  "
                + "  ".join(
                    f"{LABELS[a].split()[0]} {row[a] / 1e6:7.1f} MB/s ({row[a + '_us']:7.0f} us)"
                    for a in ALGORITHMS
                ),
                flush=True,
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = "solution" if (ROOT / "solutions").is_dir() else "learner"
    parser.add_argument("--impl", default=default, help="solution, learner or shortcut:NAME")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--min-kib", type=int, default=1, help="smallest message (KiB)")
    parser.add_argument("--max-mib", type=int, default=16, help="largest message (MiB)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over every size")
    parser.add_argument("--svg", type=Path, default=Path("ring-busbw.svg"))
    args = parser.parse_args()

    ring, cluster = load(args.impl)
    sizes, b = [], args.min_kib << 10
    while b <= args.max_mib << 20:
        sizes.append(b)
        b *= 4
    load_avg = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.impl}, {os.cpu_count()} CPUs, load {load_avg}; busbw = S/t x 2(N-1)/N")
    rows = measure(ring, cluster, args.ranks, sizes, args.rounds)
    print("\nat the largest size:")
    for n, rs in rows.items():
        r = rs[-1]
        print(
            f"  N={n}: ring busbw {r['ring_allreduce'] / 1e6:.0f} MB/s = "
            f"{r['ring_allreduce'] / r['link']:.2f} x the link's {r['link'] / 1e6:.0f} MB/s; "
            f"recursive doubling {r['recursive_doubling_allreduce'] / r['link']:.2f} x"
        )
        ring_from = next(
            (
                x["bytes"]
                for i, x in enumerate(rs)
                if all(y["ring_allreduce"] >= y["recursive_doubling_allreduce"] for y in rs[i:])
            ),
            None,
        )
        print(
            f"        the ring is faster from {human(ring_from)} on"
            if ring_from
            else "        recursive doubling was faster even at the largest size"
        )
    title = (
        f"ring all-reduce over loopback TCP ({args.impl}, {os.cpu_count()} CPUs, load "
        f"{load_avg.split()[0]}): busbw vs message size, best of {args.rounds} rounds"
    )
    args.svg.write_text(busbw_svg(rows, title) + "\n", encoding="utf-8")
    print(f"wrote {args.svg}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
