"""Interview prep: GPU fundamentals — the reference answers. The options a question offers are questions.py's constants: answer with those very
strings. Your answers are checked by hidden tests, and each one is explained in the summary
once it is right (`pytest katas/interview-prep/gpu-fundamentals`).
"""

from __future__ import annotations

from .questions import BANDWIDTH_OPTIONS, NVCC_OPTIONS, PER_SM_OPTIONS  # noqa: F401


# ------------------------------------------------------------------------------ architecture
def warp_size() -> int:
    """Worked example (its answer is in the README): how many threads does an NVIDIA warp have?"""
    return 32


def bandwidth_order() -> list[str]:
    """Order BANDWIDTH_OPTIONS from the highest bandwidth to the lowest, as one H100 SXM sees
    them (per direction for links; aggregate over the chip for on-chip storage)."""
    return [
        "register files (all SMs)",
        "shared memory (all SMs)",
        "L2 cache",
        "HBM3",
        "NVLink 4 (all links)",
        "PCIe Gen5 x16",
        "InfiniBand NDR port",
    ]


def ridge_point() -> float:
    """The ridge point of an H100 SXM's roofline for dense bf16 tensor-core math, in FLOP per
    byte of HBM traffic (989 TFLOP/s peak, 3.35 TB/s of HBM3)."""
    return 989e12 / 3.35e12


def per_sm_units() -> set[str]:
    """Which of PER_SM_OPTIONS does every SM have its own of (as opposed to one shared by the
    whole chip)? Return the set of those options."""
    return {"register file", "warp schedulers", "tensor cores", "L1 / shared memory"}


def divergence_issue_slots() -> int:
    """A warp of 32 threads runs `if (lane % 2 == 0) { 10 instructions } else { 6 instructions }`
    and then 4 instructions that every thread runs. Counting one issue slot per instruction the
    warp executes (leave the branch instructions out), how many issue slots does it take?"""
    return 10 + 6 + 4


# ------------------------------------------------------------------------------ cuda
def max_threads_per_block() -> int:
    """Worked example (its answer is in the README): the most threads a CUDA block may have."""
    return 1024


def blocks_per_sm() -> int:
    """An sm_90 SM has 65,536 registers (allocated per warp, in units of 256), runs at most
    2,048 threads and 32 blocks, and has 228 KiB of shared memory, of which each resident block
    also reserves 1 KiB for the system. A kernel uses 256 threads per block, 72 registers per
    thread and 40 KiB of static shared memory per block. How many of its blocks can one SM hold
    at once?"""
    return 3


def sectors_per_request() -> list[int]:
    """A warp of 32 threads loads 4-byte floats `a[base + lane * stride]`, `a + base` aligned to
    128 bytes. How many 32-byte sectors does one such load touch for stride = 1, 2, 8 and 32?
    Return the four counts in that order."""
    return [4, 8, 32, 32]


def bank_conflict_ways() -> list[int]:
    """`__shared__ float t[32][W];` and a warp reads the column `t[lane][0]`. Shared memory has
    32 banks of 4 bytes. How many ways is the access conflicted (1: conflict-free, 32: fully
    serialized) for W = 32, 33, 64 and 16? Return the four in that order."""
    return [32, 1, 32, 16]


def nvcc_order() -> list[str]:
    """Order NVCC_OPTIONS as `nvcc -c kernel.cu` runs them (first to last)."""
    return [
        "C preprocessor",
        "cudafe++: splits host and device code",
        "cicc: NVVM IR to PTX",
        "ptxas: PTX to SASS",
        "fatbinary: packs SASS and PTX",
        "host compiler (gcc) builds the host code",
    ]
