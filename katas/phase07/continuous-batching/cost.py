"""YOUR FILE. Task "cost": the step-cost model's constants from published numbers.

engine.StepCost (given) turns four constants into the time of a step; here you derive them for
a model (hardware.ModelSpec) on a GPU (hardware.GPUSpec). README.md does it by hand for
Llama-3-8B on an H100.
"""

from __future__ import annotations

from harness import todo

from .engine import StepCost  # noqa: F401  (you will need them)
from .hardware import DTYPE_BYTES, GPUSpec, ModelSpec  # noqa: F401


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
    """The StepCost of one of `tensor_parallel` GPUs serving `model` (weights and matmuls in
    `dtype`, KV cache in `kv_dtype`), each GPU holding 1 / tensor_parallel of the weights:

    - weights_s: the GPU's share of the weight bytes / achievable bandwidth
      (gpu.mem_bw * bandwidth_efficiency);
    - kv_s_per_token: one token's KV bytes on this GPU (2 x layers x KV heads on this GPU x
      head_dim x bytes; KV heads split over the GPUs, at least one each) / achievable bandwidth;
    - flop_s_per_token: 2 FLOPs per parameter (a multiply and an add), the GPU's share, over
      the achievable rate gpu.flops[dtype] * flops_efficiency;
    - overhead_s as given; swap_s_per_token: one token's KV bytes on this GPU / gpu.pcie_bw.

    ValueError when the GPU has no Tensor Cores for `dtype` (A100: no fp8) or the KV heads
    cannot be split over tensor_parallel GPUs (neither divides the other)."""
    todo("derive_step_cost")


def ridge_tokens(cost: StepCost) -> float:
    """New tokens per step at which the matmuls take as long as streaming the weights (KV
    reads left out): fewer and the step is memory-bound, more and it is compute-bound."""
    todo("ridge_tokens")


def prefill_time(cost: StepCost, prompt_len: int) -> float:
    """One step that prefills a whole prompt of `prompt_len` tokens, alone."""
    todo("prefill_time")


def decode_tokens_per_s(cost: StepCost, batch: int, context: int) -> float:
    """Output tokens per second of decode steps over `batch` requests that each have `context`
    tokens cached (one new token each per step)."""
    todo("decode_tokens_per_s")
