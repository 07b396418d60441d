"""Hidden tests of paged-kv-cache: any model shape, longer random runs, other traces, gates.

Examples are derandomized (harness.testing.hidden_settings), so a grade never depends on luck.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from harness.testing import hidden_settings


def read_back(manager: Any, pool: Any, seq_id: int) -> list[int]:
    n, bs = manager.num_tokens(seq_id), pool.block_size
    out: list[int] = []
    for i, block in enumerate(manager.block_table(seq_id)):
        out += pool.read(block, 0, min(bs, n - i * bs))
    return out


# --------------------------------------------------------------------------- memory
@st.composite
def configs(draw: Any) -> dict[str, Any]:
    heads = draw(st.sampled_from([8, 12, 16, 28, 32, 40, 64, 96, 128]))
    kv = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    head_dim = draw(st.sampled_from([64, 80, 96, 128, 256]))
    return dict(
        name=f"synthetic-{draw(st.integers(0, 10**6))}",
        num_hidden_layers=draw(st.integers(1, 128)),
        hidden_size=heads * head_dim,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        intermediate_size=draw(st.integers(256, 60000)),
        vocab_size=draw(st.integers(1000, 260000)),
        tie_word_embeddings=draw(st.booleans()),
        published_params=0,
        source="",
    )


def params_of(c: dict[str, Any]) -> int:
    h, d = c["hidden_size"], c["head_dim"]
    attn = 2 * h * c["num_attention_heads"] * d + 2 * h * c["num_key_value_heads"] * d
    layer = attn + 3 * h * c["intermediate_size"] + 2 * h
    head = 0 if c["tie_word_embeddings"] else c["vocab_size"] * h
    return c["vocab_size"] * h + c["num_hidden_layers"] * layer + h + head


@pytest.mark.kata_gate(
    "the memory math looks models up by name instead of computing from the config"
)
@hidden_settings(max_examples=80)
@given(
    c=configs(), tp=st.sampled_from([1, 2, 4, 8]), dtype=st.sampled_from(["bf16", "fp8", "fp32"])
)
def test_memory_any_model_shape(
    kv_math: Any, models: Any, c: dict[str, Any], tp: int, dtype: str
) -> None:
    m = models.ModelConfig(**c)
    assert kv_math.param_count(m) == params_of(c)
    nbytes = models.DTYPE_BYTES[dtype]
    assert kv_math.weight_bytes(m, dtype) == int(params_of(c) * nbytes)
    kv = c["num_key_value_heads"]
    if kv % tp and tp % kv:
        with pytest.raises(ValueError):
            kv_math.kv_bytes_per_token(m, dtype, tp)
        return
    per_token = int(2 * c["num_hidden_layers"] * max(1, kv // tp) * c["head_dim"] * nbytes)
    assert kv_math.kv_bytes_per_token(m, dtype, tp) == per_token
    gpu = models.H200_141GB
    left = int(gpu.memory_bytes * 0.8) - int(params_of(c) * 2) // tp
    if left <= 0:
        with pytest.raises(ValueError):
            kv_math.kv_tokens_that_fit(
                m, gpu, kv_dtype=dtype, tensor_parallel=tp, gpu_memory_utilization=0.8
            )
    else:
        got = kv_math.kv_tokens_that_fit(
            m, gpu, kv_dtype=dtype, tensor_parallel=tp, gpu_memory_utilization=0.8
        )
        assert got == left // per_token


def test_memory_other_gpus_and_dtypes(kv_math: Any, models: Any) -> None:
    # Mistral-7B, fp8 weights and fp8 KV on an L40S: (0.9 x 48 GiB - 7.24 GB) / 64 KiB.
    got = kv_math.kv_tokens_that_fit(
        models.MISTRAL_7B, models.L40S_48GB, weight_dtype="fp8", kv_dtype="fp8"
    )
    assert got == (int(48 * 2**30 * 0.9) - 7_241_732_096) // 65536
    assert kv_math.weight_bytes(models.LLAMA_3_70B, "int4") == 70_553_706_496 // 2
    got = kv_math.kv_tokens_that_fit(models.LLAMA_3_70B, models.H200_141GB, weight_dtype="int4")
    assert got == (int(141 * 2**30 * 0.9) - 70_553_706_496 // 2) // 327680
    assert kv_math.kv_bytes_per_token(models.LLAMA_3_2_1B) == 2 * 16 * 8 * 64 * 2


@hidden_settings(max_examples=60)
@given(
    lengths=st.lists(st.integers(1, 5000), min_size=1, max_size=30),
    bs=st.sampled_from([1, 8, 16, 32]),
)
def test_memory_waste_any_lengths(kv_math: Any, lengths: list[int], bs: int) -> None:
    slots = sum(-(-n // bs) * bs for n in lengths)
    assert kv_math.waste_paged(lengths, bs) == pytest.approx(1 - sum(lengths) / slots)
    assert kv_math.waste_reserved(lengths, 5000) == pytest.approx(
        1 - sum(lengths) / (5000 * len(lengths))
    )


# --------------------------------------------------------------------------- blocks
@pytest.mark.kata_gate("blocks leak, are freed twice, or are never reused once freed")
@pytest.mark.parametrize("num_blocks, block_size", [(12, 4), (6, 1), (20, 3)])
def test_blocks_state_machine_long_runs(
    bm: Any, checker: Any, num_blocks: int, block_size: int
) -> None:
    run_state_machine_as_test(
        checker.machine(bm.BlockManager, num_blocks=num_blocks, block_size=block_size),
        settings=hidden_settings(max_examples=30, stateful_step_count=50),
    )


def test_blocks_a_pool_reused_many_times(bm: Any, kv_store: Any) -> None:
    """Cycle a 4-block pool 50 times: a manager that hands out fresh ids never reuses a block."""
    gpu = kv_store.KVPool(4, 2, "gpu")
    m = bm.BlockManager(gpu, None, prefix_caching=False)
    for i in range(50):
        m.add_sequence(i, [i, i + 1, i + 2])
        m.append_token(i, 7)
        m.append_token(i, 8)
        assert read_back(m, gpu, i) == [i, i + 1, i + 2, 7, 8]
        assert all(0 <= b < 4 for b in m.block_table(i))
        m.free(i)
        assert m.num_free_blocks() == 4


# --------------------------------------------------------------------------- prefix
@pytest.mark.kata_gate("blocks are shared after different prefixes: the block hash is not a chain")
def test_prefix_state_machine(bm: Any, checker: Any) -> None:
    run_state_machine_as_test(
        checker.machine(bm.BlockManager, num_blocks=14, prefix_caching=True),
        settings=hidden_settings(max_examples=40, stateful_step_count=40),
    )


@pytest.mark.kata_gate("blocks are shared after different prefixes: the block hash is not a chain")
def test_prefix_same_block_after_another_prefix(bm: Any, kv_store: Any) -> None:
    gpu = kv_store.KVPool(16, 4, "gpu")
    m = bm.BlockManager(gpu, None, prefix_caching=True)
    m.add_sequence(0, [1, 1, 1, 1, 5, 6, 7, 8, 0])  # blocks Z X
    m.add_sequence(1, [2, 2, 2, 2, 0])  # block Y
    # Y hits; X after Y is not X after Z: its KV differs, it must be computed.
    assert m.add_sequence(2, [2, 2, 2, 2, 5, 6, 7, 8, 0]) == 4
    assert m.block_table(2)[1] != m.block_table(0)[1]
    assert m.add_sequence(3, [1, 1, 1, 1, 5, 6, 7, 8, 3]) == 8
    # One block's tokens twice: the second block is not the first block again.
    m.add_sequence(4, [9, 9, 9, 9, 0])
    assert m.add_sequence(5, [9, 9, 9, 9, 9, 9, 9, 9, 0]) == 4
    assert len(set(m.block_table(5))) == 3


def test_prefix_eviction_order_exact(bm: Any, kv_store: Any) -> None:
    """Freed last block first, allocated from the front: the tail of the oldest sequence goes
    first, and a hit refreshes nothing until the block is freed again."""
    gpu = kv_store.KVPool(9, 2, "gpu")
    m = bm.BlockManager(gpu, None, prefix_caching=True)
    m.add_sequence(0, [1, 1, 2, 2, 3])  # 0 1 2
    m.add_sequence(1, [4, 4, 5, 5, 6])  # 3 4 5
    m.free(0)  # free: 6 7 8 2 1 0
    m.free(1)  # free: 6 7 8 2 1 0 5 4 3
    assert m.add_sequence(2, [1, 1, 2, 2, 9]) == 4  # hits 0 and 1 (4 tokens), new block 6
    m.free(2)  # free: 7 8 2 5 4 3 6 1 0
    m.add_sequence(3, [7] * 10)  # takes 7 8 2 5 4: b's second block (4) is evicted
    assert m.block_table(3) == [7, 8, 2, 5, 4]
    assert m.add_sequence(4, [4, 4, 5, 5, 6]) == 2  # hits 3; new blocks 6 and 1 (a's second)
    assert m.block_table(4) == [3, 6, 1]
    m.free(3)
    assert m.add_sequence(5, [1, 1, 2, 2, 3]) == 2  # only a's first block (0) is left


@pytest.mark.kata_gate(
    "the prefix cache's hit rate falls short of the reference's on unseen traces"
)
@pytest.mark.parametrize(
    "kind, seed",
    [("system-prompt", 101), ("multi-turn", 202), ("multi-turn", 203), ("parallel-sampling", 303)],
)
def test_prefix_hit_rate_other_seeds(
    kind: str, seed: int, bm: Any, kata: Any, kata_budget: Any
) -> None:
    replay, gen = kata.module("replay"), kata.module("gen_traces")
    trace = gen.generate(kind, seed)
    reqs = replay.requests_of(trace)
    mine = replay.run(bm.BlockManager, trace, requests=reqs)  # before the reference is loaded
    ref = kata_budget.reference
    ref_bm, ref_replay = ref.module("block_manager"), ref.module("replay")
    theirs = ref_replay.run(ref_bm.BlockManager, trace, requests=reqs)
    kata_budget.metrics[f"hit rate ({kind}, seed {seed})"] = round(mine.hit_rate, 4)
    kata_budget.compare(
        lambda: mine.computed_tokens,
        lambda: theirs.computed_tokens,
        name=f"misses-{kind}-{seed}",
        metric="computed prompt tokens",
        ratio=1.05,
        rounds=1,
    )


# --------------------------------------------------------------------------- fork
@pytest.mark.kata_gate(
    "copy-on-write copies more than the one shared block, or copies at fork time"
)
def test_fork_copies_exactly_the_shared_last_block(bm: Any, kv_store: Any) -> None:
    gpu = kv_store.KVPool(40, 4, "gpu")
    m = bm.BlockManager(gpu, None, prefix_caching=False)
    m.add_sequence(0, list(range(30)))  # 8 blocks, the last half full
    m.fork(0, 1)
    m.fork(0, 2)
    assert gpu.copies == 0 and m.num_free_blocks() == 32 and gpu.writes == 30
    m.append_token(1, 100)
    assert gpu.copies == 1 and gpu.writes == 31 and m.num_free_blocks() == 31
    m.append_token(2, 200)
    assert gpu.copies == 2 and m.num_free_blocks() == 30
    m.append_token(0, 300)  # the original block is its own now
    assert gpu.copies == 2 and m.num_free_blocks() == 30
    t = [m.block_table(s) for s in range(3)]
    assert t[0][:7] == t[1][:7] == t[2][:7] and len({t[0][7], t[1][7], t[2][7]}) == 3
    assert [m.ref_count(b) for b in t[0]] == [3] * 7 + [1]
    for s, tok in ((0, 300), (1, 100), (2, 200)):
        assert read_back(m, gpu, s) == list(range(30)) + [tok]


@pytest.mark.kata_gate(
    "copy-on-write copies more than the one shared block, or copies at fork time"
)
def test_fork_state_machine(bm: Any, checker: Any) -> None:
    run_state_machine_as_test(
        checker.machine(bm.BlockManager, num_blocks=14, forks=True, prefix_caching=True),
        settings=hidden_settings(max_examples=40, stateful_step_count=40),
    )


def test_fork_of_a_fork_and_free_in_any_order(bm: Any, kv_store: Any) -> None:
    gpu = kv_store.KVPool(8, 4, "gpu")
    m = bm.BlockManager(gpu, None, prefix_caching=False)
    m.add_sequence(0, [1, 2, 3, 4, 5])
    m.fork(0, 1)
    m.fork(1, 2)
    assert [m.ref_count(b) for b in m.block_table(2)] == [3, 3]
    m.free(1)
    m.free(0)
    assert [m.ref_count(b) for b in m.block_table(2)] == [1, 1]
    m.append_token(2, 6)
    assert gpu.copies == 0 and read_back(m, gpu, 2) == [1, 2, 3, 4, 5, 6]
    m.free(2)
    assert m.num_free_blocks() == 8


# --------------------------------------------------------------------------- swap
@pytest.mark.kata_gate("swap_in recomputes the KV instead of moving it back from the cpu")
def test_swap_moves_kv_and_never_recomputes(bm: Any, kv_store: Any) -> None:
    gpu, cpu = kv_store.KVPool(12, 4, "gpu"), kv_store.KVPool(6, 4, "cpu")
    m = bm.BlockManager(gpu, cpu, prefix_caching=True)
    m.add_sequence(0, list(range(17)))  # 5 blocks
    for t in (50, 51, 52):
        m.append_token(0, t)
    m.swap_out(0)
    assert (gpu.transfers_out, cpu.transfers_in) == (5, 5)
    cpu.write(m.block_table(0)[0], 0, [-7])  # the swapped KV is the truth now (a marker)
    writes = gpu.writes
    m.swap_in(0)
    assert gpu.writes == writes, "swap_in wrote KV: it must transfer what the cpu holds"
    assert gpu.transfers_in == 5 and cpu.transfers_out == 5
    assert read_back(m, gpu, 0)[0] == -7, "swap_in did not bring the cpu's KV back"
    m.free(0)
    assert m.num_free_blocks() == 12


def test_swap_state_machine(bm: Any, checker: Any) -> None:
    run_state_machine_as_test(
        checker.machine(
            bm.BlockManager,
            num_blocks=12,
            num_cpu_blocks=8,
            swaps=True,
            forks=True,
            prefix_caching=True,
        ),
        settings=hidden_settings(max_examples=40, stateful_step_count=40),
    )


def test_swap_trace_other_seed(bm: Any, kata: Any) -> None:
    replay, gen = kata.module("replay"), kata.module("gen_traces")
    stats = replay.run(
        bm.BlockManager, gen.generate("parallel-sampling", 404), prefix_caching=False
    )
    assert stats.swaps > 0 and stats.cow_copies > 0


# --------------------------------------------------------------------------- speed
def test_speed_bigger_pool(bm: Any, kata: Any, kata_budget: Any) -> None:
    """16384 blocks, another seed: an O(pool) step per call shows even more."""
    replay, gen = kata.module("replay"), kata.module("gen_traces")
    ref = kata_budget.reference
    ref_bm, ref_replay = ref.module("block_manager"), ref.module("replay")
    trace = gen.generate("multi-turn", 505, 0.5)
    trace["num_gpu_blocks"] = 16384
    reqs = replay.requests_of(trace)
    want = ref_replay.run(ref_bm.BlockManager, trace, requests=reqs).computed_tokens

    def caches(stats: Any) -> None:  # the timed manager is the whole one: its prefix cache too
        assert stats.computed_tokens <= 1.05 * want, (
            f"the timed replay computed {stats.computed_tokens} prompt tokens, the reference {want}"
        )

    kata_budget.compare(
        lambda: replay.run(bm.BlockManager, trace, requests=reqs),
        lambda: ref_replay.run(ref_bm.BlockManager, trace, requests=reqs),
        name="replay-16k",
        ratio=2.5,
        check=caches,
    )
