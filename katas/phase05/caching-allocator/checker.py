"""GIVEN (not graded): the model the tests check your allocator against, step by step.

`machine(lib, ...)` builds a hypothesis RuleBasedStateMachine that drives your allocator with
random mallocs, frees, record_streams, kernel launches and completions, and empty_cache calls,
on a small device (64 MiB: three large segments fit, so the out-of-memory path runs). It keeps
a *model*: the live allocations, the streams each was recorded on, the work on each stream.
Before each malloc it works out from your own snapshot what the answer must be:

- the blocks waiting for events whose streams have finished count as free (malloc processes
  events first), merged with their free neighbours;
- the best fit: the smallest free block of the request's pool (small: rounded size <= 1 MiB)
  and stream that is big enough, the lowest address among equals -> that address, no device
  malloc; the block handed out has the rounded size when should_split says so, else all of it;
- no fit: one device malloc of segment_size(rounded), the block at the segment's start;
- that malloc does not fit on the device: every segment that is (or becomes, once all events
  are waited for) entirely free goes back to the device, and one retry; if it still does not
  fit, OutOfMemory.

After every step: segments do not overlap and their blocks tile them exactly, 512-aligned; no
two free blocks are neighbours (merged); the allocated blocks are exactly the live allocations;
blocks awaiting events are exactly those freed after record_stream whose streams may still run;
every counter of stats() agrees with the snapshot and the device (reserved == device bytes in
use, device_mallocs == the device's count ...), and the device saw no bad call.

The model knows what the device does when the allocator waits: synchronizing an event
(empty_cache, the retry path) completes its stream's work up to the event, and a device free
(cudaFree) completes the work of every stream. So a block freed after record_stream on a stream
whose work was completed that way need not wait.

`random_run(lib, seed, steps, ...)` drives the same model with a seeded random sequence of
operations (no hypothesis): the hidden tests run it on fresh seeds; the seed reproduces a run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from .alloc import ALLOCATED, AWAITING_EVENTS, FREE, Allocator, Device, OutOfMemory, Segment

MiB = 1 << 20
MIN_BLOCK, SMALL_SIZE, SMALL_BUFFER, LARGE_BUFFER = 512, MiB, 2 * MiB, 20 * MiB
MIN_LARGE_ALLOC, ROUND_LARGE = 10 * MiB, 2 * MiB

SIZES = st.one_of(
    st.integers(1, 8192),
    st.integers(1, 2 * MiB),
    st.integers(1, 24 * MiB),
    st.sampled_from([512, 513, MiB, MiB + 1, 10 * MiB - 1, 10 * MiB, 21 * MiB]),
)


BAD_POINTERS = [1, 4096, 0x7F00_0000_0000 + 512]


def rounded(size: int) -> int:
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def segment_for(r: int) -> int:
    if r <= SMALL_SIZE:
        return SMALL_BUFFER
    return LARGE_BUFFER if r < MIN_LARGE_ALLOC else -(-r // ROUND_LARGE) * ROUND_LARGE


def splits(block: int, r: int) -> bool:
    return block - r >= MIN_BLOCK if r <= SMALL_SIZE else block - r > SMALL_SIZE


@dataclass
class Live:
    size: int
    stream: int
    uses: set[int] = field(default_factory=set)


def _free_runs(seg: Segment, also_free: set[int]) -> list[tuple[int, int]]:
    """(address, size) of the free blocks of `seg` once the blocks in `also_free` are free too
    and neighbours are merged."""
    runs: list[tuple[int, int]] = []
    prev_end = None
    for b in seg.blocks:
        if b.state == FREE or b.address in also_free:
            if runs and prev_end == b.address:
                runs[-1] = (runs[-1][0], runs[-1][1] + b.size)
            else:
                runs.append((b.address, b.size))
            prev_end = b.address + b.size
        else:
            prev_end = None
    return runs


def machine(
    lib: Any, *, streams: bool = False, capacity: int = 64 * MiB
) -> type[RuleBasedStateMachine]:
    """A state machine class over `lib` (your built crate); `streams` adds streams 1 and 2,
    record_stream, launches and completions."""
    stream_ids = st.sampled_from([0, 1, 2]) if streams else st.just(0)

    class AllocatorMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.device = Device(lib, capacity)
            self.a = Allocator(lib, self.device)
            self.live: dict[int, Live] = {}
            self.launched = {0: 0, 1: 0, 2: 0}
            self.completed = {0: 0, 1: 0, 2: 0}
            self.pending: dict[int, dict[int, int]] = {}  # freed ptr -> {stream: launched then}
            self.peak = [0, 0]

        # ------------------------------------------------------------ the model's view
        def done(self, ptr: int) -> bool:
            return all(self.completed[s] >= n for s, n in self.pending[ptr].items())

        def snapshot(self) -> list[Segment]:
            return self.a.snapshot()

        # ------------------------------------------------------------ the device's waits
        def waited_for(self, ptrs: Any, frees_before: int) -> None:
            """The allocator synchronized the events of the blocks `ptrs` (each completes its
            stream's work up to the moment of the free), and every device free since
            `frees_before` completed all work on every stream (cudaFree waits for the device)."""
            for p in ptrs:
                for s, n in self.pending[p].items():
                    self.completed[s] = max(self.completed[s], n)
            if self.device.info().frees > frees_before:
                self.completed = dict(self.launched)

        # ------------------------------------------------------------ the operations
        def do_malloc(self, size: int, stream: int) -> None:
            segs = self.snapshot()
            ready = {p for p in self.pending if self.done(p)}
            r = rounded(size)
            small = r <= SMALL_SIZE
            fits = [
                (sz, addr)
                for s in segs
                if s.stream == stream and s.small == small
                for addr, sz in _free_runs(s, ready)
                if sz >= r
            ]
            info = self.device.info()
            try:
                ptr = self.a.malloc(size, stream)
            except OutOfMemory:
                ptr = None
            after = self.device.info()
            for p in ready:
                del self.pending[p]
            if fits:
                want_size, want = min(fits)
                assert ptr == want, (
                    f"malloc({size}, stream {stream}): the best fit is the free block at "
                    f"{want:#x} ({want_size} bytes), you returned "
                    f"{'OutOfMemory' if ptr is None else hex(ptr)}"
                )
                assert after.mallocs == info.mallocs, (
                    f"malloc({size}, stream {stream}): a cached block fits, yet the device "
                    f"made {after.mallocs - info.mallocs} malloc(s)"
                )
            else:
                seg = segment_for(r)
                if capacity - info.used < seg:  # the retry path: free whole cached segments
                    # `segs` is from before the malloc: the ready blocks (deleted from
                    # pending above) still show as awaiting events there
                    everything = {b.address for s in segs for b in s.blocks}
                    pending_all = everything & (set(self.pending) | ready)
                    whole = sum(
                        s.size for s in segs if _free_runs(s, pending_all) == [(s.address, s.size)]
                    )
                    # every event was waited for (synchronize_and_free_events)
                    self.waited_for(list(self.pending), info.frees)
                    self.pending.clear()
                    if capacity - (info.used - whole) < seg:
                        assert ptr is None, (
                            f"malloc({size}): a {seg}-byte segment cannot fit even after "
                            f"freeing the cache ({info.used - whole} of {capacity} bytes stay "
                            f"in use): expected OutOfMemory, got {ptr!r}"
                        )
                        return
                assert ptr is not None, (
                    f"malloc({size}): no cached block fits, and a new {seg}-byte segment fits "
                    "on the device (after freeing the cache if needed): expected success"
                )
                assert after.mallocs == info.mallocs + 1, (
                    f"malloc({size}): no cached block fits: exactly one device malloc, the "
                    f"device made {after.mallocs - info.mallocs}"
                )
                want_size = seg
                new = [s for s in self.snapshot() if s.address == ptr]
                assert new and new[0].size == seg, (
                    f"malloc({size}): rounded {r}, expected a new segment of {seg} bytes at the "
                    f"returned address {ptr:#x}"
                )
            got = {b.address: b for s in self.snapshot() for b in s.blocks}
            assert ptr in got and got[ptr].state == ALLOCATED, (
                f"malloc({size}) returned {ptr:#x}, which is not an allocated block of the snapshot"
            )
            expect = r if splits(want_size, r) else want_size
            assert got[ptr].size == expect, (
                f"malloc({size}) (rounded {r}) from a {want_size}-byte free block: the block "
                f"handed out should have {expect} bytes, it has {got[ptr].size}"
            )
            self.live[ptr] = Live(size, stream)

        def do_free(self, ptr: int) -> None:
            live = self.live.pop(ptr)
            self.a.free(ptr)
            if live.uses:
                self.pending[ptr] = {s: self.launched[s] for s in live.uses}

        def do_record_stream(self, ptr: int, stream: int) -> None:
            self.a.record_stream(ptr, stream)
            if stream != self.live[ptr].stream:
                self.live[ptr].uses.add(stream)

        def do_launch(self, stream: int) -> None:
            self.device.launch(stream)
            self.launched[stream] += 1

        def do_complete(self, stream: int) -> None:
            self.device.complete(stream)
            self.completed[stream] = self.launched[stream]

        def do_empty_cache(self) -> None:
            frees = self.device.info().frees
            self.a.empty_cache()
            self.waited_for(list(self.pending), frees)
            self.pending.clear()
            for s in self.snapshot():
                assert not (len(s.blocks) == 1 and s.blocks[0].state == FREE), (
                    f"after empty_cache the entirely free segment at {s.address:#x} is still "
                    "reserved"
                )
            assert self.device.info().live_events == 0, (
                "empty_cache waits for every event: events are still recorded after it"
            )

        def do_free_a_bad_pointer(self, ptr: int) -> None:
            if ptr in self.live:
                return
            try:
                self.a.free(ptr)
            except ValueError:
                return
            raise AssertionError(f"free({ptr:#x}) of a pointer never allocated: no ValueError")

        # ------------------------------------------------------------ rules (hypothesis)
        @rule(size=SIZES, stream=stream_ids)
        def malloc(self, size: int, stream: int) -> None:
            self.do_malloc(size, stream)

        @precondition(lambda self: self.live)
        @rule(data=st.data())
        def free(self, data: Any) -> None:
            self.do_free(data.draw(st.sampled_from(sorted(self.live))))

        @precondition(lambda self: self.live and streams)
        @rule(data=st.data(), stream=stream_ids)
        def record_stream(self, data: Any, stream: int) -> None:
            self.do_record_stream(data.draw(st.sampled_from(sorted(self.live))), stream)

        @precondition(lambda self: streams)
        @rule(stream=stream_ids)
        def launch(self, stream: int) -> None:
            self.do_launch(stream)

        @precondition(lambda self: streams)
        @rule(stream=stream_ids)
        def complete(self, stream: int) -> None:
            self.do_complete(stream)

        @rule()
        def empty_cache(self) -> None:
            self.do_empty_cache()

        @rule(ptr=st.sampled_from(BAD_POINTERS))
        def free_a_bad_pointer(self, ptr: int) -> None:
            self.do_free_a_bad_pointer(ptr)

        # ------------------------------------------------------------ after every step
        @invariant()
        def consistent(self) -> None:
            segs, stats, info = self.snapshot(), self.a.stats(), self.device.info()
            assert info.bad_calls == 0, "the device saw a free or event of something unknown"
            end = 0
            allocated = awaiting = split_free = 0
            states: dict[int, int] = {}
            for s in segs:
                assert s.address >= end, f"segment {s.address:#x} overlaps the one before"
                end = s.address + s.size
                at, prev_free = s.address, False
                for b in s.blocks:
                    assert b.address == at, f"segment {s.address:#x}: a gap or overlap at {at:#x}"
                    assert b.size > 0 and b.size % MIN_BLOCK == 0 and b.address % MIN_BLOCK == 0, (
                        f"block {b.address:#x} of {b.size} bytes: blocks are non-empty and "
                        f"{MIN_BLOCK}-byte aligned"
                    )
                    assert not (prev_free and b.state == FREE), (
                        f"two free neighbours at {b.address:#x}: merge them when freeing"
                    )
                    prev_free = b.state == FREE
                    at += b.size
                    states[b.address] = b.state
                    if b.state == ALLOCATED:
                        allocated += b.size
                    elif b.state == AWAITING_EVENTS:
                        awaiting += b.size
                    elif len(s.blocks) > 1:
                        split_free += b.size
                assert at == end, f"segment {s.address:#x}: its blocks do not cover it"
            mine = {p for p, st_ in states.items() if st_ == ALLOCATED}
            assert mine == set(self.live), (
                f"allocated blocks {sorted(map(hex, mine))} != live allocations "
                f"{sorted(map(hex, self.live))}"
            )
            waiting = {p for p, st_ in states.items() if st_ == AWAITING_EVENTS}
            must_wait = {p for p in self.pending if not self.done(p)}
            assert must_wait <= waiting <= set(self.pending), (
                f"blocks awaiting events {sorted(map(hex, waiting))}; freed after record_stream "
                f"and possibly still in use: {sorted(map(hex, must_wait))}"
            )
            reserved = sum(s.size for s in segs)
            self.peak = [max(self.peak[0], allocated), max(self.peak[1], reserved)]
            want = dict(
                allocated=allocated,
                reserved=reserved,
                active=allocated + awaiting,
                inactive_split=split_free,
                peak_allocated=self.peak[0],
                peak_reserved=self.peak[1],
                device_mallocs=info.mallocs,
                device_frees=info.frees,
            )
            got = {k: getattr(stats, k) for k in want}
            assert got == want, f"stats() {got} != {want} (from the snapshot and the device)"
            assert info.used == reserved, (
                f"device has {info.used} bytes in use, reserved {reserved}"
            )

    return AllocatorMachine


OPERATIONS = ("malloc", "free", "record_stream", "launch", "complete", "empty_cache", "bad_free")


def random_run(
    lib: Any, seed: int, steps: int = 200, *, streams: bool = True, capacity: int = 64 * MiB
) -> None:
    """One seeded random sequence of `steps` operations on a fresh device, checked by the same
    model and invariants as the state machine. An AssertionError names the seed, the step and
    the operations that led there (run it again with that seed to reproduce)."""
    rng = random.Random(seed)
    m = machine(lib, streams=streams, capacity=capacity)()
    stream_ids = [0, 1, 2] if streams else [0]
    ops: list[str] = []

    def size() -> int:
        kind = rng.random()
        if kind < 0.4:
            return rng.randint(1, 8192)
        if kind < 0.7:
            return rng.randint(1, 2 * MiB)
        if kind < 0.9:
            return rng.randint(1, 24 * MiB)
        return rng.choice([512, 513, MiB, MiB + 1, 10 * MiB - 1, 10 * MiB, 21 * MiB])

    weights = [6, 4, 3 if streams else 0, 3 if streams else 0, 2 if streams else 0, 1, 1]
    try:
        m.consistent()
        for _ in range(steps):
            op = rng.choices(OPERATIONS, weights)[0]
            if op in ("free", "record_stream") and not m.live:
                op = "malloc"
            if op == "malloc":
                args: tuple[Any, ...] = (size(), rng.choice(stream_ids))
            elif op in ("free", "record_stream"):
                ptr = rng.choice(sorted(m.live))
                args = (ptr, rng.choice(stream_ids)) if op == "record_stream" else (ptr,)
            elif op in ("launch", "complete"):
                args = (rng.choice(stream_ids),)
            elif op == "bad_free":
                args = (rng.choice(BAD_POINTERS),)
            else:
                args = ()
            ops.append(f"{op}({', '.join(hex(a) if a > 1 << 32 else str(a) for a in args)})")
            getattr(m, "do_free_a_bad_pointer" if op == "bad_free" else f"do_{op}")(*args)
            m.consistent()
    except AssertionError as e:
        raise type(e)(  # a RustPanic stays one: a crash of allocator.rs is not a wrong answer
            f"{e}\n(random_run seed={seed}, streams={streams}, capacity={capacity}: step "
            f"{len(ops)} of {steps}; the last operations: {'; '.join(ops[-12:])})"
        ) from None
