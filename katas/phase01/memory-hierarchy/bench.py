"""How this kata measures (given: read it, do not edit it).

The tests build your membench.c, allocate every buffer, and time your kernels here, the same way
each time: fresh memory, a warm-up, several repeats, and the *fastest* repeat (interference from
other processes only ever adds time, so the fastest run is the least disturbed one); for
bandwidth and FLOP rates a baseline measured in the same run, interleaved with your kernel
(A B B A ...), so that a busy spell slows both alike; and runs short enough (a few ms) to fit
between two moments the scheduler gives the core to another program. No test compares a time
with a fixed number.
"""

from __future__ import annotations

import math
import mmap
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import todo
from harness.native.fixtures import NativeBuilder

CACHE_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")
MB_OK, MB_NOT_IMPLEMENTED, MB_BAD_ARGS, MB_UNSUPPORTED = 0, -1, -2, -3
STREAM_COPY, STREAM_SCALE, STREAM_ADD, STREAM_TRIAD = range(4)


# --------------------------------------------------------------------------- your kernels
def build(kata: Any, sanitize: Sequence[str] = ()) -> Any:
    """membench.c built with `gcc -O2 -march=native` and loaded with cffi.

    The same builder as the `native` fixture; -march=native lets the compiler use this machine's
    widest vectors and its FMA instructions."""
    native = NativeBuilder(kata.source, kata.search_path, tuple(sanitize))
    return native("membench.c", header="membench.h", flags=("-march=native",))


def started(result: Any, what: str) -> Any:
    """Turn an untouched stub's sentinel (MB_NOT_IMPLEMENTED, NULL, NAN) into "not started"."""
    if isinstance(result, float) and math.isnan(result):
        todo(f"membench.c: {what}")
    elif isinstance(result, int) and result == MB_NOT_IMPLEMENTED:
        todo(f"membench.c: {what}")
    elif not isinstance(result, (int, float)) and not result:  # a NULL pointer
        todo(f"membench.c: {what}")
    return result


def address(lib: Any, pointer: Any) -> int:
    return int(lib.ffi.cast("uintptr_t", pointer))


# --------------------------------------------------------------------------- the machine
@dataclass(frozen=True)
class Cache:
    level: int
    type: str  # "Data" or "Unified" (instruction caches are left out)
    size: int  # bytes
    line: int  # coherency_line_size, bytes


def _size(text: str) -> int:
    text = text.strip()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def read_caches(root: Path = CACHE_SYSFS) -> list[Cache]:
    """cpu0's data and unified caches as Linux reports them (what `lscpu -C` shows)."""
    caches = []
    for d in sorted(root.glob("index*")):
        try:
            kind = (d / "type").read_text().strip()
            if kind == "Instruction":
                continue
            caches.append(
                Cache(
                    level=int((d / "level").read_text()),
                    type=kind,
                    size=_size((d / "size").read_text()),
                    line=int((d / "coherency_line_size").read_text()),
                )
            )
        except (OSError, ValueError, IndexError):
            continue
    return sorted(caches, key=lambda c: c.level)


# --------------------------------------------------------------------------- buffers
class Buffer:
    """Private anonymous memory from mmap: page-aligned, zeroed, freed on close. It asks for
    transparent huge pages (2 MiB), so that a random walk costs cache misses, not TLB misses too.
    (MAP_PRIVATE matters: Python's default, MAP_SHARED, is shmem, which gets no huge pages.)"""

    def __init__(self, nbytes: int, ffi: Any) -> None:
        self.nbytes = nbytes
        self.map = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            self.map.madvise(mmap.MADV_HUGEPAGE)
        self.ptr = ffi.from_buffer(self.map)
        self.address = int(ffi.cast("uintptr_t", self.ptr))

    def words(self) -> Any:
        """The buffer as 64-bit words (pointers), for checking what your code wrote."""
        import numpy as np

        return np.frombuffer(self.map, dtype=np.uint64)

    def close(self) -> None:
        del self.ptr
        try:
            self.map.close()
        except BufferError:  # a words() view is still alive: the memory goes when it does
            pass

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- timing
def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved(
    mine: Callable[[], Any], baseline: Callable[[], Any], rounds: int = 7
) -> tuple[float, float]:
    """Fastest seconds of `mine` and of `baseline`, run alternately (order swapped each round)
    after one warm-up call of each."""
    mine(), baseline()
    a: list[float] = []
    b: list[float] = []
    for r in range(rounds):
        if r % 2:
            b.append(timed(baseline))
            a.append(timed(mine))
        else:
            a.append(timed(mine))
            b.append(timed(baseline))
    return min(a), min(b)


