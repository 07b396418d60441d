"""Public tests of paged-kv-cache, tasks "swap" (to the cpu pool and back) and "speed"."""

from __future__ import annotations

from typing import Any

import pytest


def make(bm: Any, kv_store: Any, blocks: int = 8, cpu_blocks: int = 4, bs: int = 4) -> Any:
    gpu = kv_store.KVPool(blocks, bs, "gpu")
    cpu = kv_store.KVPool(cpu_blocks, bs, "cpu")
    return bm.BlockManager(gpu, cpu, prefix_caching=False), gpu, cpu


# --------------------------------------------------------------------------- swap
def test_swap_out_and_back_in(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu, cpu = make(bm, kv_store)
    m.add_sequence(0, [1, 2, 3, 4, 5, 6])
    m.swap_out(0)
    assert m.is_swapped(0)
    assert m.num_free_blocks() == 8, "a swapped-out sequence holds no gpu block"
    assert gpu.transfers_out == 2 and cpu.transfers_in == 2, "one transfer per block"
    assert read_back(m, cpu, 0) == [1, 2, 3, 4, 5, 6], "the table points into the cpu pool"
    m.add_sequence(1, list(range(20)))  # the gpu is busy with someone else meanwhile
    m.swap_in(0)
    assert not m.is_swapped(0) and m.num_free_blocks() == 8 - 5 - 2
    assert gpu.transfers_in == 2 and gpu.writes == 6 + 20, "swap-in moves KV, it does not recompute"
    assert read_back(m, gpu, 0) == [1, 2, 3, 4, 5, 6]
    m.append_token(0, 7)
    assert read_back(m, gpu, 0) == [1, 2, 3, 4, 5, 6, 7]


def test_swap_needs_room(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu, cpu = make(bm, kv_store, blocks=8, cpu_blocks=2)
    m.add_sequence(0, list(range(9)))  # 3 blocks, 2 cpu blocks
    with pytest.raises(kv_store.NoFreeBlocks):
        m.swap_out(0)
    assert not m.is_swapped(0) and m.num_free_blocks() == 5 and gpu.transfers_out == 0
    m.add_sequence(1, [1, 2, 3])
    m.swap_out(1)
    m.add_sequence(2, list(range(20)))  # the rest of the gpu
    with pytest.raises(kv_store.NoFreeBlocks):
        m.swap_in(1)
    assert m.is_swapped(1) and read_back(m, cpu, 1) == [1, 2, 3]
    m.free(2)
    m.swap_in(1)
    assert read_back(m, gpu, 1) == [1, 2, 3]


def test_swap_free_and_misuse(bm: Any, kv_store: Any) -> None:
    m, gpu, cpu = make(bm, kv_store, cpu_blocks=2)
    m.add_sequence(0, [1, 2, 3, 4, 5])
    m.swap_out(0)
    with pytest.raises(ValueError):
        m.append_token(0, 6)  # its KV is on the cpu: swap it in first
    m.free(0)  # a finished (or aborted) swapped sequence frees its cpu blocks
    m.add_sequence(1, [1, 2, 3, 4, 5])
    m.swap_out(1)  # needs both cpu blocks again
    assert m.is_swapped(1)


def test_swap_trace_with_preemption(bm: Any, replay: Any) -> None:
    """The system-prompt trace on a pool too small for its 24 running sequences: the replay
    preempts by swapping (replay.py) and checks every sequence's tokens at the end."""
    stats = replay.run(bm.BlockManager, replay.load("system-prompt"), prefix_caching=False)
    assert stats.swaps > 0


# --------------------------------------------------------------------------- speed
SPEED_TRACE = dict(kind="system-prompt", seed=1001, size=0.5, num_gpu_blocks=4096)


def speed_trace(gen: Any) -> dict[str, Any]:
    trace = gen.generate(SPEED_TRACE["kind"], SPEED_TRACE["seed"], SPEED_TRACE["size"])
    trace["num_gpu_blocks"] = SPEED_TRACE["num_gpu_blocks"]  # big: O(blocks) per call shows
    return trace


def test_speed_ops_per_second(bm: Any, kata: Any, kata_budget: Any) -> None:
    """Every block-manager operation should cost O(1) (O(blocks touched)), never O(pool size):
    a serving engine calls it for every token of every sequence. Budget: 2.5x the reference's
    time on a replay with 4096 gpu blocks."""
    replay, gen = kata.module("replay"), kata.module("gen_traces")
    ref = kata_budget.reference
    ref_bm, ref_replay = ref.module("block_manager"), ref.module("replay")
    trace = speed_trace(gen)
    reqs = replay.requests_of(trace)
    want = ref_replay.run(ref_bm.BlockManager, trace, requests=reqs).computed_tokens

    def caches(stats: Any) -> None:  # the timed manager is the whole one: its prefix cache too
        assert stats.computed_tokens <= 1.05 * want, (
            f"the timed replay computed {stats.computed_tokens} prompt tokens, the reference {want}"
        )

    verdict = kata_budget.compare(
        lambda: replay.run(bm.BlockManager, trace, requests=reqs),
        lambda: ref_replay.run(ref_bm.BlockManager, trace, requests=reqs),
        name="replay",
        ratio=2.5,
        check=caches,
    )
    ops = replay.run(bm.BlockManager, trace, requests=reqs).ops
    kata_budget.metrics["your ops/s"] = round(ops / (verdict.learner_cost / 1e9))
    kata_budget.metrics["reference ops/s"] = round(ops / (verdict.reference_cost / 1e9))
