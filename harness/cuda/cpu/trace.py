"""Global-memory tracing on the cpu backend: 32-byte sectors per warp-level request, per line.

The kernel is rebuilt as a traced build (g++'s tsan instrumentation, or clang's sanitizer
coverage: building.traced_toolchain), which calls the runtime for every load and store with the
instruction's address. The runtime keeps the
accesses that hit a kernel argument (global memory). Here they are grouped the way a GPU issues
them: the n-th execution of one instruction by the lanes of one warp is one request; the sectors
it touches are what the memory system fetches, the distinct bytes it asks for are what is useful.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness._lazy import lazy_module
from harness.cuda.args import normalise_dims
from harness.cuda.cpu.building import TRACED, traced_toolchain
from harness.cuda.cpu.loader import runtime
from harness.cuda.errors import CudaError

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = ["LineStats", "Trace", "run_trace"]

SECTOR = 32
BANKS = 32  # shared memory: 32 banks of 4-byte words, as on every NVIDIA GPU since Kepler
BANK_WORD = 4
# kata_event and kata_event_kind_t of kata_launch.h (checked against it by test_cuda_interface):
# a numpy dtype only when a trace is read (lazy numpy). Kind: bit 0 store, bit 1 shared memory,
# bit 2 atomic; 8 and 9 are a __syncthreads and a warp collective (addr holds the source line).
EVENT_FIELDS = [("pc", "<u8"), ("addr", "<u8"), ("gtid", "<u4"), ("size", "<u2"), ("kind", "<u2")]
EVENT_SIZE = 24
DEFAULT_CAPACITY = 4_000_000  # events (24 bytes each), virtual memory until touched
EV_STORE, EV_SHARED, EV_ATOMIC, EV_BARRIER, EV_WARP = 1, 2, 4, 8, 9
ACTIVITY = ("global load", "global store", "shared load", "shared store")


@dataclass(frozen=True)
class LineStats:
    """Global memory of one (source line, load/store): warp requests and the sectors they fetch."""

    file: str
    line: int
    kind: str  # "load" or "store"
    requests: int
    sectors: int
    bytes_requested: int  # distinct bytes the lanes asked for
    source: str = ""
    accesses: int = 0  # lane-level loads or stores

    @property
    def bytes_fetched(self) -> int:
        return self.sectors * SECTOR

    @property
    def efficiency(self) -> float:
        return self.bytes_requested / self.bytes_fetched if self.sectors else 1.0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0


@dataclass(frozen=True)
class SharedLineStats:
    """Shared memory of one (source line, load/store): warp requests and the wavefronts (passes
    through the 32 banks) they need; a request whose lanes hit k different words of one bank
    needs k wavefronts, k - 1 of them replays. Lanes reading the same word share it (broadcast)."""

    file: str
    line: int
    kind: str  # "load" or "store"
    requests: int
    wavefronts: int
    worst: int  # the most wavefronts one request needed (32: every lane in one bank)
    accesses: int  # lane-level
    source: str = ""

    @property
    def replays(self) -> int:
        return self.wavefronts - self.requests

    @property
    def conflict_degree(self) -> float:
        """Wavefronts per request: 1.0 is conflict-free, 32.0 fully serialised."""
        return self.wavefronts / self.requests if self.requests else 0.0


@dataclass(frozen=True)
class Trace:
    kernel: str
    lines: list[LineStats]  # global memory, by line
    accesses: int  # lane-level global loads and stores seen
    truncated: bool = False  # more events than the buffer held: numbers cover the first ones
    seconds: float = 0.0
    shared_lines: list[SharedLineStats] = field(default_factory=list)
    loads: dict[str, int] = field(default_factory=dict)  # lane-level, {"global": .., "shared": ..}
    stores: dict[str, int] = field(default_factory=dict)
    atomics: dict[str, int] = field(default_factory=dict)
    barriers: int = 0  # __syncthreads() executed by the block that executed the most
    steps: int = 0  # parallel steps of the block with the most (see docs/cuda.md)
    warp_ops: int = 0  # warp collectives (shuffles, votes, __syncwarp) of the busiest thread
    threads_per_block: int = 0
    # Who did the work, by "global load", "global store", "shared load", "shared store":
    # threads that made at least one such access, and the most one thread made (lane-level).
    active_threads: dict[str, int] = field(default_factory=dict)
    most_per_thread: dict[str, int] = field(default_factory=dict)
    uninitialised_shared: int = 0  # shared loads of words no thread of the block wrote before
    thread_reads: int = 0  # global loads + atomics of the thread that made the most

    @property
    def reads(self) -> dict[str, int]:
        """Lane-level reads: plain loads plus atomics (an atomic reads its address too)."""
        return {k: self.loads.get(k, 0) + self.atomics.get(k, 0) for k in ("global", "shared")}

    def _sum(self, kind: str | None, attr: str) -> int:
        return sum(getattr(s, attr) for s in self.lines if kind is None or s.kind == kind)

    @property
    def requests(self) -> int:
        return self._sum(None, "requests")

    @property
    def sectors(self) -> int:
        return self._sum(None, "sectors")

    @property
    def bytes_requested(self) -> int:
        return self._sum(None, "bytes_requested")

    @property
    def bytes_fetched(self) -> int:
        return self.sectors * SECTOR

    def _eff(self, kind: str | None) -> float:
        sectors = self._sum(kind, "sectors")
        return self._sum(kind, "bytes_requested") / (sectors * SECTOR) if sectors else 1.0

    @property
    def efficiency(self) -> float:
        return self._eff(None)

    @property
    def load_efficiency(self) -> float:
        return self._eff("load")

    @property
    def store_efficiency(self) -> float:
        return self._eff("store")

    @property
    def bank_replays(self) -> int:
        """Extra shared-memory wavefronts over all requests: 0 when conflict-free."""
        return sum(s.replays for s in self.shared_lines)

    @property
    def worst_conflict(self) -> int:
        """The most wavefronts one shared-memory request needed (1: no conflicts anywhere)."""
        return max((s.worst for s in self.shared_lines), default=0)

    def line(self, number: int, kind: str | None = None) -> LineStats:
        """The stats of source line `number` (and `kind`), or KeyError listing the traced lines."""
        for s in self.lines:
            if s.line == number and (kind is None or s.kind == kind):
                return s
        have = ", ".join(f"{s.line} {s.kind}" for s in self.lines)
        raise KeyError(f"line {number} has no traced global access (traced: {have})")

    def report(self) -> str:
        rows = [f"{self.kernel}: global memory, {self.efficiency:.0%} coalescing efficiency"]
        rows.append(f"{'line':>5} {'kind':5} {'requests':>9} {'sect/req':>8} {'eff':>5}  source")
        for s in self.lines:
            rows.append(
                f"{s.line:>5} {s.kind:5} {s.requests:>9} {s.sectors_per_request:>8.2f} "
                f"{s.efficiency:>5.0%}  {s.source.strip()}"
            )
        if self.shared_lines:
            rows.append(f"shared memory, {self.bank_replays} bank-conflict replays")
            rows.append(
                f"{'line':>5} {'kind':5} {'requests':>9} {'wave/req':>8} {'worst':>5}  source"
            )
            for t in self.shared_lines:
                rows.append(
                    f"{t.line:>5} {t.kind:5} {t.requests:>9} {t.conflict_degree:>8.2f} "
                    f"{t.worst:>5}  {t.source.strip()}"
                )
        if self.active_threads:
            rows.append(
                "threads that access memory (the most accesses by one): "
                + ", ".join(
                    f"{k} {self.active_threads[k]} ({self.most_per_thread.get(k, 0)})"
                    for k in ACTIVITY
                    if k in self.active_threads
                )
            )
        rows.append(
            f"loads: {self.loads.get('global', 0)} global, {self.loads.get('shared', 0)} shared; "
            f"atomics: {self.atomics.get('global', 0)} global; "
            f"the busiest thread's global reads: {self.thread_reads}; "
            f"barriers per block: {self.barriers}; parallel steps: {self.steps}; "
            f"warp collectives per thread: {self.warp_ops}"
        )
        if self.truncated:
            rows.append("(trace truncated: more accesses than the buffer holds)")
        return "\n".join(rows)


def _symbolizer() -> tuple[str, Path] | None:
    for name in ("llvm-symbolizer", *(f"llvm-symbolizer-{v}" for v in range(20, 13, -1))):
        found = shutil.which(name)
        if found:
            return "llvm", Path(found)
    found = shutil.which("addr2line")
    return ("gnu", Path(found)) if found else None


def symbolize(lib: Path, offsets: list[int], prefer: str) -> dict[int, tuple[str, int]]:
    """Offset in `lib` -> (file, line), the innermost frame in a file named `prefer` if any."""
    tool = _symbolizer()
    if tool is None:
        raise CudaError("tracing needs llvm-symbolizer or addr2line to map addresses to lines")
    kind, exe = tool
    text = "\n".join(hex(o) for o in offsets) + "\n"
    if kind == "llvm":
        cmd = [str(exe), f"--obj={lib}", "--inlines", "--no-demangle"]
    else:
        cmd = [str(exe), "-e", str(lib), "-i", "-a"]
    out = subprocess.run(cmd, input=text, capture_output=True, text=True, check=False).stdout
    frames: list[list[tuple[str, int]]] = []
    if kind == "llvm":
        for chunk in out.strip("\n").split("\n\n"):
            lines = chunk.splitlines()
            frames.append([_loc(lines[i]) for i in range(1, len(lines), 2)])
    else:
        for line in out.splitlines():
            if line.startswith("0x"):
                frames.append([])
            elif frames and ":" in line:
                frames[-1].append(_loc(line))
    result: dict[int, tuple[str, int]] = {}
    for off, locs in zip(offsets, frames, strict=False):
        locs = [loc for loc in locs if loc[1] > 0] or [("?", 0)]
        mine = [loc for loc in locs if Path(loc[0]).name == prefer]
        result[off] = (mine or locs)[0]
    return result


def _loc(text: str) -> tuple[str, int]:
    parts = text.strip().split(" ")[0].split(":")
    try:
        return parts[0], int(parts[1])
    except (IndexError, ValueError):
        return parts[0], 0


def _dense(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, index of each value among them) as uint64: 1-D uniques are fast."""
    distinct, index = np.unique(values, return_inverse=True)
    return distinct, index.reshape(-1).astype(np.uint64)


