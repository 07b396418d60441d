"""Public tests of paged-kv-cache, tasks "prefix" (prefix caching) and "fork" (copy-on-write)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

SYSTEM = [101, 102, 103, 104, 105, 106, 107, 108]  # two full blocks of 4


def make(bm: Any, kv_store: Any, blocks: int = 16, bs: int = 4, caching: bool = True) -> Any:
    gpu = kv_store.KVPool(blocks, bs, "gpu")
    return bm.BlockManager(gpu, None, prefix_caching=caching), gpu


# --------------------------------------------------------------------------- prefix
def test_prefix_block_hashes_form_a_chain(bm: Any) -> None:
    a = bm.block_hashes([1, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    assert len(a) == 2, "one hash per FULL block: 9 tokens hold 2 full blocks of 4"
    assert bm.block_hashes([1, 2, 3, 4, 5, 6, 7, 8], 4) == a, "the same prefix, the same hashes"
    assert bm.block_hashes([1, 2, 3, 4, 5, 6, 7, 0], 4)[0] == a[0]
    b = bm.block_hashes([0, 2, 3, 4, 5, 6, 7, 8], 4)
    assert b[0] != a[0]
    assert b[1] != a[1], "block 1 holds the same tokens, but after a different block 0"
    assert bm.block_hashes([1, 2, 3], 4) == []


def test_prefix_shared_system_prompt_is_stored_once(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu = make(bm, kv_store)
    assert m.add_sequence(0, SYSTEM + [1, 2]) == 0  # a cold cache
    assert m.add_sequence(1, SYSTEM + [3]) == 8, "both blocks of the system prompt are cached"
    assert m.add_sequence(2, SYSTEM + [4, 5, 6]) == 8
    tables = [m.block_table(s) for s in (0, 1, 2)]
    assert tables[0][:2] == tables[1][:2] == tables[2][:2], f"tables {tables}"
    assert [m.ref_count(b) for b in tables[0][:2]] == [3, 3]
    assert gpu.writes == 10 + 1 + 3, "the system prompt's KV is written once"
    assert m.num_free_blocks() == 16 - 5
    assert all(m.is_cached(b) for b in tables[0][:2])
    assert not m.is_cached(tables[0][2]), "a partial block is never in the prefix cache"
    for s, tail in ((0, [1, 2]), (1, [3]), (2, [4, 5, 6])):
        assert read_back(m, gpu, s) == SYSTEM + tail


def test_prefix_the_last_prompt_token_is_always_computed(bm: Any, kv_store: Any) -> None:
    m, gpu = make(bm, kv_store)
    m.add_sequence(0, SYSTEM)
    # The same 8 tokens again: block 1 holds the last prompt token, so it is computed (the
    # model needs that token's output to sample the first new one) -- into a new block.
    assert m.add_sequence(1, SYSTEM) == 4
    assert m.block_table(1)[0] == m.block_table(0)[0]
    assert m.block_table(1)[1] != m.block_table(0)[1]
    assert gpu.writes == 8 + 4


def test_prefix_cache_outlives_the_sequence(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu = make(bm, kv_store)
    m.add_sequence(0, SYSTEM + [1])
    first = m.block_table(0)
    m.free(0)
    assert m.num_free_blocks() == 16, "cached blocks nobody uses count as free"
    assert m.is_cached(first[0]) and m.is_cached(first[1])
    assert m.add_sequence(1, SYSTEM + [2]) == 8, "a finished request's blocks are still cached"
    assert m.block_table(1)[:2] == first[:2]
    assert read_back(m, gpu, 1) == SYSTEM + [2]
    assert m.num_free_blocks() == 13


def test_prefix_decoded_blocks_are_cached_too(bm: Any, kv_store: Any) -> None:
    m, gpu = make(bm, kv_store)
    m.add_sequence(0, [1, 2, 3])
    m.append_token(0, 4)  # block 0 is now full: it enters the cache
    m.append_token(0, 5)
    assert m.is_cached(m.block_table(0)[0])
    # A multi-turn chat: the next prompt is the history plus a new message.
    assert m.add_sequence(1, [1, 2, 3, 4, 5, 6]) == 4


def test_prefix_eviction_takes_the_least_recently_freed(bm: Any, kv_store: Any) -> None:
    m, gpu = make(bm, kv_store, blocks=8)
    a, b = [1] * 8 + [0], [2] * 8 + [0]
    m.add_sequence(0, a)  # blocks 0, 1, 2
    m.add_sequence(1, b)  # blocks 3, 4, 5
    m.free(0)  # free queue: 6, 7, then 2, 1, 0 (last block first)
    m.free(1)  # ... then 5, 4, 3
    # 20 new tokens take 5 blocks from the front: 6, 7, 2, 1, 0 -- a's prefix is evicted.
    m.add_sequence(2, [3] * 20)
    assert m.block_table(2) == [6, 7, 2, 1, 0]
    assert m.add_sequence(3, b) == 8, "b's blocks were freed later: still cached"
    m.free(2)
    assert m.add_sequence(4, a) == 0, "a's blocks were evicted"


@pytest.mark.parametrize("kind", ["system-prompt", "multi-turn", "parallel-sampling"])
def test_prefix_hit_rate_on_shipped_traces(
    kind: str, bm: Any, replay: Any, kata_budget: Any
) -> None:
    """Replays traces/<kind>.json; budget: at most 1.05x the reference's computed prompt tokens
    (the cache misses). The report shows both hit rates."""
    trace = replay.load(kind)
    reqs = replay.requests_of(trace)
    mine = replay.run(bm.BlockManager, trace, requests=reqs)
    kata_budget.metrics[f"hit rate ({kind})"] = round(mine.hit_rate, 4)
    ref = None
    if kata_budget.reference_available:
        ref_bm = kata_budget.reference.module("block_manager")
        ref_replay = kata_budget.reference.module("replay")
        ref = lambda: ref_replay.run(ref_bm.BlockManager, trace, requests=reqs).computed_tokens
    kata_budget.compare(
        lambda: mine.computed_tokens,
        ref,
        name=f"misses-{kind}",
        metric="computed prompt tokens",
        ratio=1.05,
        rounds=1,
    )


def test_prefix_picture(bm: Any, kv_store: Any, kata: Any, kata_metrics: Any) -> None:
    picture = kata.module("picture")
    m, gpu = make(bm, kv_store, blocks=16)
    m.add_sequence(0, SYSTEM + [1, 2, 3, 4, 5])
    m.add_sequence(1, SYSTEM + [6])
    m.add_sequence(2, [9, 9, 9, 9, 9])
    m.free(2)  # its full block stays cached
    m.add_sequence(3, SYSTEM + [7, 7])
    svg = picture.block_table_svg(m, [0, 1, 3], 16, title="A shared system prompt, stored once")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    kata_metrics["svg"] = svg
    kata_metrics["label"] = "your block manager: three requests share a system prompt"


# --------------------------------------------------------------------------- fork
def test_fork_shares_every_block(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu = make(bm, kv_store, caching=False)
    m.add_sequence(0, [1, 2, 3, 4, 5, 6])
    m.fork(0, 1)
    assert m.block_table(1) == m.block_table(0)
    assert [m.ref_count(b) for b in m.block_table(0)] == [2, 2]
    assert gpu.writes == 6 and gpu.copies == 0 and m.num_free_blocks() == 14
    assert read_back(m, gpu, 1) == [1, 2, 3, 4, 5, 6]


def test_fork_copy_on_write_of_the_last_block(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu = make(bm, kv_store, caching=False)
    m.add_sequence(0, [1, 2, 3, 4, 5, 6])  # blocks 0, 1 (block 1 half full)
    m.fork(0, 1)
    m.append_token(1, 70)  # block 1 is shared: copy it, then write
    t0, t1 = m.block_table(0), m.block_table(1)
    assert t1[0] == t0[0] and t1[1] != t0[1], f"parent {t0}, child {t1}"
    assert gpu.copies == 1, "one block copied, not the whole sequence"
    assert [m.ref_count(b) for b in (t0[0], t0[1], t1[1])] == [2, 1, 1]
    m.append_token(0, 60)  # the parent now owns block 1 alone: no copy
    assert gpu.copies == 1 and m.block_table(0) == t0
    assert read_back(m, gpu, 0) == [1, 2, 3, 4, 5, 6, 60]
    assert read_back(m, gpu, 1) == [1, 2, 3, 4, 5, 6, 70]


def test_fork_full_last_block_needs_no_copy(bm: Any, kv_store: Any, read_back: Any) -> None:
    m, gpu = make(bm, kv_store, caching=False)
    m.add_sequence(0, [1, 2, 3, 4])
    m.fork(0, 1)
    m.append_token(1, 5)  # a new block of its own; block 0 stays shared
    assert gpu.copies == 0 and m.ref_count(m.block_table(0)[0]) == 2
    m.free(0)
    assert m.ref_count(m.block_table(1)[0]) == 1
    assert read_back(m, gpu, 1) == [1, 2, 3, 4, 5]


def test_fork_parallel_sampling_trace(bm: Any, replay: Any) -> None:
    """n = 2..4 samples per request, each forked from the prompt; every sample reads back its
    own tokens when it finishes (replay.py checks)."""
    stats = replay.run(bm.BlockManager, replay.load("parallel-sampling"), prefix_caching=False)
    assert stats.cow_copies > 0
