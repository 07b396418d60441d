"""The cpu backend: CUDA C compiled as C++ against kata_cuda.h, launched by runtime.cpp.

Builds go through harness.native's content-addressed cache (a warm rerun compiles nothing; see
`harness.native.compile_count`). The runtime library is built once per machine and loaded with
RTLD_GLOBAL, so every kernel library resolves threadIdx, __syncthreads & co. against it.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import mmap
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cffi

from harness import hangs
from harness._lazy import lazy_module
from harness.cuda import source as src
from harness.cuda.args import ArrayArg, check_scalar, normalise_dims
from harness.cuda.cpu import interface, server
from harness.cuda.cpu.interface import SCHEDULES
from harness.cuda.errors import (
    BarrierDeadlock,
    CudaCompileError,
    CudaError,
    KernelCrash,
    KernelError,
    KernelTimeout,
    LaunchError,
    OutOfBounds,
    RaceDetected,
)
from harness.native.build import BuildError, build_shared_library, default_cache

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = ["CpuDeviceArray", "CpuFunction", "CpuModule", "SCHEDULES", "runtime"]

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include"
DEFAULT_TIMEOUT_S = 20.0
_CXX_FLAGS = ("-std=gnu++17", "-fno-exceptions", "-fno-rtti", "-fno-strict-aliasing")
# Traced builds call the runtime before every load and store (tracing, the "preempt" schedule).
# GCC: ThreadSanitizer's instrumentation (__tsan_read4 ...), passed with -Wp so that it reaches
# the compiler proper but the driver does not link libtsan: runtime.cpp defines the callbacks.
# clang (where g++ is missing): sanitizer coverage's trace-loads/trace-stores.
_TRACE_FLAGS_GCC = (
    "-O1",  # keep one load/store per source access: easier to read per line
    "-fno-tree-vectorize",
    "-Wp,-fsanitize=thread",
    "-Wp,--param=tsan-instrument-func-entry-exit=0",
    "-DKATA_TRACE_BUILD=1",
)
_TRACE_FLAGS_CLANG = (
    "-O1",
    "-fno-vectorize",
    "-fno-slp-vectorize",
    "-fsanitize-coverage=edge,trace-loads,trace-stores",
    "-DKATA_TRACE_BUILD=1",
)
TRACED = "traced"  # the compiler key of traced builds (see traced_toolchain)
_KINDS = {0: "signed integer", 1: "unsigned integer", 2: "floating point", 3: "pointer"}
_KINDS.update({4: "struct", 5: "bool"})
_MAX_PARAMS = 64


@dataclass
class _Runtime:
    ffi: cffi.FFI
    lib: Any
    path: Path


_lock = threading.Lock()
# Mutated, never rebound: harness.sandbox's guard flags rebound harness globals as tampering.
_loaded: dict[str, _Runtime] = {}


def runtime() -> _Runtime:
    """Build (cached) and load the launcher library, once per process."""
    with _lock:
        if "runtime" not in _loaded:
            try:
                built = build_shared_library(
                    [HERE / "runtime.cpp"],
                    lang="cpp",
                    flags=[*_CXX_FLAGS, "-ldl"],
                    include_dirs=[INCLUDE],
                    root=HERE,
                )
            except BuildError as e:  # a harness bug, not the learner's
                raise CudaError(f"harness.cuda: the cpu runtime does not build:\n{e}") from None
            ffi = interface.ffi()
            lib = ffi.dlopen(str(built.path), ffi.RTLD_NOW | ffi.RTLD_GLOBAL)
            _loaded["runtime"] = _Runtime(ffi, lib, built.path)
        return _loaded["runtime"]


# ----------------------------------------------------------------------------- device memory
_buffer_ids = itertools.count(1)
_PAGE = mmap.PAGESIZE
_POOL_MAX_BYTES = 256 << 20  # mappings kept for reuse, in all
_POOL_PER_SIZE = 8
# Freed mappings by page count, reused by the next buffer of that many pages: In/Out arguments
# get new buffers at every launch, and a fresh memfd mapping costs a dozen system calls here
# and in the launch server. Mutated, never rebound (harness.sandbox's guard).
_pool: dict[int, list[tuple[int, int, int, int]]] = {}  # pages -> [(map_lo, map_size, fd, id)]
_pool_bytes = [0]


class _Buffer:
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
        server.forget(self)
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
        self._buf = _Buffer(self.nbytes, tail=nbytes_tail)
        self.tail = tail

    @classmethod
    def from_array(cls, a: np.ndarray) -> CpuDeviceArray:
        d = cls(a.shape, a.dtype)
        d.set(a)
        return d

    @property
    def ptr(self) -> int:
        return self._buf.address

    def set(self, a: np.ndarray) -> None:
        a = np.asarray(a)
        if a.shape != self.shape or a.dtype != self.dtype:
            raise ValueError(
                f"set(): array is {a.shape} {a.dtype}, device array is {self.shape} {self.dtype}"
            )
        self._buf.write(a)

    def get(self) -> np.ndarray:
        if self.tail is not None:
            raise CudaError("a tail array has only its last elements: read them with tail_view()")
        return self._buf.read(self.dtype, self.shape)

    def view(self) -> np.ndarray:
        """The buffer itself as a numpy array, no copy (not for a tail array: use tail_view)."""
        return self._buf.view(self.dtype, self.shape)

    def tail_view(self) -> np.ndarray:
        """The last `tail` elements of a tail array, no copy: what a probe reads and writes."""
        if self.tail is None:
            return self.view().reshape(-1)
        return self._buf.tail_view(self.dtype, self.tail)

    def __repr__(self) -> str:
        return f"CpuDeviceArray({self.shape}, {self.dtype})"


# ----------------------------------------------------------------------------- modules
def _split_options(options: Iterable[str]) -> list[str]:
    # -D/-I/-U mean the same to g++; nvcc-only options (-arch, --use_fast_math) are ignored here.
    opts = list(options)
    out: list[str] = []
    i = 0
    while i < len(opts):
        o = opts[i]
        if o in ("-D", "-I", "-U") and i + 1 < len(opts):
            out += [o, opts[i + 1]]
            i += 2
            continue
        if o.startswith(("-D", "-I", "-U")):
            out.append(o)
        i += 1
    return out


def _glue(source: str, name: str, kernels: Sequence[str], extern_c: bool) -> str:
    """The C++ translation unit: header, the learner's file (line numbers kept), trampolines."""
    body = src.rewrite_for_cpu(source)
    lines = ['#include "kata_cuda.h"']
    if extern_c:
        lines.append('extern "C" {')
    lines.append(f'#line 1 "{name}"')
    lines.append(body)
    if extern_c:
        lines.append("}")
    lines.append('#line 1 "harness-cuda-launch-glue"')
    for k in kernels:
        lines.append(
            f'extern "C" int kata_describe__{k}(int* s, int* k, int cap) '
            f"{{ return kata::describe(&{k}, s, k, cap); }}"
        )
        lines.append(f'extern "C" void kata_invoke__{k}(void** a) {{ kata::invoke(&{k}, a); }}')
        # Not in traced builds: their per-thread bookkeeping (trace ids, preemption) needs the
        # runtime's own thread loop.
        lines.append("#ifndef KATA_TRACE_BUILD")
        lines.append(
            f'extern "C" void kata_threads__{k}(void** a, const unsigned* o, unsigned n) '
            f"{{ kata::run_threads(&{k}, a, o, n); }}"
        )
        lines.append("#endif")
    return "\n".join(lines) + "\n"