def paired(mine: Callable[[], Any], baseline: Callable[[], Any], rounds: int = 9) -> float:
    """How many times faster `mine` runs than `baseline`: the median, over rounds, of the
    baseline's time over mine's in that round (the order swapped each round, after a warm-up
    of each). The two runs of a round share the machine's state of the moment, so a busy spell
    cancels out of their ratio; the median drops the rounds where it did not."""
    mine(), baseline()
    ratios = []
    for r in range(rounds):
        if r % 2:
            b = timed(baseline)
            a = timed(mine)
        else:
            a = timed(mine)
            b = timed(baseline)
        ratios.append(b / a)
    return statistics.median(ratios)


def fastest(calls: Sequence[Callable[[], Any]], rounds: int = 7) -> list[float]:
    """Fastest seconds of each call, the calls taking turns round by round after one warm-up
    each: a busy spell slows every one of them alike, and one undisturbed round is enough."""
    for call in calls:
        call()
    best = [math.inf] * len(calls)
    for _ in range(rounds):
        for i, call in enumerate(calls):
            best[i] = min(best[i], timed(call))
    return best


# --------------------------------------------------------------------------- sweeps
def sweep_sizes(lo: int, hi: int) -> list[int]:
    """Working-set sizes from `lo` to `hi` bytes, two per octave (2^k and 1.5 x 2^k)."""
    out: list[int] = []
    s = 1 << max(0, (lo - 1).bit_length())
    while s <= hi:
        out += [x for x in (s, s + s // 2) if lo <= x <= hi]
        s *= 2
    return out


def chase_ns(lib: Any, nbytes: int, hops: int, seed: int, repeats: int = 3) -> float:
    """ns per dependent load of your chase over `nbytes` (one slot per 64-byte line): link, one
    warm-up lap (capped at `hops`), then the fastest of `repeats` walks of `hops` hops."""
    with Buffer(nbytes, lib.ffi) as buf:
        slots = lib.ffi.cast("void **", buf.ptr)
        n = nbytes // 64
        started(lib.chase_link(slots, n, 8, seed), "chase_link")
        started(lib.chase_walk(slots, 1), "chase_walk")
        lib.chase_walk(slots, min(n, hops))
        best = min(timed(lambda: lib.chase_walk(slots, hops)) for _ in range(repeats))
        return best / hops * 1e9


def chase_sweep(lib: Any, sizes: Sequence[int], hops: int = 100_000, seed: int = 1) -> list[float]:
    return [chase_ns(lib, s, hops, seed + i) for i, s in enumerate(sizes)]


PROBE_OFFSETS = [8, 16, 32, 64, 128, 256, 512]
# 4 KiB + 256 bytes: every chunk's first word is 256-byte aligned (so it starts a line of any
# size up to 256), and consecutive chunks start at different offsets in their pages, so their
# first lines spread over the cache's sets instead of all landing in a few.
PROBE_CHUNK = 4096 + 256


def probe_chain(buf: Buffer, chunks: int, chunk: int, skew: int, seed: int) -> None:
    """Link the first words of the chunks (chunk i at byte skew + i * chunk) into one random
    cycle. Written here, not by your code: this task needs only your flush_lines and chase_walk."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(chunks)
    words = buf.words()
    words[(skew + order * chunk) // 8] = buf.address + skew + np.roll(order, -1) * chunk
    del words


def probe_sweep(
    lib: Any,
    offsets: Sequence[int] = PROBE_OFFSETS,
    chunks: int = 1024,
    chunk: int = PROBE_CHUNK,
    repeats: int = 15,
    skew: int = 0,
    seed: int = 7,
) -> list[float]:
    """ns per hop of a walk through the chunks' first words right after your flush_lines evicted
    the line of byte `offset` of every chunk, for each offset: the fastest of `repeats` rounds of
    (a lap that brings every first word into cache, flush_lines, a timed lap). The offsets take
    turns within each round, so a busy spell slows them alike, and a minimum keeps only the
    undisturbed laps (a busy machine adds time, it never removes any). The hops follow a random
    cycle, so no prefetcher can fetch a flushed line before the walk asks for it: after a flush a
    hop either misses all the way to memory or hits, nothing in between."""
    with Buffer(skew + chunks * chunk, lib.ffi) as buf:
        probe_chain(buf, chunks, chunk, skew, seed)
        start = lib.ffi.cast("char *", buf.ptr) + skew
        started(lib.chase_walk(start, 1), "chase_walk")
        rc = started(lib.flush_lines(start, chunks, chunk, offsets[0]), "flush_lines")
        if rc == MB_UNSUPPORTED:
            import pytest

            pytest.skip("flush_lines: no user-mode cache flush on this processor (MB_UNSUPPORTED)")
        best = [math.inf] * len(offsets)
        for _ in range(repeats):
            for i, offset in enumerate(offsets):
                lib.chase_walk(start, chunks)
                rc = lib.flush_lines(start, chunks, chunk, offset)
                if rc != MB_OK:
                    raise AssertionError(
                        f"flush_lines(buf, {chunks}, {chunk}, {offset}) returned {rc}, not MB_OK"
                    )
                best[i] = min(best[i], timed(lambda: lib.chase_walk(start, chunks)))
        return [t / chunks * 1e9 for t in best]
