"""What a capacity plan is made of: models, GPUs, a serving workload, a training job, and the
plan itself. Given: read it, use it, do not edit it (capacity_planning.py is yours).

Units are base units everywhere: bytes, bytes per second, FLOP per second, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

# vLLM's default gpu_memory_utilization: the share of HBM a server plans to use; the rest is left
# for the CUDA context, activations, NCCL buffers and fragmentation. usable = hbm_bytes * 9 // 10.
USABLE_NUM, USABLE_DEN = 9, 10


@dataclass(frozen=True)
class Model:
    """A dense decoder-only transformer, as served."""

    name: str
    params: int  # parameters
    layers: int
    heads: int  # query heads
    kv_heads: int  # key/value heads (grouped-query attention: kv_heads divides heads)
    head_dim: int
    bytes_per_param: int  # 2 for bf16 weights, 1 for fp8
    kv_bytes: int  # bytes per K or V element in the cache: 2 for bf16, 1 for fp8


@dataclass(frozen=True)
class Gpu:
    name: str
    hbm_bytes: int  # memory
    hbm_bw: float  # memory bandwidth, bytes/s
    flops: float  # dense bf16 tensor-core peak, FLOP/s


@dataclass(frozen=True)
class Workload:
    """An inference service's traffic and its SLOs."""

    qps: float  # requests per second
    prompt_tokens: int  # per request
    output_tokens: int  # per request
    ttft_s: float  # SLO: time to first token (the prefill of one prompt)
    tpot_s: float  # SLO: time per output token (one decode step)


@dataclass(frozen=True)
class Plan:
    """A serving fleet: replicas of `tp` GPUs each, decode and prefill pools kept apart
    (disaggregated serving, as in DistServe and Splitwise)."""

    tp: int  # GPUs per replica (tensor parallelism)
    batch: int  # sequences each decode replica runs at once
    decode_replicas: int
    prefill_replicas: int
    gpus: int  # tp * (decode_replicas + prefill_replicas)


@dataclass(frozen=True)
class Training:
    """A data-parallel training job that checkpoints its full state."""

    params: int
    weight_bytes: int  # bytes per parameter of the weights (2: bf16)
    master_bytes: int  # bytes per parameter of the fp32 master copy (4), 0 without one
    moments: int  # optimizer moments per parameter (Adam: 2, SGD with momentum: 1)
    moment_bytes: int  # bytes per moment (4: fp32)
    gpus: int
    gpus_per_node: int
    nic_bw: float  # bytes/s each node can write to storage
    storage_bw: float  # bytes/s the storage system takes from all nodes together
    gpu_mtbf_s: float  # mean time between failures of one GPU (with its share of the node)
    restart_s: float  # seconds from a failure to training again (reschedule, load, warm up)


# Real models and GPUs (public model cards and datasheets).
MODELS = {
    "llama-3-8b": Model("llama-3-8b", 8_030_261_248, 32, 32, 8, 128, 2, 2),
    "llama-3-70b": Model("llama-3-70b", 70_553_706_496, 80, 64, 8, 128, 2, 2),
    "llama-3.1-405b-fp8": Model("llama-3.1-405b-fp8", 405_853_388_800, 126, 128, 8, 128, 1, 1),
}
GPUS = {
    "a100-80gb": Gpu("a100-80gb", 80 * 2**30, 2.039e12, 312e12),
    "h100-sxm": Gpu("h100-sxm", 80 * 2**30, 3.35e12, 989e12),
    "h200": Gpu("h200", 141 * 10**9, 4.8e12, 989e12),
    "l40s": Gpu("l40s", 48 * 10**9, 864e9, 362e12),
}
