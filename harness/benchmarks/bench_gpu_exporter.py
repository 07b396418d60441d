"""GPU exporter: how long one scrape of 8 GPUs takes, and how many NVML calls it makes.

Loads the kata's exporter (the reference by default) over the given simulated NVML with N GPUs
(each with a process and a pending XID), serves it on 127.0.0.1 and times GET /metrics over
HTTP, sequentially and 8 at once, next to collect() and render() alone. The simulated NVML
answers in microseconds; on a real node each NVML call costs ~10 us to ~1 ms (process lists
and ECC queries are the slow ones), so the call count per scrape is the number to carry over:
calls x ~0.5 ms stays well under the issue's 50 ms for 8 GPUs.

    python harness/benchmarks/bench_gpu_exporter.py [--impl solution|learner|shortcut:NAME]
        [--gpus 8] [--scrapes 200]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KATA = ROOT / "katas" / "phase10" / "gpu-exporter"


def load(impl: str) -> tuple[Any, Any]:
    """The kata's exporter and nvml_sim modules of implementation `impl`, as the tests load them."""
    sys.path.insert(0, str(ROOT))
    from harness.loader import context_for

    ctx = context_for(KATA / "kata.toml", impl)
    return ctx.module("exporter"), ctx.module("nvml_sim")


def fleet(sim: Any, n: int) -> Any:
    gpus = [
        sim.SimGpu(
            uuid=f"GPU-{i:08x}-0000-0000-0000-000000000000",
            util_gpu=50 + i,
            memory_used=i << 30,
            power_mw=400_000 + i,
            processes=[sim.SimProcess(1000 + i, f"python3 train.py --rank {i}", 40 << 30)],
        )
        for i in range(n)
    ]
    return sim.SimNVML(gpus)


def ms(seconds: list[float]) -> str:
    s = sorted(seconds)
    return (
        f"median {statistics.median(s) * 1e3:.3f} ms, p99 {s[int(len(s) * 0.99) - 1] * 1e3:.3f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", default="solution")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--scrapes", type=int, default=200)
    a = ap.parse_args()
    exp, sim = load(a.impl)
    nvml = fleet(sim, a.gpus)
    exporter = exp.Exporter(nvml)
    for i in range(a.gpus):
        nvml.xid(i, 48)
    nvml.device_calls()
    exporter.collect()
    calls = nvml.device_calls()
    print(f"{a.gpus} simulated GPUs: {sum(calls.values())} NVML calls per scrape")

    def timed(fn: Any) -> list[float]:
        out = []
        for _ in range(a.scrapes):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
        return out

    snap = exporter.collect()
    print(f"collect():          {ms(timed(exporter.collect))}")
    print(f"render():           {ms(timed(lambda: exp.render(snap)))}")
    server = exp.serve(exporter, port=0)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"

    def get() -> None:
        with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 (127.0.0.1)
            r.read()

    try:
        print(f"GET /metrics:       {ms(timed(get))}")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            t = time.perf_counter()
            list(pool.map(lambda _: get(), range(a.scrapes)))
            each = (time.perf_counter() - t) / a.scrapes
        print(f"8 at once:          {each * 1e3:.3f} ms per scrape (throughput)")
    finally:
        server.shutdown()
        server.server_close()
        exporter.close()


if __name__ == "__main__":
    main()
