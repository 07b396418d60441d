"""Predictions for kernels.cu and the launches in launches.py (reference).

Registers and static shared memory: `nvcc -cubin -arch=<arch> -Xptxas -v kernels.cu` (CUDA 13.0).
Occupancy: the four limits of README.md applied to those numbers plus each launch's dynamic
shared memory.
"""

from __future__ import annotations


def resources() -> dict[str, dict[str, dict[str, int]]]:
    """{arch: {kernel: {"registers": R, "shared_bytes": S}}}: what ptxas says, asked at run time."""
    from pathlib import Path

    from harness.cuda import static

    here = Path(__file__).resolve()
    candidates = [here.with_name("kernels.cu")]
    candidates += [p / "katas/phase02/occupancy/kernels.cu" for p in here.parents]
    source = next(c for c in candidates if c.exists())
    out: dict[str, dict[str, dict[str, int]]] = {}
    for arch in ("sm_75", "sm_90"):
        found = static.ptxas_resources(source, arch)
        out[arch] = {
            k: {"registers": found[k].registers, "shared_bytes": found[k].shared_bytes}
            for k in ("scale", "transpose32", "heavy40", "block_sum")
        }
    return out


def launches() -> dict[str, dict[str, object]]:
    """{launch name: {"blocks_per_sm": B, "occupancy": O, "limiters": [resource, ...]}}."""
    from .launches import LAUNCHES
    from .occupancy import occupancy

    res = resources()
    out: dict[str, dict[str, object]] = {}
    for name, launch in LAUNCHES.items():
        r = res[launch.arch][launch.kernel]
        o = occupancy(
            launch.arch,
            launch.threads_per_block,
            r["registers"],
            r["shared_bytes"] + launch.dynamic_shared_bytes,
        )
        out[name] = {
            "blocks_per_sm": o.active_blocks_per_sm,
            "occupancy": o.occupancy,
            "limiters": list(o.limiters),
        }
    return out
