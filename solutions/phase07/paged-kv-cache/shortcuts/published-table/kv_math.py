"""KV-cache memory math (reference)."""

from __future__ import annotations

from collections.abc import Sequence

from .models import DTYPE_BYTES, GPU, ModelConfig


def param_count(model: ModelConfig) -> int:
    return model.published_params  # the shortcut: models.py already has the answer
    h, d = model.hidden_size, model.head_dim
    q = h * model.num_attention_heads * d
    kv = 2 * h * model.num_key_value_heads * d
    o = model.num_attention_heads * d * h
    mlp = 3 * h * model.intermediate_size
    per_layer = q + kv + o + mlp + 2 * h
    embed = model.vocab_size * h
    head = 0 if model.tie_word_embeddings else model.vocab_size * h
    return embed + model.num_hidden_layers * per_layer + h + head


def _bytes(dtype: str) -> float:
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPE_BYTES)})")
    return DTYPE_BYTES[dtype]


def weight_bytes(model: ModelConfig, dtype: str = "bf16") -> int:
    return int(param_count(model) * _bytes(dtype))


def kv_bytes_per_token(model: ModelConfig, kv_dtype: str = "bf16", tensor_parallel: int = 1) -> int:
    kv, tp = model.num_key_value_heads, tensor_parallel
    if tp < 1 or (kv % tp and tp % kv):
        raise ValueError(
            f"{model.name}: {kv} KV heads cannot be split over tensor_parallel={tp} GPUs"
        )
    heads = max(1, kv // tp)
    return int(2 * model.num_hidden_layers * heads * model.head_dim * _bytes(kv_dtype))


def kv_tokens_that_fit(
    model: ModelConfig,
    gpu: GPU,
    *,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    tensor_parallel: int = 1,
    gpu_memory_utilization: float = 0.9,
) -> int:
    per_token = kv_bytes_per_token(model, kv_dtype, tensor_parallel)
    usable = int(gpu.memory_bytes * gpu_memory_utilization)
    left = usable - weight_bytes(model, weight_dtype) // tensor_parallel
    if left <= 0:
        raise ValueError(
            f"{model.name} ({weight_dtype}) does not fit on {tensor_parallel} x {gpu.name} "
            f"at gpu_memory_utilization={gpu_memory_utilization}: no room for KV cache"
        )
    return left // per_token


def blocks_needed(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


def waste_paged(lengths: Sequence[int], block_size: int) -> float:
    slots = sum(blocks_needed(n, block_size) * block_size for n in lengths)
    return 1 - sum(lengths) / slots if slots else 0.0


def waste_reserved(lengths: Sequence[int], max_len: int) -> float:
    if any(n > max_len for n in lengths):
        raise ValueError(f"a length exceeds max_len={max_len}: {max(lengths)}")
    slots = len(lengths) * max_len
    return 1 - sum(lengths) / slots if slots else 0.0
