"""YOUR FILE. Predict the resources of the kernels in kernels.cu and the occupancy of the
launches in launches.py (task "predict").

Work them out first (README.md shows how), then check the registers with
`nvcc -cubin -arch=sm_75 -Xptxas -v kernels.cu -o /tmp/k.cubin` (and -arch=sm_90).
Return plain numbers: the tests compare them with ptxas and the occupancy calculator.
"""

from __future__ import annotations

from harness import todo


def resources() -> dict[str, dict[str, dict[str, int]]]:
    """{arch: {kernel: {"registers": R, "shared_bytes": S}}} for arch in launches.ARCHS and
    every kernel in launches.KERNELS; S is static shared memory only (what ptxas calls smem)."""
    todo("resources: registers and static shared memory of each kernel, for sm_75 and sm_90")


def launches() -> dict[str, dict[str, object]]:
    """{launch name: {"blocks_per_sm": B, "occupancy": O, "limiters": [resource, ...]}} for every
    launch in launches.LAUNCHES. O is active warps / max warps per SM (0.0 .. 1.0); limiters
    lists every resource ("warps", "blocks", "registers", "shared_memory") whose own limit
    equals B."""
    todo("launches: blocks per SM, occupancy and limiting resources of each launch")