def _write_generated(text: str, stem: str) -> Path:
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    d = default_cache().root / "cuda-src" / digest
    path = d / f"{stem}.cpp"
    if not path.exists():
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{stem}.{os.getpid()}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)  # atomic: xdist workers may write the same file
    return path


@dataclass(frozen=True)
class _Built:
    path: Path
    handle: Any


class CpuModule:
    """pycuda.compiler.SourceModule for the cpu backend."""

    backend = "cpu"

    def __init__(
        self,
        source: str,
        options: Sequence[str] = (),
        no_extern_c: bool = False,
        *,
        name: str = "kernel.cu",
        include_dirs: Sequence[Path | str] = (),
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.source = source
        self.name = name
        self.options = list(options)
        self.no_extern_c = no_extern_c
        self.include_dirs = [Path(d) for d in include_dirs]
        self.timeout = timeout
        self.kernels = src.kernel_names(source)
        self.fibers = src.needs_fibers(source)
        self._builds: dict[str, _Built] = {}
        self._functions: dict[str, CpuFunction] = {}
        self._build("cxx")  # compile errors show at module creation, as with pycuda

    def _build(self, compiler: str) -> _Built:
        if compiler in self._builds:
            return self._builds[compiler]
        glue = _glue(self.source, self.name, self.kernels, not self.no_extern_c)
        stem = Path(self.name).stem or "kernel"
        path = _write_generated(glue, stem)
        flags = [*_CXX_FLAGS, *_split_options(self.options)]
        tool = compiler
        if compiler == TRACED:
            found = traced_toolchain()
            if found is None:
                raise CudaError(
                    f"{self.name}: tracing and the preempt schedule need g++ or clang "
                    "(apt-get install -y g++)"
                )
            tool, trace_flags = found
            flags += trace_flags
        headers = [
            p
            for d in self.include_dirs
            if d.is_dir()
            for p in sorted(d.iterdir())
            if p.suffix in (".cuh", ".h", ".hpp", ".inc")
        ]
        try:
            built = build_shared_library(
                [path],
                lang="cpp",
                flags=flags,
                include_dirs=[INCLUDE, *self.include_dirs],
                headers=headers,
                compiler=tool,
            )
        except BuildError as e:
            raise CudaCompileError(
                f"{self.name} does not compile (cpu backend, {tool}):\n{e}",
                log=e.log,
                command=e.command,
            ) from None
        rt = runtime()
        err = rt.ffi.new("char[1024]")
        handle = rt.lib.kata_open(str(built.path).encode(), err, 1024)
        if handle == rt.ffi.NULL:
            raise CudaError(f"{self.name}: cannot load the built kernels: {rt.ffi.string(err)}")
        self._builds[compiler] = _Built(built.path, handle)
        return self._builds[compiler]

    def get_function(self, name: str) -> CpuFunction:
        if name not in self._functions:
            if name not in self.kernels:
                have = ", ".join(self.kernels) or "none"
                raise CudaError(
                    f"{self.name} has no __global__ function {name!r} (kernels: {have})"
                )
            self._functions[name] = CpuFunction(self, name)
        return self._functions[name]


@dataclass(frozen=True)
class Param:
    size: int
    kind: int
    name: str

    def describe(self) -> str:
        return f"{self.name} ({_KINDS.get(self.kind, '?')}, {self.size} bytes)"


class CpuFunction:
    """A kernel: call it like pycuda's Function; `.trace(...)` and `schedules=` are extras."""

    def __init__(self, module: CpuModule, name: str) -> None:
        self.module = module
        self.name = name
        self.params = self._describe()

    def _symbol(self, prefix: str, compiler: str = "cxx") -> Any:
        rt = runtime()
        built = self.module._build(compiler)
        sym = rt.lib.kata_sym(built.handle, f"{prefix}{self.name}".encode())
        if sym == rt.ffi.NULL:
            raise CudaError(f"{self.module.name}: no launch glue for {self.name}")
        return sym

    def _threads_symbol(self, compiler: str) -> Any:
        """The block loop of kernels that run without fibers (None in traced builds)."""
        if self.module.fibers or compiler != "cxx":
            return None
        rt = runtime()
        sym = rt.lib.kata_sym(
            self.module._build(compiler).handle, f"kata_threads__{self.name}".encode()
        )
        if sym == rt.ffi.NULL:
            return None
        return rt.ffi.cast("void(*)(void**, const unsigned*, unsigned)", sym)

    def _describe(self) -> list[Param]:
        rt = runtime()
        fn = rt.ffi.cast("int(*)(int*, int*, int)", self._symbol("kata_describe__"))
        sizes = rt.ffi.new(f"int[{_MAX_PARAMS}]")
        kinds = rt.ffi.new(f"int[{_MAX_PARAMS}]")
        n = fn(sizes, kinds, _MAX_PARAMS)
        names = src.kernel_params(self.module.source, self.name) or []
        if len(names) != n:
            names = [f"#{i}" for i in range(n)]
        return [Param(sizes[i], kinds[i], names[i]) for i in range(n)]

    # ------------------------------------------------------------------ calling
    def __call__(
        self,
        *args: Any,
        block: Any = None,
        grid: Any = (1, 1),
        shared: int = 0,
        time_kernel: bool = False,
        schedules: Sequence[str] | None = None,
        seed: int = 0,
        timeout: float | None = None,
        stream: Any = None,
        rtol: float = 1e-5,
        blocks: range | None = None,
    ) -> float | None:
        if blocks is not None:
            # A probe: only these blocks of the grid run (a huge grid's last block, to see
            # 64-bit indexing), forward order, no race check.
            seconds = self._launch(
                args, block, grid, shared, "forward", seed, timeout, blocks=blocks
            ).seconds
            return seconds if time_kernel else None
        if schedules:
            outputs, seconds = self._race_check(
                args, block, grid, shared, schedules, seed, timeout, rtol
            )
            for arg, out in zip(args, outputs, strict=True):
                if isinstance(arg, ArrayArg) and arg.copy_out:
                    arg.array[...] = out
                elif isinstance(arg, CpuDeviceArray):
                    arg.set(out)
            return seconds if time_kernel else None
        seconds = self._launch(args, block, grid, shared, "forward", seed, timeout).seconds
        return seconds if time_kernel else None

    def prepared_launch(self, *args: Any, **kw: Any) -> _LaunchResult:
        """Run once and return the result record (outputs written back); used by trace."""
        return self._launch(args, **kw)

    def _launch(self, *args: Any, **kw: Any) -> _LaunchResult:
        """One launch; a kernel that overran in an earlier kata test fails at once."""
        with hangs.running(hangs.KERNEL, self._key(), f"kernel {self.name}"):
            return self._launch_once(*args, **kw)

    def _key(self) -> str:
        m = self.module
        text = "\0".join([m.source, *m.options, str(m.no_extern_c)]).encode()
        return f"cu:{self.name}:{hashlib.sha1(text).hexdigest()}"

    def _launch_once(
        self,
        args: Sequence[Any],
        block: Any,
        grid: Any,
        shared: int,
        schedule: str,
        seed: int,
        timeout: float | None,
        *,
        compiler: str = "cxx",
        events: Any = None,
        event_capacity: int = 0,
        isolate: bool = True,
        write_back: bool = True,
        blocks: range | None = None,
    ) -> _LaunchResult:
        rt = runtime()
        ffi = rt.ffi
        (bx, by, bz), (gx, gy, gz) = normalise_dims(self.name, block, grid)
        if schedule not in SCHEDULES:
            raise LaunchError(f"{self.name}: unknown schedule {schedule!r}; known: {SCHEDULES}")
        shared = int(shared)
        if shared < 0 or shared > int(rt.lib.kata_dyn_shared_max()):
            raise LaunchError(
                f"{self.name}: shared={shared} bytes; dynamic shared memory is 0 to "
                f"{int(rt.lib.kata_dyn_shared_max())} bytes"
            )
        nblocks = gx * gy * gz
        if blocks is not None and (
            blocks.step != 1 or len(blocks) == 0 or blocks.start < 0 or blocks.stop > nblocks
        ):
            raise LaunchError(
                f"{self.name}: blocks={blocks!r} must be a non-empty range with step 1 inside the "
                f"grid's {nblocks} blocks"
            )
        if len(args) != len(self.params):
            want = ", ".join(p.describe() for p in self.params) or "no arguments"
            raise LaunchError(
                f"{self.name} takes {len(self.params)} arguments ({want}), got {len(args)}"
            )
        keep: list[Any] = []  # cffi objects that must outlive the call
        slots = []
        wire: list[tuple[int, Any]] = []  # for the launch server: (1, buffer index) or (0, bytes)
        buffers: list[tuple[_Buffer, int, bool]] = []  # (buffer, arg index, owned)
        copies: list[tuple[int, ArrayArg, _Buffer]] = []
        try:
            for i, (arg, p) in enumerate(zip(args, self.params, strict=True)):
                if isinstance(arg, ArrayArg | CpuDeviceArray):
                    if p.kind != 3:
                        raise LaunchError(
                            f"{self.name}: argument {i} is {p.describe()}, not a pointer; got "
                            f"{arg!r}"
                        )
                    if isinstance(arg, CpuDeviceArray):
                        buf = arg._buf
                        buffers.append((buf, i, False))
                    else:
                        a = arg.array
                        buf = _Buffer(a.nbytes)
                        buffers.append((buf, i, True))
                        if arg.copy_in:
                            buf.write(a)
                        if arg.copy_out:
                            copies.append((i, arg, buf))
                    cell = ffi.new("uintptr_t*", buf.address)
                    wire.append((1, len(buffers) - 1))
                else:
                    if p.kind == 3:
                        raise LaunchError(
                            f"{self.name}: argument {i} is {p.describe()}; pass cuda.In(a), "
                            f"cuda.Out(a), cuda.InOut(a) or a device array, got {type(arg).__name__}"
                        )
                    value = check_scalar(self.name, i, arg)
                    data = _scalar_bytes(self.name, i, p, value)
                    cell = ffi.new("char[]", data)
                    wire.append((0, data))
                keep.append(cell)
                slots.append(ffi.cast("void*", cell))
            argv = ffi.new("void*[]", slots or [ffi.NULL])
            bufs = ffi.new("kata_buffer[]", max(1, len(buffers)))
            for j, (buf, i, _) in enumerate(buffers):
                bufs[j].start = buf.address
                bufs[j].size = buf.size
                bufs[j].map_lo = buf.map_lo
                bufs[j].map_size = buf.map_size
                bufs[j].arg = i
            kname = ffi.new("char[]", self.name.encode())
            L = ffi.new("kata_launch_t*")
            L.args = argv
            L.kernel = kname
            L.grid = [gx, gy, gz]
            L.block = [bx, by, bz]
            L.shared_bytes = shared
            L.schedule = SCHEDULES.index(schedule)
            L.seed = int(seed) & (2**64 - 1)
            preempt = schedule == "preempt"
            if preempt:
                compiler = TRACED  # a switch point at every access
            L.call = ffi.cast("void(*)(void**)", self._symbol("kata_invoke__", compiler))
            threads = self._threads_symbol(compiler)
            L.threads = ffi.NULL if threads is None else threads
            L.fibers = int(self.module.fibers or preempt)
            L.preempt = 128 if preempt else 0
            L.isolate = int(isolate)
            L.timeout = hangs.launch_limit(
                float(timeout if timeout is not None else self.module.timeout)
            )
            L.nbuffers = len(buffers)
            L.buffers = bufs
            L.events = ffi.NULL if events is None else events
            L.event_capacity = event_capacity
            if events is not None:
                lo, hi = ffi.new("uintptr_t*"), ffi.new("uintptr_t*")
                if rt.lib.kata_lib_rw_range(L.call, lo, hi):
                    L.static_lo, L.static_hi = lo[0], hi[0]
            if blocks is not None:
                L.first_block, L.nblocks = blocks.start, len(blocks)
            res = ffi.new("kata_result_t*")
            plain = events is None and blocks is None and isolate
            srv = server.current() if plain else None
            sent = srv is not None and srv.launch(
                res,
                library=self.module._build(compiler).path,
                symbol=f"kata_invoke__{self.name}",
                kernel=self.name,
                grid=(gx, gy, gz),
                block=(bx, by, bz),
                shared=shared,
                schedule=L.schedule,
                seed=L.seed,
                fibers=L.fibers,
                preempt=L.preempt,
                timeout=L.timeout,
                buffers=[(b, i) for b, i, _ in buffers],
                args=wire,
            )
            if not sent:  # no launch server here: fork this process, as before
                rt.lib.kata_launch(L, res)
            result = _LaunchResult(
                status=res.status,
                seconds=float(res.seconds),
                events=int(res.events),
                events_overflow=bool(res.events_overflow),
                outputs={},
            )
            if res.status != rt.lib.KATA_OK:
                raise self._error(res, buffers)
            for i, arg, buf in copies:
                out = buf.read(arg.array.dtype, arg.array.shape)
                result.outputs[i] = out
                if write_back:
                    arg.array[...] = out
            for _buf, i, owned in buffers:
                if not owned and not write_back:  # a race check compares device arrays too
                    result.outputs[i] = args[i].get()
            return result
        finally:
            for buf, _, owned in buffers:
                if owned:
                    buf.free()

    def _error(self, res: Any, buffers: list[tuple[_Buffer, int, bool]]) -> CudaError:
        ffi, lib = runtime().ffi, runtime().lib
        msg = ffi.string(res.message).decode(errors="replace")
        block = (int(res.block[0]), int(res.block[1]), int(res.block[2]))
        thread = (int(res.thread[0]), int(res.thread[1]), int(res.thread[2]))
        for j, (_, i, _) in enumerate(buffers):  # name the parameter, not just its index
            if res.buffer == j and i < len(self.params):
                msg = msg.replace(f"argument {i} ", f"argument {i} ({self.params[i].name}) ")
        where = (
            f"block ({block[0]},{block[1]},{block[2]}) thread ({thread[0]},{thread[1]},{thread[2]})"
        )
        text = f"kernel {self.name}, {where}: {msg}"
        kw: dict[str, Any] = {"kernel": self.name, "block": block, "thread": thread}
        if res.status == lib.KATA_OOB:
            arg = buffers[res.buffer][1] if 0 <= res.buffer < len(buffers) else None
            return OutOfBounds(text, address=int(res.addr), argument=arg, **kw)
        if res.status == lib.KATA_DEADLOCK:
            return BarrierDeadlock(text, **kw)
        if res.status == lib.KATA_TIMEOUT:
            return KernelTimeout(f"kernel {self.name} {msg}", **kw)
        if res.status in (lib.KATA_CRASH, lib.KATA_TRAP):
            return KernelCrash(text, **kw)
        return KernelError(text, **kw)

    # ------------------------------------------------------------------ races
    def _race_check(
        self,
        args: Sequence[Any],
        block: Any,
        grid: Any,
        shared: int,
        schedules: Sequence[str],
        seed: int,
        timeout: float | None,
        rtol: float,
    ) -> tuple[list[Any], float]:
        schedules = tuple(schedules)
        unknown = [s for s in schedules if s not in SCHEDULES]
        if unknown:
            raise LaunchError(f"{self.name}: unknown schedule(s) {unknown}; known: {SCHEDULES}")
        # Device arrays are updated in place: every schedule starts from the same contents.
        initial = {i: a.get() for i, a in enumerate(args) if isinstance(a, CpuDeviceArray)}
        runs = []
        seconds = 0.0
        for s in schedules:
            for i, a in initial.items():
                args[i].set(a)
            r = self._launch(args, block, grid, shared, s, seed, timeout, write_back=False)
            runs.append(r.outputs)
            seconds = seconds or r.seconds
        first = runs[0]
        for s, out in zip(schedules[1:], runs[1:], strict=True):
            for i in sorted(first):
                a, b = first[i], out[i]
                same = _same(a, b, rtol)
                if not same.all():
                    raise _race_error(self, (schedules[0], s), i, a, b, same)
        outputs = [first.get(i) for i in range(len(args))]
        return outputs, seconds

    def check_races(self, *args: Any, **kw: Any) -> None:
        """Run under every schedule (default: all that this machine can); RaceDetected if outputs
        differ."""
        kw.setdefault("schedules", default_schedules())
        self(*args, **kw)

    def trace(self, *args: Any, block: Any = None, grid: Any = (1, 1), shared: int = 0, **kw: Any):
        """Run once with global-memory tracing; returns a harness.cuda.cpu.trace.Trace."""
        from harness.cuda.cpu.trace import run_trace

        return run_trace(self, args, block=block, grid=grid, shared=shared, **kw)


@dataclass
class _LaunchResult:
    status: int
    seconds: float
    events: int
    events_overflow: bool
    outputs: dict[int, np.ndarray]


def _scalar_bytes(kernel: str, index: int, p: Param, value: np.generic) -> bytes:
    kind = value.dtype.kind
    ok = {
        0: kind in "iu",
        1: kind in "iu",
        2: kind == "f",
        5: kind in "biu",
        4: True,
    }.get(p.kind, False)
    if not ok or value.dtype.itemsize != p.size:
        want = {0: "np.int", 1: "np.uint", 2: "np.float"}.get(p.kind)
        hint = f"; pass {want}{p.size * 8}(...)" if want else ""
        raise LaunchError(
            f"{kernel}: argument {index} is {p.describe()}, got np.{value.dtype.name} "
            f"({value.dtype.itemsize} bytes){hint}"
        )
    return value.tobytes()


def _same(a: np.ndarray, b: np.ndarray, rtol: float) -> np.ndarray:
    if a.dtype.kind in "fc":
        return np.isclose(a, b, rtol=rtol, atol=0.0, equal_nan=True)
    return a == b if a.dtype.fields is None else a.view(np.uint8) == b.view(np.uint8)


def _race_error(
    f: CpuFunction,
    pair: tuple[str, str],
    index: int,
    a: np.ndarray,
    b: np.ndarray,
    same: np.ndarray,
) -> RaceDetected:
    bad = np.argwhere(~same)
    n = len(bad)
    shown = []
    for idx in bad[:5]:
        t = tuple(int(i) for i in idx)
        key = t if len(t) > 1 else t[0]
        shown.append(f"[{key}]: {a[t]} vs {b[t]}")
    pname = f.params[index].name if index < len(f.params) else f"#{index}"
    msg = (
        f"kernel {f.name}: output argument {index} ({pname}) differs between the {pair[0]} and "
        f"{pair[1]} thread schedules in {n} of {a.size} elements ({'; '.join(shown)}). Threads "
        "read memory that other threads write without a barrier in between: a missing "
        "__syncthreads() or a data race."
    )
    return RaceDetected(msg, kernel=f.name, schedules=pair, argument=index, mismatches=n)


@functools.cache
def traced_toolchain() -> tuple[str, tuple[str, ...]] | None:
    """(tool, flags) of traced builds: GCC where it is (the same instrumentation on every such
    machine, so traces and preempt schedules agree), else clang; None without either."""
    import subprocess

    from harness.toolchain import find_tool

    gxx = find_tool("g++")
    if gxx is not None:
        out = subprocess.run([str(gxx), "--version"], capture_output=True, text=True, check=False)
        if "clang" not in out.stdout.lower():
            return "g++", _TRACE_FLAGS_GCC
    if find_tool("clang") is not None:
        return "clang", _TRACE_FLAGS_CLANG
    return None


@functools.cache
def default_schedules() -> tuple[str, ...]:
    """All schedules; "preempt" needs a traced build (a switch point at every memory access)."""
    return SCHEDULES if traced_toolchain() else SCHEDULES[:3]


@functools.cache
def max_threads() -> int:
    return int(runtime().lib.kata_max_threads())
