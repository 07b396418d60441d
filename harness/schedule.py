"""The course's 26-week core schedule (../shared/reference/curriculum.txt): week -> phase, focus.

A kata says which weeks it belongs to in its manifest (`weeks = [3, 4]`); `kata list --weeks`
joins the two, so the schedule a learner follows is the curriculum's, with the katas of each week
and the tier each needs.
"""

from __future__ import annotations

from dataclasses import dataclass

WEEKS = 26


@dataclass(frozen=True)
class Week:
    week: int
    phase: int
    focus: str


SCHEDULE: tuple[Week, ...] = tuple(
    Week(w, p, f)
    for w, p, f in (
        (1, 1, "GPU vs CPU design philosophy; SMs, warps, SIMT; build the SIMT simulator"),
        (
            2,
            1,
            "Memory hierarchy: HBM, L2, shared memory, registers; roofline microbenchmarks in C",
        ),
        (3, 2, "First CUDA kernels: grid/block/thread, vector add, error handling"),
        (4, 2, "Tiled matmul in shared memory; coalescing and occupancy experiments"),
        (5, 3, "The NVCC pipeline; reading PTX and SASS; Godbolt dissections"),
        (6, 3, "Build a mini expression->PTX compiler; Triton and LLVM NVPTX overview"),
        (7, 4, "Linux kernel modules; write a char device with ioctl command submission"),
        (8, 4, "The real GPU driver stack (KMD/UMD); containers from scratch; GPU passthrough"),
        (9, 5, "Memory allocators: buddy, slab, caching; build the Rust caching allocator"),
        (10, 5, "Streams, events, dependency graphs; build the C++ stream scheduler"),
        (11, 6, "GPU sharing: MPS vs MIG vs time-slicing; fractional GPUs"),
        (12, 6, "Cluster scheduling: bin-packing, gang scheduling; build the scheduler simulator"),
        (13, 7, "KV-cache memory math; build the paged KV allocator with prefix sharing"),
        (14, 7, "Continuous batching simulator; TTFT/TPOT/goodput; vLLM/TensorRT-LLM/SGLang ops"),
        (15, 8, "Collectives from first principles; implement ring all-reduce over sockets"),
        (16, 8, "NCCL, topology (NVLink/IB), multi-node training/serving failure modes"),
        (17, 9, "ABI vs API; plugin architectures; build the C HAL with dlopen backends"),
        (18, 9, "Portability strategy: CUDA/ROCm/Level Zero/Metal; capability negotiation"),
        (19, 10, "Observability: DCGM metrics, build the Prometheus exporter; eBPF tracing"),
        (20, 10, "SLOs, failure drills, release engineering: versioning, rollback, canary"),
        (21, 11, "Hardware fingerprinting: build the tool; threat-model the spoofing adversary"),
        (22, 11, "License enforcement: Ed25519-signed licenses, grace, air-gap activation"),
        (
            23,
            11,
            "Software protection: obfuscation, anti-tamper, attestation; sovereign AI deployment",
        ),
        (24, 12, "Leadership: org design, technical strategy memos, OEM/partner engineering"),
        (25, 12, "Capstone build: mini orchestration platform integration"),
        (26, 12, "Capstone release cycle: design doc, runbook, demo, retrospective"),
    )
)
assert [w.week for w in SCHEDULE] == list(range(1, WEEKS + 1))


def week(n: int) -> Week:
    """The schedule's week `n` (1..26)."""
    return SCHEDULE[n - 1]


def phase_weeks(phase: int) -> tuple[int, ...]:
    """The weeks the schedule gives to `phase`."""
    return tuple(w.week for w in SCHEDULE if w.phase == phase)
