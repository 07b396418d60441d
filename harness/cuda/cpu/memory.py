"""Device memory of the cpu backend: guarded MAP_SHARED buffers, a pool of freed ones, and the
device array katas use (pycuda's gpuarray, minimally).

A buffer's byte after its end is on a PROT_NONE page, so a kernel that overruns it faults in the
launch child. Buffers are memfds where possible: the launch server maps the same pages.
"""

from __future__ import annotations

import itertools
import mmap
from collections.abc import Sequence
from typing import Any

from harness._lazy import lazy_module
from harness.cuda.cpu.loader import runtime
from harness.cuda.cpu.server import forget as server_forget
from harness.cuda.errors import CudaError

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = ["CpuDeviceArray", "DeviceBuffer"]

_buffer_ids = itertools.count(1)
_PAGE = mmap.PAGESIZE
_POOL_MAX_BYTES = 256 << 20  # mappings kept for reuse, in all
_POOL_PER_SIZE = 8
# Freed mappings by page count, reused by the next buffer of that many pages: In/Out arguments
# get new buffers at every launch, and a fresh memfd mapping costs a dozen system calls here
# and in the launch server. Mutated, never rebound (harness.sandbox's guard).
_pool: dict[int, list[tuple[int, int, int, int]]] = {}  # pages -> [(map_lo, map_size, fd, id)]
_pool_bytes = [0]


class DeviceBuffer:
    """A guarded MAP_SHARED mapping: the byte after `size` is on a PROT_NONE page."""

    def __init__(self, nbytes: int, align: int = 0, tail: int | None = None) -> None:
        rt = runtime()
        self.size = int(nbytes)
        self._window: tuple[int, int] | None = None  # (lo, size) of a tail buffer's mapping
        if tail is not None:
            self._init_tail(int(tail))
            return
        if align <= 0:
            align = min(256, self.size & -self.size) if self.size else 16
        data = -(-self.size // align) * align
        self.pages = max(1, -(-data // _PAGE))
        self._freed = False
        reuse = _pool.get(self.pages)
        if reuse:
            self.map_lo, self.map_size, self.fd, self.id = reuse.pop()
            _pool_bytes[0] -= self.map_size
            self.address = self.map_lo + (self.pages + 1) * _PAGE - data
            self._ptr = rt.ffi.cast("void*", self.address)
            if self.size:
                rt.lib.kata_zero(self._ptr, self.size)  # as fresh as a new mapping
            return
        lo = rt.ffi.new("uintptr_t*")
        msize = rt.ffi.new("size_t*")
        fd = rt.ffi.new("int*")
        ptr = rt.lib.kata_dev_alloc(self.size, align, lo, msize, fd)
        if ptr == rt.ffi.NULL:
            raise MemoryError(f"harness.cuda: cannot map a {self.size}-byte device buffer")
        self.address = int(rt.ffi.cast("uintptr_t", ptr))
        self.map_lo = int(lo[0])
        self.map_size = int(msize[0])
        self.fd = int(fd[0])  # a memfd (-1 if none): the launch server maps the same pages
        self.id = next(_buffer_ids)
        self._ptr = ptr

    def _init_tail(self, tail: int) -> None:
        rt = runtime()
        lo, msize = rt.ffi.new("uintptr_t*"), rt.ffi.new("size_t*")
        wlo, wsize = rt.ffi.new("uintptr_t*"), rt.ffi.new("size_t*")
        ptr = rt.lib.kata_dev_alloc_tail(self.size, tail, lo, msize, wlo, wsize)
        if ptr == rt.ffi.NULL:
            raise MemoryError(f"harness.cuda: cannot place a {self.size}-byte tail buffer")
        self.address = int(rt.ffi.cast("uintptr_t", ptr))
        self.map_lo, self.map_size = int(lo[0]), int(msize[0])
        self._window = (int(wlo[0]), int(wsize[0]))
        self.fd = -1  # forked launches only (the launch server maps memfds)
        self.pages = 0
        self._freed = False
        self.id = next(_buffer_ids)
        self._ptr = ptr

    def tail_view(self, dtype: np.dtype, count: int) -> np.ndarray:
        """The last `count` elements of a tail buffer (they must lie in its mapped window)."""
        rt = runtime()
        nbytes = count * dtype.itemsize
        assert self._window is not None and self.address + self.size - nbytes >= self._window[0]
        ptr = rt.ffi.cast("char*", self._ptr) + (self.size - nbytes)
        return np.frombuffer(rt.ffi.buffer(ptr, nbytes), dtype=dtype)

    def view(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        if self._window is not None:
            raise CudaError("a tail buffer has only its last bytes: use tail_view()")
        rt = runtime()
        raw = rt.ffi.buffer(self._ptr, self.size) if self.size else b""
        return (
            np.frombuffer(raw, dtype=dtype).reshape(shape) if self.size else np.empty(shape, dtype)
        )

    def write(self, data: np.ndarray) -> None:
        if self.size:
            runtime().ffi.memmove(self._ptr, np.ascontiguousarray(data), self.size)

    def read(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        return self.view(dtype, shape).copy()

    def free(self) -> None:
        if self._freed:
            return
        self._freed = True
        if self._window is not None:
            runtime().lib.kata_dev_free_tail(self.map_lo, *self._window)
            return
        kept = _pool.setdefault(self.pages, [])
        if len(kept) < _POOL_PER_SIZE and _pool_bytes[0] + self.map_size <= _POOL_MAX_BYTES:
            kept.append((self.map_lo, self.map_size, self.fd, self.id))
            _pool_bytes[0] += self.map_size
            return
        server_forget(self)
        runtime().lib.kata_dev_free(self.map_lo, self.map_size, self.fd)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # interpreter shutdown
            pass


class CpuDeviceArray:
    """A device array of the cpu backend (pycuda's gpuarray, minimally): `.get()`, `.set(a)`."""

    def __init__(
        self, shape: int | Sequence[int], dtype: Any = "float32", tail: int | None = None
    ) -> None:
        """`tail`: only the last `tail` elements exist (a probe's array; see `tail_array`)."""
        self.shape = (int(shape),) if isinstance(shape, int | np.integer) else tuple(shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        nbytes_tail = None if tail is None else int(tail) * self.dtype.itemsize
        self.buffer = DeviceBuffer(self.nbytes, tail=nbytes_tail)
        self.tail = tail

    @classmethod
    def from_array(cls, a: np.ndarray) -> CpuDeviceArray:
        d = cls(a.shape, a.dtype)
        d.set(a)
        return d

    @property
    def ptr(self) -> int:
        return self.buffer.address

    def set(self, a: np.ndarray) -> None:
        a = np.asarray(a)
        if a.shape != self.shape or a.dtype != self.dtype:
            raise ValueError(
                f"set(): array is {a.shape} {a.dtype}, device array is {self.shape} {self.dtype}"
            )
        self.buffer.write(a)

    def get(self) -> np.ndarray:
        if self.tail is not None:
            raise CudaError("a tail array has only its last elements: read them with tail_view()")
        return self.buffer.read(self.dtype, self.shape)

    def view(self) -> np.ndarray:
        """The buffer itself as a numpy array, no copy (not for a tail array: use tail_view)."""
        return self.buffer.view(self.dtype, self.shape)

    def tail_view(self) -> np.ndarray:
        """The last `tail` elements of a tail array, no copy: what a probe reads and writes."""
        if self.tail is None:
            return self.view().reshape(-1)
        return self.buffer.tail_view(self.dtype, self.tail)

    def __repr__(self) -> str:
        return f"CpuDeviceArray({self.shape}, {self.dtype})"
