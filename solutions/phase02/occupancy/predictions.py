"""Predictions for kernels.cu and the launches in launches.py (reference).

Registers and static shared memory: `nvcc -cubin -arch=<arch> -Xptxas -v kernels.cu` (CUDA 13.0).
Occupancy: the four limits of README.md applied to those numbers plus each launch's dynamic
shared memory.
"""

from __future__ import annotations


def resources() -> dict[str, dict[str, dict[str, int]]]:
    """{arch: {kernel: {"registers": R, "shared_bytes": S}}}; S is static shared memory only."""
    return {
        "sm_75": {
            "scale": {"registers": 8, "shared_bytes": 0},
            "transpose32": {"registers": 24, "shared_bytes": 32 * 33 * 4},
            "heavy40": {"registers": 58, "shared_bytes": 0},
            "block_sum": {"registers": 22, "shared_bytes": 32 * 4},
        },
        "sm_90": {
            "scale": {"registers": 8, "shared_bytes": 0},
            "transpose32": {"registers": 26, "shared_bytes": 32 * 33 * 4},
            "heavy40": {"registers": 56, "shared_bytes": 0},
            "block_sum": {"registers": 22, "shared_bytes": 32 * 4},
        },
    }


def launches() -> dict[str, dict[str, object]]:
    """{launch name: {"blocks_per_sm": B, "occupancy": O, "limiters": [resource, ...]}}."""
    return {
        # 32 warps per block fill a T4 SM's 32 warp slots.
        "scale-t4-1024": {"blocks_per_sm": 1, "occupancy": 1.0, "limiters": ["warps"]},
        # 1-warp blocks: 32 blocks is the cap, and 32 of 64 warps is half the SM.
        "scale-h200-32": {"blocks_per_sm": 32, "occupancy": 0.5, "limiters": ["blocks"]},
        # 4224 B of shared memory would allow 15 blocks; the 8 warps per block allow 4.
        "transpose-t4-256": {"blocks_per_sm": 4, "occupancy": 1.0, "limiters": ["warps"]},
        # 58 registers -> 2048 per warp -> 8 warps per quarter: the file and the slots run out together.
        "heavy-t4-256": {"blocks_per_sm": 4, "occupancy": 1.0, "limiters": ["warps", "registers"]},
        # 56 registers -> 1792 per warp -> 9 warps per quarter, 36 per SM: 4 blocks of 8.
        "heavy-h200-256": {"blocks_per_sm": 4, "occupancy": 0.5, "limiters": ["registers"]},
        "heavy-h200-1024": {"blocks_per_sm": 1, "occupancy": 0.5, "limiters": ["registers"]},
        # 128 + 20480 B -> 20736 B (256-byte units): 3 blocks in 64 KiB.
        "blocksum-t4-256-20k": {
            "blocks_per_sm": 3, "occupancy": 0.75, "limiters": ["shared_memory"],
        },
        # 128 + 57344 + 1024 reserved = 58496 B: 3 blocks in 228 KiB (4 without the reservation).
        "blocksum-h200-256-56k": {
            "blocks_per_sm": 3, "occupancy": 0.375, "limiters": ["shared_memory"],
        },
        # 65664 B is more than a T4 block may have: the launch fails, no block fits.
        "blocksum-t4-512-64k": {
            "blocks_per_sm": 0, "occupancy": 0.0, "limiters": ["shared_memory"],
        },
    }  # fmt: skip
