"""GIVEN (not graded): the generator of the job traces in traces/ (run it to remake them).

    python gen_traces.py            # writes traces/<kind>.json for the shipped seeds

Arrivals are a Poisson process; durations are log-normal (median ~25 minutes, a long tail
clipped at 12 hours): most jobs are short and a few dominate the GPU time, the shape the
Philly, Helios and PAI traces show. Users ask for more wall time than they use: the estimate is
the duration x 1-3, rounded up to 10 minutes. Shapes: many 1-GPU jobs, fewer 2-, 4- and 8-GPU
jobs, and distributed jobs of 2-4 pods of 8 GPUs. Kinds:

- dgx:      128 GPUs of DGX H100 nodes (one NVSwitch island per node), offered load ~1.1;
- quads:    128 GPUs in nodes of two 4-GPU NVLink islands, mostly 2- and 4-GPU pods (packing
            and islands matter);
- priority: the dgx cluster; a fifth of the jobs are production (priority 1) that may preempt
            research jobs (priority 0); checkpoint cost 120 s.

Rows are [id, submit s, pods, gpus_per_pod, duration s, estimate s, priority].
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from typing import Any

SHIPPED = {"dgx": 31, "quads": 32, "priority": 33}
# kind: (topology in cluster.py, jobs, offered load, checkpoint s, share of priority-1 jobs,
#        [(pods, gpus_per_pod, weight), ...])
CONFIG: dict[str, tuple[str, int, float, float, float, list[tuple[int, int, float]]]] = {
    "dgx": ("dgx-h100", 300, 1.1, 120.0, 0.0,
            [(1, 1, 0.45), (1, 2, 0.15), (1, 4, 0.15), (1, 8, 0.15), (2, 8, 0.06), (4, 8, 0.04)]),
    "quads": ("quads", 300, 1.6, 120.0, 0.0,
              [(1, 1, 0.3), (1, 2, 0.3), (1, 4, 0.3), (1, 8, 0.05), (2, 4, 0.05)]),
    "priority": ("dgx-h100", 300, 1.1, 120.0, 0.2,
                 [(1, 1, 0.45), (1, 2, 0.15), (1, 4, 0.15), (1, 8, 0.15), (2, 8, 0.06), (4, 8, 0.04)]),
}  # fmt: skip
GPUS = {"dgx-h100": 128, "quads": 128}
MEDIAN_S, SIGMA, MAX_S = 1500.0, 1.2, 12 * 3600.0


def generate(kind: str, seed: int, size: float = 1.0) -> dict[str, Any]:
    """The trace of `kind` made from `seed`; `size` scales the number of jobs."""
    if kind not in CONFIG:
        raise ValueError(f"unknown trace kind {kind!r} (known: {', '.join(CONFIG)})")
    topology, n, load, checkpoint_s, share, shapes = CONFIG[kind]
    rng = random.Random(seed)
    mean_gpu_s = sum(w * p * g for p, g, w in shapes) / sum(w for *_, w in shapes)
    mean_gpu_s *= MEDIAN_S * math.exp(SIGMA**2 / 2)  # the log-normal's mean
    rate = load * GPUS[topology] / mean_gpu_s  # jobs per second for that offered load
    t, rows = 0.0, []
    for i in range(max(1, int(n * size))):
        t += rng.expovariate(rate)
        pods, g, _ = rng.choices(shapes, weights=[w for *_, w in shapes])[0]
        duration = min(MAX_S, max(60.0, rng.lognormvariate(math.log(MEDIAN_S), SIGMA)))
        estimate = math.ceil(duration * rng.uniform(1.0, 3.0) / 600) * 600
        priority = 1 if rng.random() < share else 0
        rows.append([i, round(t, 3), pods, g, round(duration, 3), float(estimate), priority])
    return {
        "kind": kind,
        "seed": seed,
        "topology": topology,
        "checkpoint_s": checkpoint_s,
        "fields": ["id", "submit", "pods", "gpus_per_pod", "duration", "estimate", "priority"],
        "jobs": rows,
    }


def main(out_dir: Path) -> None:
    out_dir.mkdir(exist_ok=True)
    for kind, seed in SHIPPED.items():
        path = out_dir / f"{kind}.json"
        trace = generate(kind, seed)
        lines = ",\n".join(json.dumps(r) for r in trace.pop("jobs"))
        path.write_text(json.dumps(trace)[:-1] + ', "jobs": [\n' + lines + "\n]}\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "traces")
