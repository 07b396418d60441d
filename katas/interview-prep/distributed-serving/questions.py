"""The options the questions of answers.py offer (given: answer with these very strings)."""

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast")

BOUND_OPTIONS = (
    "decode step of a 70B bf16 model at batch 1",
    "decode step of a 70B bf16 model at batch 64",
    "prefill of 4,096 prompt tokens of a 70B bf16 model",
    "bf16 GEMM of 8192 x 8192 by 8192 x 8192",
    "elementwise add of two bf16 vectors of 1 G elements",
    "softmax over each row of a 4,096 x 4,096 bf16 matrix",
    "decode attention of 16 sequences over 32k-token KV caches (no GQA)",
    "forward and backward pass of a 7B model on a batch of 1 M tokens",
)
