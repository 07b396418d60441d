"""GIVEN (not graded): the generator of the request traces in traces/ (run it to remake them).

    python gen_traces.py            # writes traces/<kind>.json for the shipped seeds

Arrivals are a Poisson process; prompt and output lengths are log-normal (clipped), the shape
production traces show (many short requests, a long tail). Kinds:

- chat:     Llama-3-8B on one H100; short prompts, medium answers, arriving at 20 requests/s
            (more than static batching can serve, less than continuous batching can);
- rag:      the same GPU; 30 % of the prompts are 3-7k tokens of retrieved documents: a long
            prefill in the same step as other requests' decodes stalls them (chunked prefill);
- kv-bound: Llama-3-70B on two H100s (TP 2), where the KV cache holds only 41k tokens
            (2577 blocks): requests outgrow it and must be preempted; a quarter of them are
            interactive (priority 0), the rest batch jobs (priority 1).

Each trace names its engine setup (step-cost constants from engine.py, KV blocks, swap space)
and its latency SLOs (TTFT and TPOT targets, for goodput).
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from typing import Any

SHIPPED = {"chat": 21, "rag": 22, "kv-bound": 23}
# kind: (step cost in engine.py, gpu blocks, cpu blocks, requests, rate/s, TTFT SLO s, TPOT SLO s)
CONFIG = {
    "chat": ("H100_LLAMA_3_8B", 29205, 0, 300, 20.0, 1.0, 0.05),
    "rag": ("H100_LLAMA_3_8B", 29205, 0, 240, 6.0, 2.0, 0.05),
    "kv-bound": ("H100X2_LLAMA_3_70B", 2577, 1024, 120, 1.8, 3.0, 0.1),
}


def _lognormal(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    return max(lo, min(hi, round(rng.lognormvariate(math.log(median), sigma))))


def generate(kind: str, seed: int, size: float = 1.0) -> dict[str, Any]:
    """The trace of `kind` made from `seed`; `size` scales the number of requests."""
    if kind not in CONFIG:
        raise ValueError(f"unknown trace kind {kind!r} (known: {', '.join(CONFIG)})")
    cost, blocks, cpu_blocks, n, rate, ttft_slo, tpot_slo = CONFIG[kind]
    rng = random.Random(seed)
    t, reqs = 0.0, []
    for i in range(max(1, int(n * size))):
        t += rng.expovariate(rate)
        priority = 0
        if kind == "rag" and rng.random() < 0.3:
            prompt, output = rng.randint(3000, 7000), _lognormal(rng, 100, 0.5, 8, 400)
        elif kind == "kv-bound":
            prompt, output = _lognormal(rng, 800, 0.7, 32, 6000), _lognormal(rng, 300, 0.7, 8, 1500)
            priority = 0 if rng.random() < 0.25 else 1
        else:
            prompt, output = _lognormal(rng, 400, 0.8, 16, 4000), _lognormal(rng, 120, 0.7, 4, 1000)
        max_tokens = 2048 if kind == "kv-bound" else 1024
        reqs.append([i, round(t, 6), prompt, min(output, max_tokens), max_tokens, priority])
    return {
        "kind": kind,
        "seed": seed,
        "cost": cost,
        "num_blocks": blocks,
        "block_size": 16,
        "num_cpu_blocks": cpu_blocks,
        "slo": {"ttft": ttft_slo, "tpot": tpot_slo},
        "fields": ["id", "arrival", "prompt_len", "output_len", "max_tokens", "priority"],
        "requests": reqs,
    }


def main(out_dir: Path) -> None:
    out_dir.mkdir(exist_ok=True)
    for kind, seed in SHIPPED.items():
        path = out_dir / f"{kind}.json"
        trace = generate(kind, seed)
        lines = ",\n".join(json.dumps(r) for r in trace.pop("requests"))
        path.write_text(json.dumps(trace)[:-1] + ', "requests": [\n' + lines + "\n]}\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "traces")