def _pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.uint64]:
    """One uint64 key per pair (a, b) of non-negative ints, ordered by a then b, for np.unique
    on 1-D arrays (on 2-D rows it sorts ten times slower). b is replaced by its rank among
    the distinct b's; returns the keys and that count (key // count = a)."""
    _, rank = _dense(b)
    width = np.uint64(int(rank.max()) + 1 if len(rank) else 1)
    return a.astype(np.uint64) * width + rank, width


def _requests(events: np.ndarray, threads_per_block: int) -> tuple[np.ndarray, np.ndarray]:
    """Group lane-level events into warp requests: (request id per event, (warp, pc) per request).

    A request is the n-th execution of one instruction by the lanes of one warp (events are in
    execution order, so n counts how often this thread ran this instruction before)."""
    n = len(events)
    gtid = events["gtid"].astype(np.uint64)
    pc = events["pc"]
    wpb = (threads_per_block + 31) // 32
    warp = (gtid // threads_per_block) * wpb + (gtid % threads_per_block) // 32
    pcs, pc_rank = _dense(pc)
    npc = np.uint64(len(pcs))
    thread_pc = gtid * npc + pc_rank
    order = np.argsort(thread_pc, kind="stable")  # stable: each thread's executions in order
    t_sorted = thread_pc[order]
    new = np.ones(n, bool)
    new[1:] = t_sorted[1:] != t_sorted[:-1]
    starts = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    occ = np.empty(n, np.uint64)
    occ[order] = np.arange(n) - starts
    span = np.uint64(int(occ.max()) + 1)
    if (int(warp.max()) + 1) * int(npc) * int(span) < 2**63:
        key = (warp * npc + pc_rank) * span + occ
        ukeys, req = np.unique(key, return_inverse=True)
        req_keys = np.stack([ukeys // span // npc, pcs[(ukeys // span) % npc], ukeys % span], 1)
        return req.reshape(-1), req_keys
    keys = np.stack([warp, pc, occ], axis=1)  # too many to pack into one key: slower, exact
    req_keys, req = np.unique(keys, axis=0, return_inverse=True)
    return req.reshape(-1), req_keys


def analyse(events: np.ndarray, threads_per_block: int) -> dict[str, np.ndarray]:
    """Global memory, per request (warp, pc, occurrence): pc, store flag, sectors, distinct bytes."""
    if len(events) == 0:
        empty = np.zeros(0, np.uint64)
        return {"pc": empty, "store": empty, "sectors": empty, "useful": empty, "lanes": empty}
    req, req_keys = _requests(events, threads_per_block)
    nreq = len(req_keys)
    addr = events["addr"]
    size = events["size"].astype(np.uint64)
    first = addr // SECTOR
    last = (addr + size - 1) // SECTOR
    sec_req = np.concatenate([req, req[last != first]])
    sec = np.concatenate([first, last[last != first]])
    keys, width = _pairs(sec_req, sec)
    sectors = np.bincount((np.unique(keys) // width).astype(np.int64), minlength=nreq)
    keys, width = _pairs(req, addr)
    ua, idx = np.unique(keys, return_index=True)
    useful = np.bincount((ua // width).astype(np.int64), weights=size[idx], minlength=nreq)
    store = np.zeros(nreq, np.uint64)
    store[req] = events["kind"] & EV_STORE
    lanes = np.bincount(req, minlength=nreq)
    return {
        "pc": req_keys[:, 1],
        "store": store,
        "sectors": sectors,
        "useful": useful,
        "lanes": lanes,
    }


def analyse_shared(events: np.ndarray, threads_per_block: int) -> dict[str, np.ndarray]:
    """Shared memory, per request: pc, store flag, wavefronts (the most distinct 4-byte words
    the request touches in any one bank), lanes. Bank = word % 32; uniform offsets of the whole
    array do not change the counts, so the cpu backend's addresses give the GPU's conflicts."""
    if len(events) == 0:
        empty = np.zeros(0, np.uint64)
        return {"pc": empty, "store": empty, "wavefronts": empty, "lanes": empty}
    req, req_keys = _requests(events, threads_per_block)
    nreq = len(req_keys)
    addr = events["addr"]
    size = np.maximum(events["size"].astype(np.uint64), 1)
    w0 = addr // BANK_WORD
    nwords = ((addr + size - 1) // BANK_WORD - w0 + 1).astype(np.int64)
    ev = np.repeat(np.arange(len(events)), nwords)
    step = np.arange(len(ev)) - np.repeat(np.cumsum(nwords) - nwords, nwords)
    words = w0[ev] + step.astype(np.uint64)
    distinct_words, rank = _dense(words)
    width = np.uint64(len(distinct_words))
    rw = np.unique(req[ev].astype(np.uint64) * width + rank)  # each (request, word) once
    banks = distinct_words[rw % width] % np.uint64(BANKS)
    rb, per_bank = np.unique((rw // width) * np.uint64(BANKS) + banks, return_counts=True)
    wavefronts = np.zeros(nreq, np.int64)
    np.maximum.at(wavefronts, (rb // np.uint64(BANKS)).astype(np.int64), per_bank)
    store = np.zeros(nreq, np.uint64)
    store[req] = events["kind"] & EV_STORE
    lanes = np.bincount(req, minlength=nreq)
    return {"pc": req_keys[:, 1], "store": store, "wavefronts": wavefronts, "lanes": lanes}


def phases(events: np.ndarray) -> np.ndarray:
    """Per event: how many __syncthreads() its thread had passed (events in execution order)."""
    n = len(events)
    if n == 0:
        return np.zeros(0, np.int64)
    gtid = events["gtid"]
    order = np.argsort(gtid, kind="stable")
    g = gtid[order]
    isb = (events["kind"][order] == EV_BARRIER).astype(np.int64)
    before = np.cumsum(isb) - isb
    first = np.ones(n, bool)
    first[1:] = g[1:] != g[:-1]
    base = np.maximum.accumulate(np.where(first, before, 0))
    out = np.empty(n, np.int64)
    out[order] = before - base
    return out


def block_structure(events: np.ndarray, threads_per_block: int) -> dict[str, int]:
    """Barriers per block, parallel steps per block and warp collectives per thread (maxima).

    Parallel steps: the phases between barriers run one after another; within a phase the
    block takes as many steps as its busiest thread makes shared-memory accesses, or as many
    atomics as hit one address (they serialise), whichever is more. A tree reduction of B
    values takes a few steps per level, log2(B) levels; one thread summing B values takes B."""
    if len(events) == 0:
        return {"barriers": 0, "steps": 0, "warp_ops": 0}
    kind = events["kind"]
    gtid = events["gtid"].astype(np.int64)
    block = gtid // max(threads_per_block, 1)
    phase = phases(events)
    bar = kind == EV_BARRIER
    barriers = 0
    if bar.any():
        _, per_thread = np.unique(gtid[bar], return_counts=True)
        barriers = int(per_thread.max())
    warp = kind == EV_WARP
    warp_ops = int(np.unique(gtid[warp], return_counts=True)[1].max()) if warp.any() else 0
    # Steps of each (block, phase) cell: key block * phases + phase.
    nph = int(phase.max()) + 1
    cell = block * nph + phase
    plain = (kind < EV_BARRIER) & ((kind & EV_SHARED) != 0) & ((kind & EV_ATOMIC) == 0)
    atomic = (kind < EV_BARRIER) & ((kind & EV_ATOMIC) != 0)
    cells, counts = [], []
    if plain.any():  # accesses per (thread, phase): the thread decides its block
        k, c = np.unique(
            gtid[plain].astype(np.uint64) * np.uint64(nph) + phase[plain].astype(np.uint64),
            return_counts=True,
        )
        cells.append(
            (k // np.uint64(nph)).astype(np.int64) // max(threads_per_block, 1) * nph
            + (k % np.uint64(nph)).astype(np.int64)
        )
        counts.append(c)
    if atomic.any():  # atomics per (cell, address): they serialise
        keys, width = _pairs(cell[atomic], events["addr"][atomic])
        k, c = np.unique(keys, return_counts=True)
        cells.append((k // width).astype(np.int64))
        counts.append(c)
    steps = 0
    if cells:
        allc, allv = np.concatenate(cells), np.concatenate(counts)
        ucell, inv = np.unique(allc, return_inverse=True)
        most = np.zeros(len(ucell), np.int64)
        np.maximum.at(most, inv.reshape(-1), allv)
        per_block = np.bincount(ucell // nph, weights=most)
        steps = int(per_block.max())
    return {"barriers": barriers, "steps": steps, "warp_ops": warp_ops}


def thread_activity(events: np.ndarray) -> tuple[dict[str, int], dict[str, int]]:
    """Per kind of plain access (ACTIVITY: global/shared, load/store): how many threads made at
    least one, and the most one thread made. Work spread over a launch's threads shows here:
    a grid-stride loop loads at most ceil(n / threads) elements per thread, while one thread
    walking the data alone makes n loads and leaves the others idle. Atomics are not counted."""
    kind = events["kind"]
    plain = (kind < EV_BARRIER) & ((kind & EV_ATOMIC) == 0)
    threads: dict[str, int] = {}
    most: dict[str, int] = {}
    for name in ACTIVITY:
        space = (kind & EV_SHARED) != 0 if name.startswith("shared") else (kind & EV_SHARED) == 0
        store = (kind & EV_STORE) != 0 if name.endswith("store") else (kind & EV_STORE) == 0
        gtid = events["gtid"][plain & space & store]
        counts = np.unique(gtid, return_counts=True)[1] if len(gtid) else np.zeros(0, np.int64)
        threads[name] = len(counts)
        most[name] = int(counts.max()) if len(counts) else 0
    return threads, most


def uninitialised_shared(events: np.ndarray, threads_per_block: int) -> int:
    """Lane-level shared-memory loads (atomics included) of a 4-byte word that no thread of the
    same block had stored (or atomically updated) earlier in the launch. A GPU gives a block
    shared memory with whatever it held, the cpu backend with 0x7f bytes (3.4e38 in every float,
    runtime.cpp's fill_shared_garbage); a kernel that masks what it read may still look right. Events are in execution order,
    and a race-free kernel reads another thread's store only after a barrier that comes after it."""
    kind = events["kind"]
    mem = (kind < EV_BARRIER) & ((kind & EV_SHARED) != 0)
    ev = events[mem]
    if len(ev) == 0:
        return 0
    index = np.arange(len(ev))
    block = ev["gtid"].astype(np.uint64) // np.uint64(max(threads_per_block, 1))
    addr = ev["addr"]
    size = np.maximum(ev["size"].astype(np.uint64), 1)
    w0 = addr // BANK_WORD
    nwords = ((addr + size - 1) // BANK_WORD - w0 + 1).astype(np.int64)
    which = np.repeat(np.arange(len(ev)), nwords)
    step = np.arange(len(which)) - np.repeat(np.cumsum(nwords) - nwords, nwords)
    words = w0[which] + step.astype(np.uint64)
    keys, _ = _pairs(block[which], words)
    _, cell = np.unique(keys, return_inverse=True)
    cell = cell.reshape(-1)
    writes = (ev["kind"][which] & (EV_STORE | EV_ATOMIC)) != 0
    first_write = np.full(int(cell.max()) + 1, len(ev), np.int64)
    np.minimum.at(first_write, cell[writes], index[which][writes])
    at = index[which]
    k = ev["kind"][which]
    atomic = (k & EV_ATOMIC) != 0
    load = ((k & EV_STORE) == 0) & ~atomic
    # A load before the word's first write, or an atomic that is that first write (it read too).
    early = (load & (at < first_write[cell])) | (atomic & (at == first_write[cell]))
    return len(np.unique(which[early]))


def _lines(
    stats: dict[str, np.ndarray], where: dict[int, tuple[str, int]], base: int, value: str
) -> dict[tuple[str, int, str], list[int]]:
    """Sum per-request stats by (file, line, load/store): [requests, value, lanes, worst]."""
    agg: dict[tuple[str, int, str], list[int]] = {}
    for pc, store, v, lanes in zip(
        stats["pc"], stats["store"], stats[value], stats["lanes"], strict=True
    ):
        file, line = where.get(int(pc) - base - 1, ("?", 0))
        key = (file, line, "store" if store else "load")
        a = agg.setdefault(key, [0, 0, 0, 0])
        a[0] += 1
        a[1] += int(v)
        a[2] += int(lanes)
        a[3] = max(a[3], int(v))
    return agg


def run_trace(
    f: Any,
    args: Any,
    *,
    block: Any,
    grid: Any,
    shared: int = 0,
    timeout: float | None = None,
    capacity: int = DEFAULT_CAPACITY,
) -> Trace:
    if traced_toolchain() is None:
        raise CudaError("tracing needs g++ or clang (apt-get install -y g++)")
    rt = runtime()
    nbytes = capacity * EVENT_SIZE
    buf = rt.lib.kata_shared_alloc(nbytes)
    if buf == rt.ffi.NULL:
        raise MemoryError("harness.cuda: cannot map the trace buffer")
    try:
        r = f.launch(
            args,
            block=block,
            grid=grid,
            shared=shared,
            timeout=timeout,
            compiler=TRACED,
            events=rt.ffi.cast("kata_event*", buf),
            event_capacity=capacity,
        )
        kept = min(r.events, capacity)
        raw = rt.ffi.buffer(buf, kept * EVENT_SIZE)
        events = np.frombuffer(raw, dtype=np.dtype(EVENT_FIELDS)).copy()
    finally:
        rt.lib.kata_shared_free(buf, nbytes)
    (bx, by, bz), _ = normalise_dims(f.name, block, grid)
    tpb = bx * by * bz
    kind = events["kind"]
    memory = kind < EV_BARRIER
    plain = memory & ((kind & EV_ATOMIC) == 0)
    is_shared = (kind & EV_SHARED) != 0
    glob = analyse(events[plain & ~is_shared], tpb)
    shar = analyse_shared(events[plain & is_shared], tpb)
    module = f.module
    built = module.build(TRACED)
    base = f.library_base(TRACED)
    pcs = sorted({int(p) for p in glob["pc"]} | {int(p) for p in shar["pc"]})
    where = symbolize(built.path, [p - base - 1 for p in pcs], module.name) if pcs else {}
    src_lines = module.source.splitlines()

    def text(file: str, line: int) -> str:
        mine = Path(file).name == module.name and 0 < line <= len(src_lines)
        return src_lines[line - 1] if mine else ""

    def order(kv: Any) -> tuple[int, str]:
        return (kv[0][1], kv[0][2])

    lines = [
        LineStats(Path(file).name, line, kind_, req, sectors, useful, text(file, line), lanes)
        for (file, line, kind_), (req, sectors, useful, lanes) in sorted(
            _merge(_lines(glob, where, base, "sectors"), _lines(glob, where, base, "useful")),
            key=order,
        )
    ]
    shared_lines = [
        SharedLineStats(Path(file).name, line, kind_, req, waves, worst, lanes, text(file, line))
        for (file, line, kind_), (req, waves, lanes, worst) in sorted(
            _lines(shar, where, base, "wavefronts").items(), key=order
        )
    ]

    def count(mask: np.ndarray) -> dict[str, int]:
        return {"global": int((mask & ~is_shared).sum()), "shared": int((mask & is_shared).sum())}

    structure = block_structure(events, tpb)
    active, most = thread_activity(events)
    reading = memory & ~is_shared & (((kind & EV_STORE) == 0) | ((kind & EV_ATOMIC) != 0))
    per_thread = np.unique(events["gtid"][reading], return_counts=True)[1]
    return Trace(
        kernel=f.name,
        lines=lines,
        accesses=int((plain & ~is_shared).sum()),
        truncated=r.events_overflow,
        seconds=r.seconds,
        shared_lines=shared_lines,
        loads=count(plain & ((kind & EV_STORE) == 0)),
        stores=count(plain & ((kind & EV_STORE) != 0)),
        atomics=count(memory & ((kind & EV_ATOMIC) != 0)),
        barriers=structure["barriers"],
        steps=structure["steps"],
        warp_ops=structure["warp_ops"],
        threads_per_block=tpb,
        active_threads=active,
        most_per_thread=most,
        uninitialised_shared=uninitialised_shared(events, tpb),
        thread_reads=int(per_thread.max()) if len(per_thread) else 0,
    )


def _merge(
    sectors: dict[tuple[str, int, str], list[int]], useful: dict[tuple[str, int, str], list[int]]
) -> list[tuple[tuple[str, int, str], tuple[int, int, int, int]]]:
    """(key, (requests, sectors, useful bytes, lanes)) per global line."""
    return [(key, (a[0], a[1], useful[key][1], a[2])) for key, a in sectors.items()]
