"""Simulated global memory: numpy buffers at device-like 64-bit addresses, bounds-checked.

Buffers sit above 4 GiB (so a pointer truncated to 32 bits faults) with unmapped guard gaps
between them, so an off-by-one index past the end of one buffer is an error, not a silent read of
its neighbour. Misaligned accesses are errors too, as on the hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .parser import PtxError

__all__ = ["BASE_ADDRESS", "Buffer", "GlobalMemory", "PtxMemoryError"]

BASE_ADDRESS = 0x7_0000_0000
_ALIGN = 256
_GUARD = 256


class PtxMemoryError(PtxError):
    """An out-of-bounds or misaligned access; the message names thread, address and buffer."""

    def __init__(self, message: str, index: int = -1) -> None:
        self.index = index  # position in the address array of the first bad access
        super().__init__(message)


@dataclass(frozen=True)
class Buffer:
    name: str
    address: int
    size: int  # bytes

    @property
    def end(self) -> int:
        return self.address + self.size


class GlobalMemory:
    """Allocate buffers with :meth:`add`, then :meth:`seal` before loads and stores."""

    def __init__(self) -> None:
        self.buffers: list[Buffer] = []
        self._init: list[bytes] = []
        self._next = BASE_ADDRESS
        self.heap = np.zeros(0, dtype=np.uint8)
        self._starts = np.zeros(0, dtype=np.uint64)
        self._ends = np.zeros(0, dtype=np.uint64)
        self._readonly: set[int] = set()

    def add(self, name: str, data: bytes | np.ndarray, *, readonly: bool = False) -> int:
        """Place `data` in memory and return its address."""
        raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        addr = self._next
        self.buffers.append(Buffer(name, addr, len(raw)))
        self._init.append(raw)
        if readonly:
            self._readonly.add(len(self.buffers) - 1)
        self._next = (addr + max(len(raw), 1) + _GUARD + _ALIGN - 1) // _ALIGN * _ALIGN
        return addr

    def seal(self) -> None:
        total = (self._next - BASE_ADDRESS + 15) // 16 * 16
        self.heap = np.zeros(total, dtype=np.uint8)
        for buf, raw in zip(self.buffers, self._init, strict=True):
            off = buf.address - BASE_ADDRESS
            self.heap[off : off + buf.size] = np.frombuffer(raw, dtype=np.uint8)
        self._starts = np.array([b.address for b in self.buffers], dtype=np.uint64)
        self._ends = np.array([b.end for b in self.buffers], dtype=np.uint64)

    def read(self, name_or_index: int) -> bytes:
        buf = self.buffers[name_or_index]
        off = buf.address - BASE_ADDRESS
        return self.heap[off : off + buf.size].tobytes()

    def _indices(self, addr: np.ndarray, dtype: np.dtype, what: str, store: bool) -> np.ndarray:
        """Element indices into heap.view(dtype); raises PtxMemoryError naming the first bad one."""
        size = dtype.itemsize
        addr = addr.astype(np.uint64, copy=False)
        which = np.searchsorted(self._starts, addr, side="right").astype(np.int64) - 1
        ok = which >= 0
        safe = np.where(ok, which, 0)
        if len(self.buffers):
            ok &= addr + np.uint64(size) <= self._ends[safe]
            if store and self._readonly:
                ok &= ~np.isin(safe, list(self._readonly))
        else:
            ok[:] = False
        aligned = (addr % np.uint64(size)) == 0
        bad = ~(ok & aligned)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            a = int(addr[k])
            if not ok[k] and ok.size and which[k] >= 0 and store and int(safe[k]) in self._readonly:
                reason = f"store to read-only {self.buffers[int(safe[k])].name}"
            elif not ok[k]:
                reason = self._describe(a, size)
            else:
                reason = f"misaligned: a {size}-byte access needs an address divisible by {size}"
            raise PtxMemoryError(f"{what} of {size} bytes at {a:#x}: {reason}", k)
        return ((addr - np.uint64(BASE_ADDRESS)) // np.uint64(size)).astype(np.int64)

    def _describe(self, a: int, size: int) -> str:
        if a < BASE_ADDRESS:
            return "not a global-memory address (a null, 32-bit or param-space pointer?)"
        near = min(self.buffers, key=lambda b: min(abs(a - b.address), abs(a - b.end)))
        if a >= near.end:
            return (
                f"{a - near.end} bytes past the end of {near.name} "
                f"({near.size} bytes at {near.address:#x})"
            )
        if a + size > near.end:
            return f"runs over the end of {near.name} ({near.size} bytes at {near.address:#x})"
        return (
            f"{near.address - a} bytes before {near.name} ({near.size} bytes at {near.address:#x})"
        )

    def load(self, addr: np.ndarray, dtype: np.dtype, what: str = "load") -> np.ndarray:
        idx = self._indices(addr, dtype, what, store=False)
        return self.heap.view(dtype)[idx]

    def store(self, addr: np.ndarray, values: np.ndarray, what: str = "store") -> None:
        idx = self._indices(addr, values.dtype, what, store=True)
        self.heap.view(values.dtype)[idx] = values
