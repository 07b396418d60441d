"""GIVEN (not graded): published GPU and model numbers the step-cost model is derived from.

GPU figures are the data-sheet peaks *without* sparsity (NVIDIA quotes Tensor-Core FLOP/s "with
sparsity", twice the dense rate); memory bandwidth is HBM/GDDR; `pcie_bw` is one direction of
the host link (swapping KV to CPU memory goes over it). Model figures are from each checkpoint's
config.json and the parameter count its weights add up to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class GPUSpec:
    name: str
    memory_bytes: int
    mem_bw: float  # bytes/s
    flops: dict[str, float] = field(hash=False)  # dense Tensor-Core FLOP/s per dtype
    pcie_bw: float  # bytes/s, one direction
    source: str = ""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    params: int
    num_hidden_layers: int
    num_key_value_heads: int
    head_dim: int
    source: str = ""


GiB = 2**30

H100_SXM = GPUSpec(
    "H100 SXM 80GB", 80 * GiB, 3.35e12, {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12},
    64e9, "https://www.nvidia.com/en-us/data-center/h100/ (datasheet; PCIe Gen5 x16)",
)  # fmt: skip
H200_SXM = GPUSpec(
    "H200 SXM 141GB", 141 * GiB, 4.8e12, {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12},
    64e9, "https://www.nvidia.com/en-us/data-center/h200/",
)  # fmt: skip
A100_SXM = GPUSpec(
    "A100 SXM 80GB", 80 * GiB, 2.039e12, {"bf16": 312e12, "fp16": 312e12},
    32e9, "https://www.nvidia.com/en-us/data-center/a100/ (datasheet; PCIe Gen4 x16)",
)  # fmt: skip
L40S = GPUSpec(
    "L40S 48GB", 48 * GiB, 864e9, {"bf16": 362.05e12, "fp16": 362.05e12, "fp8": 733e12},
    32e9, "https://www.nvidia.com/en-us/data-center/l40s/",
)  # fmt: skip

GPUS = {g.name: g for g in (H100_SXM, H200_SXM, A100_SXM, L40S)}

LLAMA_3_8B = ModelSpec(
    "Llama-3-8B", 8_030_261_248, 32, 8, 128,
    "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
)  # fmt: skip
LLAMA_3_70B = ModelSpec(
    "Llama-3-70B", 70_553_706_496, 80, 8, 128,
    "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json",
)  # fmt: skip
MISTRAL_7B = ModelSpec(
    "Mistral-7B-v0.1", 7_241_732_096, 32, 8, 128,
    "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
)  # fmt: skip
LLAMA_2_7B = ModelSpec(
    "Llama-2-7B", 6_738_415_616, 32, 32, 128,
    "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json",
)  # fmt: skip

MODELS = {m.name: m for m in (LLAMA_3_8B, LLAMA_3_70B, MISTRAL_7B, LLAMA_2_7B)}
