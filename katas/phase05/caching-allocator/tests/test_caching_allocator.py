"""Public tests of caching-allocator, tasks "sizes" and "pools" (allocator.rs).

Every constant is PyTorch's (c10/cuda/CUDACachingAllocator.cpp, in api.rs); README.md walks
through each case below.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.stateful import run_state_machine_as_test

from harness.testing import hidden_settings

KiB, MiB = 1 << 10, 1 << 20


# --------------------------------------------------------------------------- sizes
def test_sizes_round_to_512(lib: Any, alloc: Any) -> None:
    for size, want in [(1, 512), (511, 512), (512, 512), (513, 1024), (1_000_000, 1_000_448)]:
        got = alloc.sizes(lib, size).rounded
        assert got == want, f"round_size({size}) = {got}, expected {want}"


def test_sizes_small_and_large(lib: Any, alloc: Any) -> None:
    assert alloc.sizes(lib, 512).small and alloc.sizes(lib, MiB).small, "1 MiB is still small"
    assert not alloc.sizes(lib, MiB + 512).small


def test_sizes_segment_sizes(lib: Any, alloc: Any) -> None:
    cases = [
        (512, 2 * MiB),  # small pool: 2 MiB segments shared by many small blocks
        (MiB, 2 * MiB),
        (MiB + 512, 20 * MiB),  # large, below 10 MiB: a 20 MiB segment to split
        (10 * MiB - 512, 20 * MiB),
        (10 * MiB, 10 * MiB),  # 10 MiB and up: its own segment, rounded to 2 MiB
        (10 * MiB + 512, 12 * MiB),
        (100_000_256, 96 * MiB),
    ]
    for rounded, want in cases:
        got = alloc.sizes(lib, rounded).segment
        assert got == want, f"segment_size({rounded}) = {got}, expected {want}"


def test_sizes_should_split(lib: Any, alloc: Any) -> None:
    def split(block: int, request: int) -> bool:
        return alloc.sizes(lib, block, request).split

    assert split(2 * MiB, 512), "small: 2 MiB - 512 stays free"
    assert split(1024, 512), "small: a 512-byte rest is still worth a block"
    assert not split(1024, 1024)
    assert not split(20 * MiB, 19 * MiB), "large: a rest of exactly 1 MiB is not split off"
    assert split(20 * MiB, 19 * MiB - 512)
    assert not split(12 * MiB, 11 * MiB + 512)


# --------------------------------------------------------------------------- pools
def blocks(a: Any) -> list[tuple[int, int]]:
    """(size, state) of every block, in address order."""
    return [(b.size, b.state) for s in a.snapshot() for b in s.blocks]


def test_pools_first_malloc_reserves_a_segment(make: Any, alloc: Any) -> None:
    a, dev = make()
    p = a.malloc(1000)
    assert p % 512 == 0 and p != 0
    assert dev.info().mallocs == 1 and dev.info().used == 2 * MiB, "one 2 MiB small segment"
    assert blocks(a) == [(1024, alloc.ALLOCATED), (2 * MiB - 1024, alloc.FREE)], "split"
    q = a.malloc(3000)  # 3072 rounded, cut from the free rest of the same segment
    assert q == p + 1024 and dev.info().mallocs == 1
    s = a.stats()
    assert (s.allocated, s.reserved, s.active) == (1024 + 3072, 2 * MiB, 1024 + 3072)
    assert s.device_mallocs == 1 and s.inactive_split == 2 * MiB - 4096


def test_pools_free_merges_neighbours(make: Any, alloc: Any) -> None:
    a, dev = make()
    x, y, z = a.malloc(512), a.malloc(512), a.malloc(512)
    a.free(y)
    assert blocks(a)[:4] == [(512, 1), (512, 0), (512, 1), (2 * MiB - 1536, 0)]
    a.free(x)  # merges with y's free block
    assert blocks(a)[:3] == [(1024, 0), (512, 1), (2 * MiB - 1536, 0)]
    a.free(z)  # merges with both sides: the segment is one free block again
    assert blocks(a) == [(2 * MiB, 0)]
    assert a.stats().allocated == 0 and a.stats().reserved == 2 * MiB, "cached, not returned"
    assert a.malloc(700) == x and dev.info().mallocs == 1, "the cached segment is reused"


def test_pools_best_fit(make: Any) -> None:
    a, _ = make()
    holes = []
    for size in (4 * KiB, 2 * KiB, 8 * KiB):
        holes.append(a.malloc(size))
        a.malloc(512)  # a live separator keeps the holes apart
    for h in holes:
        a.free(h)
    # 1536 bytes fit the 4 KiB, 2 KiB and 8 KiB holes and the segment's tail: best = 2 KiB
    assert a.malloc(1500) == holes[1], "best fit: the smallest free block that is big enough"
    assert a.malloc(512) == holes[1] + 1536, "the 512 bytes left of that hole are the best fit"
    assert a.malloc(4096) == holes[0]


def test_pools_small_and_large_pools_stay_apart(make: Any, alloc: Any) -> None:
    a, dev = make()
    small = a.malloc(MiB)  # 2 MiB small segment, 1 MiB of it free
    big = a.malloc(MiB + 1)  # 20 MiB large segment, split: 19 MiB - 512 free
    assert dev.info().used == 22 * MiB
    a.free(small)
    c = a.malloc(3 * MiB)  # large: from the large segment's free rest, not a new segment
    assert c == big + MiB + 512 and dev.info().mallocs == 2
    d = a.malloc(4 * KiB)  # small: from the small segment
    assert d == small and dev.info().mallocs == 2


def test_pools_large_blocks_keep_small_rests(make: Any, alloc: Any) -> None:
    a, _ = make()
    p = a.malloc(19 * MiB + 1)  # the rest of its 20 MiB segment is < 1 MiB: not split off
    assert blocks(a) == [(20 * MiB, alloc.ALLOCATED)]
    assert a.stats().allocated == 20 * MiB, "allocated counts the whole block"
    a.free(p)
    q = a.malloc(18 * MiB)  # rest 2 MiB > 1 MiB: split
    assert q == p and blocks(a) == [(18 * MiB, 1), (2 * MiB, 0)]


def test_pools_big_requests_get_their_own_segment(make: Any) -> None:
    a, dev = make()
    a.malloc(10 * MiB)
    a.malloc(25_000_000)
    assert dev.info().used == 10 * MiB + 24 * MiB and dev.info().mallocs == 2


def test_pools_peaks_and_empty_cache(make: Any) -> None:
    a, dev = make()
    ps = [a.malloc(5 * MiB) for _ in range(4)]  # 4 x 5 MiB in one 20 MiB segment
    keep = a.malloc(1000)  # a small segment that stays in use
    for p in ps:
        a.free(p)
    s = a.stats()
    assert s.peak_allocated == 20 * MiB + 1024 and s.allocated == 1024
    assert s.reserved == 22 * MiB and s.peak_reserved == 22 * MiB
    a.empty_cache()  # the large segment is entirely free: back to the device
    s = a.stats()
    assert s.reserved == 2 * MiB and dev.info().used == 2 * MiB, "the small one is in use"
    assert s.device_frees == 1 and s.peak_reserved == 22 * MiB
    a.free(keep)
    a.empty_cache()
    assert a.stats().reserved == 0 and a.snapshot() == []


def test_pools_out_of_memory_frees_the_cache_and_retries(make: Any, alloc: Any) -> None:
    a, dev = make(capacity=40 * MiB)
    x, y = a.malloc(12 * MiB), a.malloc(12 * MiB)  # two 12 MiB segments
    a.free(x)
    a.free(y)  # cached: 24 MiB reserved, 16 MiB left on the device
    z = a.malloc(30 * MiB)  # does not fit next to the cache: free it, retry once
    s = a.stats()
    assert s.alloc_retries == 1 and s.device_frees == 2 and s.reserved == 30 * MiB
    with pytest.raises(alloc.OutOfMemory, match="out of memory"):
        a.malloc(20 * MiB)  # 10 MiB free, nothing cached to give back
    s = a.stats()
    assert s.ooms == 1 and s.alloc_retries == 2
    assert a.malloc(1000) != 0, "the allocator still works after an OOM"
    a.free(z)


def test_pools_zero_and_bad_pointers(make: Any) -> None:
    a, dev = make()
    assert a.malloc(0) == 0 and dev.info().mallocs == 0, "malloc(0) is the null pointer"
    a.free(0)
    p = a.malloc(100)
    with pytest.raises(ValueError):
        a.free(p + 512)  # inside the segment, but no allocation starts there
    a.free(p)
    with pytest.raises(ValueError):
        a.free(p)  # twice
    with pytest.raises(ValueError):
        a.record_stream(p, 1)


def test_pools_state_machine(lib: Any, checker: Any) -> None:
    """Random mallocs, frees and empty_cache on a 64 MiB device against the model in
    checker.py (one stream): best fit, splits, merges, stats, the OOM retry."""
    run_state_machine_as_test(
        checker.machine(lib), settings=hidden_settings(max_examples=30, stateful_step_count=40)
    )
