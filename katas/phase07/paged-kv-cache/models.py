"""GIVEN (not graded): published model configurations and GPU memory sizes.

Model fields are the names of the Hugging Face `config.json` of each checkpoint (the source is
in `source`); the parameter counts in `published_params` are the ones the checkpoints' weights
add up to (the `param_count` task computes them from the shapes and must agree).
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}


@dataclass(frozen=True)
class ModelConfig:
    name: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int  # < num_attention_heads: grouped-query attention (GQA)
    head_dim: int
    intermediate_size: int  # the SwiGLU MLP: gate and up (hidden -> intermediate), down
    vocab_size: int
    tie_word_embeddings: bool  # True: the output head reuses the embedding matrix
    published_params: int
    source: str


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int
    source: str


GiB = 2**30

LLAMA_3_8B = ModelConfig(
    "Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, False, 8_030_261_248,
    "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
)  # fmt: skip
LLAMA_3_70B = ModelConfig(
    "Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, False, 70_553_706_496,
    "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json",
)  # fmt: skip
MISTRAL_7B = ModelConfig(
    "Mistral-7B-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, False, 7_241_732_096,
    "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
)  # fmt: skip
LLAMA_2_7B = ModelConfig(
    "Llama-2-7B", 32, 4096, 32, 32, 128, 11008, 32000, False, 6_738_415_616,
    "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json",
)  # fmt: skip
LLAMA_3_2_1B = ModelConfig(
    "Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, True, 1_235_814_400,
    "https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json",
)  # fmt: skip

MODELS = {m.name: m for m in (LLAMA_3_8B, LLAMA_3_70B, MISTRAL_7B, LLAMA_2_7B, LLAMA_3_2_1B)}

# Memory as the product pages state it, taken as GiB (the driver reserves a little of it: an
# H100 80GB reports 81559 MiB in nvidia-smi).
H100_80GB = GPU("H100 SXM 80GB", 80 * GiB, "https://www.nvidia.com/en-us/data-center/h100/")
A100_80GB = GPU("A100 SXM 80GB", 80 * GiB, "https://www.nvidia.com/en-us/data-center/a100/")
H200_141GB = GPU("H200 SXM 141GB", 141 * GiB, "https://www.nvidia.com/en-us/data-center/h200/")
L40S_48GB = GPU("L40S 48GB", 48 * GiB, "https://www.nvidia.com/en-us/data-center/l40s/")

GPUS = {g.name: g for g in (H100_80GB, A100_80GB, H200_141GB, L40S_48GB)}
