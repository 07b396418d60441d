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
import math
import os
import sys
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
KATA = ROOT / "katas" / "phase08" / "ring-allreduce"
ALGORITHMS = ("ring_allreduce", "recursive_doubling_allreduce", "all_reduce")
COLOURS = {
    "ring_allreduce": "#1f77b4",
    "recursive_doubling_allreduce": "#d62728",
    "all_reduce": "#2ca02c",
    "link": "#555555",
}
LABELS = {
    "ring_allreduce": "ring",
    "recursive_doubling_allreduce": "recursive doubling",
    "all_reduce": "all_reduce (threshold)",
    "link": "link bandwidth at the largest size (same run)",
}


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


def human(nbytes: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:g} {unit}"
    return f"{nbytes} B"


def svg(rows: dict[int, list[dict]], title: str) -> str:
    """One log-log panel per N: busbw (MB/s) of each algorithm and the link bandwidth."""
    w, h, pad_l, pad_t, gap = 300, 240, 60, 46, 56
    values = [r[k] for rs in rows.values() for r in rs for k in ALGORITHMS]
    values += [rs[-1]["link"] for rs in rows.values()]
    y_lo = math.floor(math.log10(max(min(values), 1.0) / 1e6))
    y_hi = math.ceil(math.log10(max(values) / 1e6))
    y_hi = max(y_hi, y_lo + 1)
    sizes = [r["bytes"] for r in next(iter(rows.values()))]
    x_lo, x_hi = math.log2(sizes[0]), math.log2(sizes[-1])
    width = pad_l + len(rows) * (w + gap) + 10
    height = pad_t + h + 90
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="18" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    for k, (n, rs) in enumerate(rows.items()):
        x0, y0 = pad_l + k * (w + gap), pad_t

        def sx(b: float, x0: float = x0) -> float:
            return x0 + w * (math.log2(b) - x_lo) / ((x_hi - x_lo) or 1)

        def sy(v: float, y0: float = y0) -> float:
            return y0 + h - h * (math.log10(max(v, 1.0) / 1e6) - y_lo) / (y_hi - y_lo)

        out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#444"/>')
        out.append(f'<text x="{x0 + w / 2}" y="{y0 - 6}" text-anchor="middle">N = {n}</text>')
        for e in range(y_lo, y_hi + 1):
            y = sy(10.0**e * 1e6)
            out.append(
                f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#ddd"/>'
                f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{10.0**e:g}</text>'
            )
        for b in sizes[::2]:
            out.append(
                f'<text x="{sx(b):.1f}" y="{y0 + h + 14}" text-anchor="middle">'
                f"{escape(human(b).replace(' ', ''))}</text>"
            )
        out.append(
            f'<text x="{x0 + w / 2}" y="{y0 + h + 30}" text-anchor="middle">message size</text>'
        )
        # The bound: what the links carried with the largest message (the probe's own latency, a
        # thread start per round, makes its small-message figures no bound at all).
        y = sy(rs[-1]["link"])
        out.append(
            f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="{COLOURS["link"]}" '
            'stroke-width="2" stroke-dasharray="5,4"/>'
        )
        for name in ALGORITHMS:
            pts = " ".join(f"{sx(r['bytes']):.1f},{sy(r[name]):.1f}" for r in rs)
            out.append(
                f'<polyline points="{pts}" fill="none" stroke="{COLOURS[name]}" stroke-width="2"/>'
            )
            out.extend(
                f'<circle cx="{sx(r["bytes"]):.1f}" cy="{sy(r[name]):.1f}" r="2.5" '
                f'fill="{COLOURS[name]}"/>'
                for r in rs
            )
    out.append(
        f'<text x="14" y="{pad_t + h / 2}" transform="rotate(-90 14 {pad_t + h / 2})" '
        'text-anchor="middle">busbw (MB/s, log)</text>'
    )
    lx = pad_l
    for name in ("link", *ALGORITHMS):
        out.append(
            f'<rect x="{lx}" y="{height - 24}" width="12" height="12" fill="{COLOURS[name]}"/>'
            f'<text x="{lx + 16}" y="{height - 14}">{escape(LABELS[name])}</text>'
        )
        lx += 36 + 6 * len(LABELS[name])
    out.append("</svg>")
    return "".join(out)


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
    args.svg.write_text(svg(rows, title) + "\n", encoding="utf-8")
    print(f"wrote {args.svg}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
