"""YOUR FILE. Task "memory": how much KV cache a model needs, and how much a GPU holds.

models.py (given) has the published configurations (ModelConfig) and GPU memory sizes (GPU),
and DTYPE_BYTES. README.md derives every formula with Llama-3-8B as the example.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness import todo

from .models import DTYPE_BYTES, GPU, ModelConfig  # noqa: F401  (you will need them)


def param_count(model: ModelConfig) -> int:
    """Parameters of a Llama-style decoder: the embedding (vocab x hidden); per layer the
    attention projections q, k, v, o (no biases; k and v have num_key_value_heads * head_dim
    outputs), the SwiGLU MLP (gate, up: hidden -> intermediate; down: back) and two RMSNorm
    weight vectors (hidden each); a final norm; the output head (vocab x hidden) unless
    tie_word_embeddings. Must equal model.published_params for every model in models.py."""
    todo("param_count")


def weight_bytes(model: ModelConfig, dtype: str = "bf16") -> int:
    """Bytes of the weights stored in `dtype` (a key of DTYPE_BYTES; int4 is half a byte)."""
    todo("weight_bytes")


def kv_bytes_per_token(model: ModelConfig, kv_dtype: str = "bf16", tensor_parallel: int = 1) -> int:
    """Bytes of KV cache one token occupies ON ONE GPU: a key and a value vector (head_dim
    numbers each) per KV head per layer. With tensor parallelism over `tensor_parallel` GPUs the
    KV heads are split between them; when there are fewer KV heads than GPUs each GPU keeps one
    (replicated). ValueError unless one of kv heads and tensor_parallel divides the other."""
    todo("kv_bytes_per_token")


def kv_tokens_that_fit(
    model: ModelConfig,
    gpu: GPU,
    *,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    tensor_parallel: int = 1,
    gpu_memory_utilization: float = 0.9,
) -> int:
    """How many tokens of KV cache fit (vLLM's sizing, without the activation profiling): each
    of the `tensor_parallel` GPUs may use int(gpu.memory_bytes * gpu_memory_utilization) bytes,
    holds weight_bytes / tensor_parallel of the weights (integer division), and the rest is KV
    cache at kv_bytes_per_token(..., tensor_parallel) per token. ValueError (naming the model
    and the GPU) when the weights leave no room."""
    todo("kv_tokens_that_fit")


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """Blocks of `block_size` tokens that hold `num_tokens` tokens (0 tokens: 0 blocks)."""
    todo("blocks_needed")


def waste_paged(lengths: Sequence[int], block_size: int) -> float:
    """The share of allocated KV slots that hold no token when each sequence gets just enough
    blocks (paging): only the last block of a sequence is partly empty."""
    todo("waste_paged")


def waste_reserved(lengths: Sequence[int], max_len: int) -> float:
    """The same share when each sequence reserves one contiguous slab of `max_len` slots up
    front (what servers did before PagedAttention). ValueError if a length exceeds max_len."""
    todo("waste_reserved")
