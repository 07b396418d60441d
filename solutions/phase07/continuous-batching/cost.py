"""The step-cost model's constants from a GPU's and a model's published numbers (reference)."""

from __future__ import annotations

from .engine import StepCost
from .hardware import DTYPE_BYTES, GPUSpec, ModelSpec


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16", tensor_parallel: int = 1) -> int:
    kv, tp = model.num_key_value_heads, tensor_parallel
    if tp < 1 or (kv % tp and tp % kv):
        raise ValueError(f"{model.name}: {kv} KV heads cannot be split over {tp} GPUs")
    return 2 * model.num_hidden_layers * max(1, kv // tp) * model.head_dim * DTYPE_BYTES[kv_dtype]


def derive_step_cost(
    model: ModelSpec,
    gpu: GPUSpec,
    *,
    tensor_parallel: int = 1,
    dtype: str = "bf16",
    kv_dtype: str = "bf16",
    flops_efficiency: float = 0.6,
    bandwidth_efficiency: float = 0.8,
    overhead_s: float = 1e-3,
) -> StepCost:
    if dtype not in gpu.flops:
        raise ValueError(f"{gpu.name} has no {dtype} Tensor Cores (it has {', '.join(gpu.flops)})")
    tp = tensor_parallel
    bw = gpu.mem_bw * bandwidth_efficiency
    kv = kv_bytes_per_token(model, kv_dtype, tp)
    return StepCost(
        weights_s=model.params * DTYPE_BYTES[dtype] / tp / bw,
        kv_s_per_token=kv / bw,
        flop_s_per_token=2 * model.params / tp / (gpu.flops[dtype] * flops_efficiency),
        overhead_s=overhead_s,
        swap_s_per_token=kv / gpu.pcie_bw,
    )


def ridge_tokens(cost: StepCost) -> float:
    return cost.weights_s / cost.flop_s_per_token


def prefill_time(cost: StepCost, prompt_len: int) -> float:
    return cost.step_time([(0, prompt_len)])


def decode_tokens_per_s(cost: StepCost, batch: int, context: int) -> float:
    return batch / cost.step_time([(context, 1)] * batch)
