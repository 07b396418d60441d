"""GIVEN: Python's view of your allocator (through lib.rs's C ABI). Do not edit.

    dev = Device(lib, capacity=1 << 30)
    a = Allocator(lib, dev)
    p = a.malloc(3000, stream=0)      # an address on the simulated device
    a.record_stream(p, 1); a.free(p)  # reusable once stream 1's work so far is done
    a.stats().reserved, a.snapshot()  # torch.cuda.memory_stats() / memory_snapshot()

A `todo!()` reached in allocator.rs raises KataTodo (the task shows as not started); another
panic raises RustPanic with its message and line.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from harness import NativeFault, todo

MiB = 1 << 20
OK, OOM, INVALID, TODO, PANIC = 0, 1, 2, -2, -3
FREE, ALLOCATED, AWAITING_EVENTS = 0, 1, 2
OPS = ("malloc", "free", "record_stream", "launch", "complete", "empty_cache", "synchronize")


class OutOfMemory(MemoryError):
    """The allocator could not get memory from the device, even after freeing its cache."""


class RustPanic(NativeFault, AssertionError):
    """allocator.rs panicked (an unwrap, an index out of range, an overflow ...): the test
    fails with the panic's message and line, and no gate is tripped (harness.NativeFault)."""


def check(lib: Any, code: int, what: str) -> None:
    """Turn a status code of lib.rs into Python: nothing, KataTodo or an exception."""
    if code == OK:
        return
    msg = lib.ffi.string(lib.kata_last_error()).decode(errors="replace")
    if code == TODO:
        todo(f"allocator.rs: {what} ({msg})")
    if code == OOM:
        raise OutOfMemory(msg)
    if code == INVALID:
        raise ValueError(msg)
    raise RustPanic(f"allocator.rs panicked in {what}: {msg}")


@dataclass(frozen=True)
class Sizes:
    rounded: int
    small: bool
    segment: int
    split: bool


def sizes(lib: Any, size: int, request: int = 0) -> Sizes:
    """round_size(size), is_small(size), segment_size(size), should_split(size, request)."""
    out = lib.ffi.new("uint64_t[4]")
    check(lib, lib.kata_sizes(size, request, out), "the size functions")
    return Sizes(int(out[0]), bool(out[1]), int(out[2]), bool(out[3]))


@dataclass(frozen=True)
class DeviceInfo:
    capacity: int
    used: int
    peak_used: int  # the device's own high-water mark of `used` (what the traces grade)
    mallocs: int
    frees: int
    failed_mallocs: int
    live_events: int
    simulated_ns: int
    bad_calls: int  # frees of unknown pointers, unknown or twice-released events


class Device:
    """The simulated GPU (device.rs): a capacity, a cost per malloc, streams and events."""

    def __init__(self, lib: Any, capacity: int = 1 << 30, malloc_cost_ns: int = 50_000) -> None:
        self.lib = lib
        self.ptr = lib.ffi.gc(
            lib.kata_device_new(capacity, malloc_cost_ns), lib.kata_device_destroy
        )

    def launch(self, stream: int) -> None:
        """A kernel on `stream` starts using memory; it runs until complete()/synchronize()."""
        self.lib.kata_device_launch(self.ptr, stream)

    def complete(self, stream: int) -> None:
        self.lib.kata_device_complete(self.ptr, stream)

    def synchronize(self) -> None:
        self.lib.kata_device_synchronize(self.ptr)

    def info(self) -> DeviceInfo:
        out = self.lib.ffi.new("kata_device_info_t *")
        self.lib.kata_device_info(self.ptr, out)
        return DeviceInfo(*(int(getattr(out, f.name)) for f in fields(DeviceInfo)))


@dataclass(frozen=True)
class Stats:
    allocated: int
    reserved: int
    active: int
    inactive_split: int
    peak_allocated: int
    peak_reserved: int
    device_mallocs: int
    device_frees: int
    alloc_retries: int
    ooms: int


@dataclass(frozen=True)
class Block:
    address: int
    size: int
    state: int  # FREE, ALLOCATED or AWAITING_EVENTS


@dataclass(frozen=True)
class Segment:
    address: int
    size: int
    stream: int
    small: bool
    blocks: tuple[Block, ...]


class Allocator:
    """Your CachingAllocator on `device`."""

    def __init__(self, lib: Any, device: Device) -> None:
        self.lib, self.device = lib, device
        out = lib.ffi.new("KataAllocator **")
        check(lib, lib.kata_allocator_new(device.ptr, out), "CachingAllocator::new")
        self.ptr = lib.ffi.gc(out[0], lib.kata_allocator_destroy)

    def malloc(self, size: int, stream: int = 0) -> int:
        out = self.lib.ffi.new("uint64_t *")
        check(self.lib, self.lib.kata_malloc(self.ptr, size, stream, out), "malloc")
        return int(out[0])

    def free(self, ptr: int) -> None:
        check(self.lib, self.lib.kata_free(self.ptr, ptr), "free")

    def record_stream(self, ptr: int, stream: int) -> None:
        check(self.lib, self.lib.kata_record_stream(self.ptr, ptr, stream), "record_stream")

    def empty_cache(self) -> None:
        check(self.lib, self.lib.kata_empty_cache(self.ptr), "empty_cache")

    def stats(self) -> Stats:
        out = self.lib.ffi.new("kata_stats_t *")
        check(self.lib, self.lib.kata_stats(self.ptr, out), "stats")
        return Stats(*(int(getattr(out, f.name)) for f in fields(Stats)))

    def snapshot(self) -> list[Segment]:
        """Every segment with its blocks, in address order (torch.cuda.memory_snapshot())."""
        n = self.lib.ffi.new("uint64_t *")
        cap = 1024
        while True:
            buf = self.lib.ffi.new("kata_block_t[]", cap)
            check(self.lib, self.lib.kata_snapshot(self.ptr, buf, cap, n), "snapshot")
            if n[0] <= cap:
                break
            cap = int(n[0])
        segments: list[Segment] = []
        blocks: list[Block] = []
        for i in range(int(n[0])):
            b = buf[i]
            blocks.append(Block(int(b.address), int(b.size), int(b.state)))
            if b.address + b.size >= b.segment + b.segment_size:  # the segment's last block
                segments.append(
                    Segment(int(b.segment), int(b.segment_size), int(b.stream), bool(b.small),
                            tuple(blocks))
                )  # fmt: skip
                blocks = []
        if blocks:
            raise AssertionError(f"snapshot: blocks after the last segment's end: {blocks}")
        return segments

    def replay(self, ops: Any) -> int:
        """Run a trace (a numpy array of trace.OP_DTYPE) inside Rust; returns the ns spent."""
        out = self.lib.ffi.new("uint64_t *")
        view = self.lib.ffi.from_buffer("kata_op_t[]", ops)
        check(self.lib, self.lib.kata_replay(self.ptr, view, len(ops), out), "a trace replay")
        return int(out[0])

    def stress(self, threads: int, ops: int, seed: int = 0) -> int:
        """`threads` threads malloc and free at once; returns how often two live blocks
        overlapped (must be 0)."""
        out = self.lib.ffi.new("uint64_t *")
        check(self.lib, self.lib.kata_stress(self.ptr, threads, ops, seed, out), "concurrent use")
        return int(out[0])
