"""Public tests of paged-kv-cache, tasks "memory" (kv_math.py) and "blocks" (block_manager.py).

Every number below is derived in README.md from the models' published config.json.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis.stateful import run_state_machine_as_test

from harness.testing import hidden_settings

KiB = 1024


# --------------------------------------------------------------------------- memory
def test_memory_param_count_matches_published(kv_math: Any, models: Any) -> None:
    for m in models.MODELS.values():
        got = kv_math.param_count(m)
        assert got == m.published_params, (
            f"{m.name}: param_count = {got:,}, the checkpoint has {m.published_params:,} "
            f"({got - m.published_params:+,})"
        )
    assert kv_math.weight_bytes(models.LLAMA_3_8B) == 16_060_522_496  # bf16: 2 bytes each
    assert kv_math.weight_bytes(models.LLAMA_3_8B, "fp8") == 8_030_261_248


def test_memory_kv_bytes_per_token(kv_math: Any, models: Any) -> None:
    # 2 (K and V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 128 KiB per token.
    assert kv_math.kv_bytes_per_token(models.LLAMA_3_8B) == 128 * KiB
    assert kv_math.kv_bytes_per_token(models.LLAMA_3_8B, "fp8") == 64 * KiB
    # Llama-2-7B has no GQA: 32 KV heads, 4x the cache of Llama-3-8B per token.
    assert kv_math.kv_bytes_per_token(models.LLAMA_2_7B) == 512 * KiB
    mha = dataclasses.replace(models.LLAMA_3_8B, num_key_value_heads=32)
    assert kv_math.kv_bytes_per_token(mha) == 512 * KiB, "GQA: count KV heads, not query heads"


def test_memory_kv_bytes_with_tensor_parallelism(kv_math: Any, models: Any) -> None:
    m = models.LLAMA_3_70B  # 80 layers, 8 KV heads: 320 KiB per token in all
    assert kv_math.kv_bytes_per_token(m) == 320 * KiB
    assert kv_math.kv_bytes_per_token(m, tensor_parallel=4) == 80 * KiB  # 2 KV heads per GPU
    assert kv_math.kv_bytes_per_token(m, tensor_parallel=8) == 40 * KiB
    # 16 GPUs, 8 KV heads: each GPU keeps a whole head (replicated), not half of one.
    assert kv_math.kv_bytes_per_token(m, tensor_parallel=16) == 40 * KiB
    with pytest.raises(ValueError):
        kv_math.kv_bytes_per_token(m, tensor_parallel=3)


def test_memory_tokens_that_fit(kv_math: Any, models: Any) -> None:
    m, h100 = models.LLAMA_3_8B, models.H100_80GB
    # 0.9 x 80 GiB = 77.31 GB, minus 16.06 GB of weights = 61.25 GB of KV cache / 128 KiB.
    assert kv_math.kv_tokens_that_fit(m, h100) == 467_291
    assert kv_math.kv_tokens_that_fit(m, h100, kv_dtype="fp8") == 934_583
    assert kv_math.kv_tokens_that_fit(models.LLAMA_2_7B, h100) == 121_750
    assert kv_math.kv_tokens_that_fit(models.LLAMA_3_70B, h100, tensor_parallel=4) == 513_092
    with pytest.raises(ValueError, match="Llama-3-70B"):
        kv_math.kv_tokens_that_fit(models.LLAMA_3_70B, h100)  # 141 GB of weights on 80 GB


def test_memory_blocks_and_waste(kv_math: Any) -> None:
    assert [kv_math.blocks_needed(n, 16) for n in (0, 1, 16, 17, 32)] == [0, 1, 1, 2, 2]
    # 1 + 16 + 17 tokens in 1 + 1 + 2 blocks of 16 = 64 slots: 30 empty.
    assert kv_math.waste_paged([1, 16, 17], 16) == pytest.approx(30 / 64)
    # The same three reserved at 2048 slots each: 6144 slots for 34 tokens.
    assert kv_math.waste_reserved([1, 16, 17], 2048) == pytest.approx(1 - 34 / 6144)
    with pytest.raises(ValueError):
        kv_math.waste_reserved([4096], 2048)


# --------------------------------------------------------------------------- blocks
def make(bm: Any, kv_store: Any, blocks: int = 8, bs: int = 4, **kw: Any) -> tuple[Any, Any]:
    gpu = kv_store.KVPool(blocks, bs, "gpu")
    return bm.BlockManager(gpu, None, prefix_caching=False, **kw), gpu


def test_blocks_add_writes_the_prompt(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu = make(bm, kv_store)
    assert m.add_sequence(0, [10, 11, 12, 13, 14, 15]) == 0  # nothing cached
    assert m.block_table(0) == [0, 1], "new blocks come from the front of the free queue: 0, 1"
    assert gpu.writes == 6
    assert read_back(m, gpu, 0) == [10, 11, 12, 13, 14, 15]
    assert m.num_tokens(0) == 6
    assert [m.ref_count(b) for b in range(4)] == [1, 1, 0, 0]
    assert m.num_free_blocks() == 6


def test_blocks_append_allocates_on_a_block_boundary(
    bm: Any, kv_store: Any, read_back: Any
) -> None:
    m, gpu = make(bm, kv_store)
    m.add_sequence(0, [1, 2, 3])
    m.append_token(0, 4)  # fills block 0
    assert m.block_table(0) == [0]
    m.append_token(0, 5)  # needs a second block
    assert m.block_table(0) == [0, 1]
    assert read_back(m, gpu, 0) == [1, 2, 3, 4, 5]
    assert gpu.writes == 5, "each token's KV is written once"


def test_blocks_free_returns_blocks_to_the_back(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu = make(bm, kv_store)
    m.add_sequence(0, list(range(8)))  # blocks 0, 1
    m.add_sequence(1, [7, 7])  # block 2
    m.free(0)
    assert m.num_free_blocks() == 7
    assert m.ref_count(0) == m.ref_count(1) == 0
    # Free queue now: 3, 4, 5, 6, 7, then 1, 0 (last block first).
    m.add_sequence(2, list(range(20)))
    assert m.block_table(2) == [3, 4, 5, 6, 7]
    m.add_sequence(3, [9])
    assert m.block_table(3) == [1]
    assert read_back(m, gpu, 1) == [7, 7]


def test_blocks_out_of_blocks_changes_nothing(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu = make(bm, kv_store, blocks=3)
    m.add_sequence(0, list(range(8)))  # 2 blocks
    with pytest.raises(kv_store.NoFreeBlocks):
        m.add_sequence(1, list(range(5)))  # needs 2, 1 free
    assert m.num_free_blocks() == 1 and gpu.writes == 8
    with pytest.raises(ValueError):
        m.block_table(1)  # was never added
    m.add_sequence(2, [1, 2, 3, 4])  # takes the last block
    with pytest.raises(kv_store.NoFreeBlocks):
        m.append_token(2, 5)
    assert m.num_tokens(2) == 4 and m.block_table(2) == [2]
    m.free(0)
    m.append_token(2, 5)
    assert read_back(m, gpu, 2) == [1, 2, 3, 4, 5]


def test_blocks_misuse_is_a_value_error(bm: Any, kv_store: Any) -> None:
    m, _ = make(bm, kv_store)
    m.add_sequence(0, [1])
    for call in (
        lambda: m.add_sequence(0, [2]),  # exists
        lambda: m.add_sequence(1, []),  # empty prompt
        lambda: m.append_token(5, 1),  # unknown
        lambda: m.free(5),
    ):
        with pytest.raises(ValueError):
            call()


def test_blocks_state_machine(bm: Any, checker: Any) -> None:
    """Random add / append / free against a model; see checker.py for every check."""
    run_state_machine_as_test(
        checker.machine(bm.BlockManager, num_blocks=10),
        settings=hidden_settings(max_examples=25, stateful_step_count=30),
    )
