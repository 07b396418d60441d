"""Interview prep: distributed training and LLM serving. Each function is one question, in its
docstring; work the answer out from its arguments and return it. Which-of questions answer with
questions.py's option strings. Hidden tests check every function on fresh random inputs and
explain each one in the summary once it is right
(`pytest katas/interview-prep/distributed-serving`).

Numbers: return an `int` where the question counts (bytes of a cache, tokens) and a plain
`float` or `int` where it measures (bytes sent, seconds, fractions); measured answers are checked
to a relative 1e-9, so any exact formula passes and an approximation does not.
"""

from __future__ import annotations

from .questions import BOUND_OPTIONS, COLLECTIVES  # noqa: F401


# ------------------------------------------------------------------------------ serving memory
def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Worked example (README): the bytes of KV cache one token of one sequence holds in a
    decoder-only transformer with these dimensions (no tensor parallelism)."""
    return 2 * layers * kv_heads * head_dim * dtype_bytes


# ------------------------------------------------------------------------------ collectives
def ring_bytes_sent(op: str, size_bytes: int, n: int) -> float:
    """The bytes each GPU sends (the busiest one, where they differ) when `n` GPUs run the
    collective `op` (one of COLLECTIVES) with NCCL's ring algorithm, the data cut into chunks as
    small as the algorithm wants. `size_bytes` is, per op:
    all-reduce: the buffer every GPU holds and reduces; all-gather: the gathered OUTPUT (each GPU
    contributes size_bytes / n); reduce-scatter: the INPUT each GPU holds (each ends with
    size_bytes / n); all-to-all: each GPU's send buffer (size_bytes / n to every GPU, itself
    included, sent straight to each peer as NCCL does, not relayed around the ring); broadcast:
    the root's buffer, pipelined along the ring.
    n = 1 sends nothing."""
    if n == 1:
        return 0.0
    if op == "broadcast":
        return float(size_bytes)
    share = (n - 1) / n * size_bytes
    return 2 * share if op == "all-reduce" else share


def ring_allreduce_seconds(
    size_bytes: int, n: int, link_bytes_per_s: float, latency_s: float
) -> float:
    """The alpha-beta model of a ring all-reduce of `size_bytes` on `n` GPUs, each step paying
    the link's latency `latency_s` once and moving its chunk at `link_bytes_per_s` (a
    unidirectional link per neighbour; reduction arithmetic is free). n = 1 takes no time."""
    steps = 2 * (n - 1)
    return steps * latency_s + steps * (size_bytes / n) / link_bytes_per_s


# ------------------------------------------------------------------------------ training memory
def zero_bytes_per_gpu(params: int, n: int, stage: int) -> float:
    """Bytes of model states (weights, gradients, optimizer states; no activations) per GPU when
    `n` data-parallel GPUs train a model of `params` parameters with mixed-precision Adam
    (bf16 weights and gradients; fp32 master weights, momentum and variance) under ZeRO `stage`
    0 (plain data parallelism), 1, 2 or 3, each sharded part divided evenly (a fraction is fine)."""
    weights, grads, optim = 2 * params, 2 * params, 12 * params
    if stage >= 1:
        optim /= n
    if stage >= 2:
        grads /= n
    if stage >= 3:
        weights /= n
    return weights + grads + optim


def pipeline_bubble_fraction(stages: int, microbatches: int) -> float:
    """The fraction of a training step's time a stage idles under the GPipe or 1F1B schedule with
    `stages` pipeline stages and `microbatches` equal micro-batches (every stage takes the same
    time per micro-batch; forward and backward counted together)."""
    return (stages - 1) / (microbatches + stages - 1)


def tp_bytes_per_layer(tokens: int, hidden: int, dtype_bytes: int, tp: int) -> float:
    """Bytes each GPU sends in the forward pass of one transformer layer under Megatron-LM tensor
    parallelism of size `tp` (no sequence parallelism), for a batch of `tokens` tokens of width
    `hidden` in `dtype_bytes`-byte activations, every collective a ring."""
    return 2 * 2 * (tp - 1) / tp * tokens * hidden * dtype_bytes


# ------------------------------------------------------------------------------ serving
def paged_kv_waste(block_tokens: int, seq_lens: list[int]) -> int:
    """Token slots allocated but unused when sequences of `seq_lens` tokens each hold their KV
    cache in blocks of `block_tokens` tokens (vLLM's PagedAttention; a sequence of 0 tokens
    holds no block)."""
    return sum(-length % block_tokens for length in seq_lens)


def static_batch_utilization(output_lens: list[int]) -> float:
    """One static batch decodes sequences that produce `output_lens` tokens each (all >= 1),
    starting together, one token per sequence per step, and ends when its longest sequence does.
    The fraction of its slot-steps (sequences x steps) that produce a token."""
    return sum(output_lens) / (len(output_lens) * max(output_lens))


def memory_bound() -> set[str]:
    """Which of BOUND_OPTIONS are memory-bandwidth-bound on an H100 SXM (989 TFLOP/s of dense
    bf16, 3.35 TB/s of HBM3), each run alone by a good implementation? Return the set."""
    return {
        "decode step of a 70B bf16 model at batch 1",
        "decode step of a 70B bf16 model at batch 64",
        "elementwise add of two bf16 vectors of 1 G elements",
        "softmax over each row of a 4,096 x 4,096 bf16 matrix",
        "decode attention of 16 sequences over 32k-token KV caches (no GQA)",
    }
