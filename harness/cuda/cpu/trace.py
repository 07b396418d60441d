"""Global-memory tracing on the cpu backend: 32-byte sectors per warp-level request, per line.

The kernel is rebuilt as a traced build (g++'s tsan instrumentation, or clang's sanitizer
coverage: backend.traced_toolchain), which calls the runtime for every load and store with the
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
from harness.cuda.errors import CudaError

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = ["LineStats", "Trace", "run_trace"]

SECTOR = 32
# kata_event in kata_cuda.h, 24 bytes; a numpy dtype only when a trace is read (lazy numpy)
EVENT_FIELDS = [("pc", "<u8"), ("addr", "<u8"), ("gtid", "<u4"), ("size", "<u2"), ("store", "<u2")]
EVENT_SIZE = 24
DEFAULT_CAPACITY = 4_000_000  # events (24 bytes each), virtual memory until touched


@dataclass(frozen=True)
class LineStats:
    file: str
    line: int
    kind: str  # "load" or "store"
    requests: int
    sectors: int
    bytes_requested: int  # distinct bytes the lanes asked for
    source: str = ""

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
class Trace:
    kernel: str
    lines: list[LineStats]
    accesses: int  # lane-level global accesses seen
    truncated: bool = False  # more accesses than the buffer held: numbers cover the first ones
    seconds: float = 0.0
    _by_kind: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)

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


def analyse(events: np.ndarray, threads_per_block: int) -> dict[str, np.ndarray]:
    """Per request (warp, pc, occurrence): pc, store flag, sector count, distinct bytes."""
    n = len(events)
    if n == 0:
        empty = np.zeros(0, np.uint64)
        return {"pc": empty, "store": empty, "sectors": empty, "useful": empty}
    gtid = events["gtid"].astype(np.uint64)
    pc = events["pc"]
    wpb = (threads_per_block + 31) // 32
    warp = (gtid // threads_per_block) * wpb + (gtid % threads_per_block) // 32
    # occurrence: how many times this thread ran this instruction before (events are in order)
    order = np.lexsort((np.arange(n), pc, gtid))
    g_sorted, p_sorted = gtid[order], pc[order]
    new = np.ones(n, bool)
    new[1:] = (g_sorted[1:] != g_sorted[:-1]) | (p_sorted[1:] != p_sorted[:-1])
    starts = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    occ = np.empty(n, np.uint64)
    occ[order] = np.arange(n) - starts
    keys = np.stack([warp, pc, occ], axis=1)
    req_keys, req = np.unique(keys, axis=0, return_inverse=True)
    req = req.reshape(-1)
    nreq = len(req_keys)
    addr = events["addr"]
    size = events["size"].astype(np.uint64)
    first = addr // SECTOR
    last = (addr + size - 1) // SECTOR
    sec_req = np.concatenate([req, req[last != first]])
    sec = np.concatenate([first, last[last != first]])
    uniq = np.unique(np.stack([sec_req.astype(np.uint64), sec], axis=1), axis=0)
    sectors = np.bincount(uniq[:, 0].astype(np.int64), minlength=nreq)
    ua, idx = np.unique(np.stack([req.astype(np.uint64), addr], axis=1), axis=0, return_index=True)
    useful = np.bincount(ua[:, 0].astype(np.int64), weights=size[idx], minlength=nreq)
    store = np.zeros(nreq, np.uint64)
    store[req] = events["store"]
    return {"pc": req_keys[:, 1], "store": store, "sectors": sectors, "useful": useful}


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
    from harness.cuda.cpu.backend import TRACED, normalise_dims, runtime, traced_toolchain

    if traced_toolchain() is None:
        raise CudaError("tracing needs g++ or clang (apt-get install -y g++)")
    rt = runtime()
    nbytes = capacity * EVENT_SIZE
    buf = rt.lib.kata_shared_alloc(nbytes)
    if buf == rt.ffi.NULL:
        raise MemoryError("harness.cuda: cannot map the trace buffer")
    try:
        r = f._launch(
            args,
            block,
            grid,
            shared,
            "forward",
            0,
            timeout,
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
    stats = analyse(events, bx * by * bz)
    module = f.module
    built = module._build(TRACED)
    base = int(rt.lib.kata_lib_base(f._symbol("kata_invoke__", TRACED)))
    pcs = sorted({int(p) for p in stats["pc"]})
    where = symbolize(built.path, [p - base - 1 for p in pcs], module.name) if pcs else {}
    src_lines = module.source.splitlines()
    agg: dict[tuple[str, int, str], list[int]] = {}
    for pc, store, sectors, useful in zip(
        stats["pc"], stats["store"], stats["sectors"], stats["useful"], strict=True
    ):
        file, line = where.get(int(pc) - base - 1, ("?", 0))
        key = (file, line, "store" if store else "load")
        a = agg.setdefault(key, [0, 0, 0])
        a[0] += 1
        a[1] += int(sectors)
        a[2] += int(useful)
    lines = []
    for (file, line, kind), (requests, sectors, useful) in sorted(
        agg.items(), key=lambda kv: (kv[0][1], kv[0][2])
    ):
        text = (
            src_lines[line - 1]
            if Path(file).name == module.name and 0 < line <= len(src_lines)
            else ""
        )
        lines.append(LineStats(Path(file).name, line, kind, requests, sectors, useful, text))
    return Trace(
        kernel=f.name,
        lines=lines,
        accesses=int(r.events),
        truncated=r.events_overflow,
        seconds=r.seconds,
    )
