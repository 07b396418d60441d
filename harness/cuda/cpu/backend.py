"""The cpu backend: CUDA C compiled as C++ against kata_cuda.h, launched by runtime.cpp.

pycuda's SourceModule and Function for the cpu backend; the parts live in one module each:
interface (kata_launch.h for cffi), loader (the runtime library), building (kernel libraries),
memory (device buffers and arrays), marshal (arguments to C), races (schedule comparison),
server (the launch server) and trace (memory traces, through :meth:`CpuFunction.launch`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import hangs
from harness._lazy import lazy_module
from harness.cuda import source as src
from harness.cuda.args import ArrayArg
from harness.cuda.cpu.building import PLAIN, TRACED, Built, build_kernels, traced_toolchain
from harness.cuda.cpu.interface import SCHEDULES
from harness.cuda.cpu.loader import max_threads, runtime
from harness.cuda.cpu.marshal import (
    MAX_PARAMS,
    Geometry,
    Marshalled,
    Param,
    geometry,
    launch_record,
    marshal,
)
from harness.cuda.cpu.memory import CpuDeviceArray
from harness.cuda.cpu.races import compare_schedules, default_schedules
from harness.cuda.cpu.server import current as current_server
from harness.cuda.errors import (
    BarrierDeadlock,
    CudaError,
    KernelCrash,
    KernelError,
    KernelTimeout,
    OutOfBounds,
)

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = [
    "SCHEDULES",
    "TRACED",
    "CpuDeviceArray",
    "CpuFunction",
    "CpuModule",
    "LaunchResult",
    "default_schedules",
    "max_threads",
    "runtime",
    "traced_toolchain",
]

DEFAULT_TIMEOUT_S = 20.0


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
        self._builds: dict[str, Built] = {}
        self._functions: dict[str, CpuFunction] = {}
        self.build(PLAIN)  # compile errors show at module creation, as with pycuda

    def build(self, compiler: str) -> Built:
        """The kernel library built with `compiler` (PLAIN or TRACED), built on first use."""
        if compiler not in self._builds:
            self._builds[compiler] = build_kernels(
                self.source,
                self.name,
                self.kernels,
                extern_c=not self.no_extern_c,
                options=self.options,
                include_dirs=self.include_dirs,
                compiler=compiler,
            )
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


@dataclass
class LaunchResult:
    status: int
    seconds: float
    events: int
    events_overflow: bool
    outputs: dict[int, np.ndarray]  # by argument index: Out/InOut arrays (device arrays too
    # when the launch did not write back)


class CpuFunction:
    """A kernel: call it like pycuda's Function; `.trace(...)` and `schedules=` are extras."""

    def __init__(self, module: CpuModule, name: str) -> None:
        self.module = module
        self.name = name
        self.params = self._describe()

    def _symbol(self, prefix: str, compiler: str = PLAIN) -> Any:
        rt = runtime()
        sym = rt.lib.kata_sym(self.module.build(compiler).handle, f"{prefix}{self.name}".encode())
        if sym == rt.ffi.NULL:
            raise CudaError(f"{self.module.name}: no launch glue for {self.name}")
        return sym

    def _threads_symbol(self, compiler: str) -> Any:
        """The block loop of kernels that run without fibers (None in traced builds)."""
        if self.module.fibers or compiler != PLAIN:
            return None
        rt = runtime()
        sym = rt.lib.kata_sym(
            self.module.build(compiler).handle, f"kata_threads__{self.name}".encode()
        )
        if sym == rt.ffi.NULL:
            return None
        return rt.ffi.cast("void(*)(void**, const unsigned*, unsigned)", sym)

    def library_base(self, compiler: str = PLAIN) -> int:
        """Load address of the kernel library built with `compiler` (a trace's pcs minus it are
        offsets in the library file)."""
        return int(runtime().lib.kata_lib_base(self._symbol("kata_invoke__", compiler)))

    def _describe(self) -> list[Param]:
        rt = runtime()
        fn = rt.ffi.cast("int(*)(int*, int*, int)", self._symbol("kata_describe__"))
        sizes = rt.ffi.new(f"int[{MAX_PARAMS}]")
        kinds = rt.ffi.new(f"int[{MAX_PARAMS}]")
        n = fn(sizes, kinds, MAX_PARAMS)
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
        launch = {"block": block, "grid": grid, "shared": shared, "seed": seed, "timeout": timeout}
        if blocks is not None:
            # A probe: only these blocks of the grid run (a huge grid's last block, to see
            # 64-bit indexing), forward order, no race check.
            seconds = self.launch(args, blocks=blocks, **launch).seconds
        elif schedules:
            seconds = self._race_check(args, schedules, rtol, launch)
        else:
            seconds = self.launch(args, **launch).seconds
        return seconds if time_kernel else None

    def launch(
        self,
        args: Sequence[Any],
        *,
        block: Any,
        grid: Any = (1, 1),
        shared: int = 0,
        schedule: str = "forward",
        seed: int = 0,
        timeout: float | None = None,
        compiler: str = PLAIN,
        events: Any = None,
        event_capacity: int = 0,
        isolate: bool = True,
        write_back: bool = True,
        blocks: range | None = None,
    ) -> LaunchResult:
        """One launch, the entry point of calls, race checks and traces; returns its record.

        `compiler`: PLAIN or TRACED build. `events`/`event_capacity`: a kata_event buffer for a
        traced build. `isolate=False` runs in this process (no fork). `write_back=False` leaves
        Out/InOut arrays alone (the outputs are in the record). `blocks`: a probe of a few
        linear block ids. A kernel that overran in an earlier kata test fails at once.
        """
        with hangs.running(hangs.KERNEL, self._key(), f"kernel {self.name}"):
            rt = runtime()
            shared_max = int(rt.lib.kata_dyn_shared_max())
            shape = geometry(self.name, block, grid, shared, schedule, blocks, shared_max)
            packed = marshal(rt.ffi, self.name, self.params, args)
            try:
                if schedule == "preempt":
                    compiler = TRACED  # a switch point at every access
                L = launch_record(
                    rt.ffi,
                    self.name,
                    shape,
                    packed,
                    schedule=schedule,
                    seed=seed,
                    fibers=self.module.fibers,
                    isolate=isolate,
                    timeout=hangs.launch_limit(
                        float(timeout if timeout is not None else self.module.timeout)
                    ),
                )
                self._entry_points(L, compiler, events, event_capacity)
                plain = events is None and blocks is None and isolate
                res = self._run(L, shape, packed, compiler, plain)
                if res.status != rt.lib.KATA_OK:
                    raise self._error(res, packed)
                return self._result(res, packed, args, write_back)
            finally:
                packed.release()

    def _key(self) -> str:
        m = self.module
        text = "\0".join([m.source, *m.options, str(m.no_extern_c)]).encode()
        return f"cu:{self.name}:{hashlib.sha1(text).hexdigest()}"

    def _entry_points(self, L: Any, compiler: str, events: Any, event_capacity: int) -> None:
        """The build's launch glue in `L`, and the trace buffer of a traced launch."""
        rt = runtime()
        L.call = rt.ffi.cast("void(*)(void**)", self._symbol("kata_invoke__", compiler))
        threads = self._threads_symbol(compiler)
        L.threads = rt.ffi.NULL if threads is None else threads
        L.events = rt.ffi.NULL if events is None else events
        L.event_capacity = event_capacity
        if events is not None:
            lo, hi = rt.ffi.new("uintptr_t*"), rt.ffi.new("uintptr_t*")
            if rt.lib.kata_lib_rw_range(L.call, lo, hi):
                L.static_lo, L.static_hi = lo[0], hi[0]

    def _run(self, L: Any, shape: Geometry, packed: Marshalled, compiler: str, plain: bool) -> Any:
        """Run `L`: a `plain` launch (forked, untraced, whole grid) through the launch server
        where one runs, anything else by forking this process (or in it: isolate=False)."""
        rt = runtime()
        res = rt.ffi.new("kata_result_t*")
        srv = current_server() if plain else None
        sent = srv is not None and srv.launch(
            res,
            library=self.module.build(compiler).path,
            symbol=f"kata_invoke__{self.name}",
            kernel=self.name,
            grid=shape.grid,
            block=shape.block,
            shared=shape.shared,
            schedule=L.schedule,
            seed=L.seed,
            fibers=L.fibers,
            preempt=L.preempt,
            timeout=L.timeout,
            buffers=[(b, i) for b, i, _ in packed.buffers],
            args=packed.wire,
        )
        if not sent:  # no launch server here: fork this process
            rt.lib.kata_launch(L, res)
        return res

    def _result(
        self, res: Any, packed: Marshalled, args: Sequence[Any], write_back: bool
    ) -> LaunchResult:
        result = LaunchResult(
            status=res.status,
            seconds=float(res.seconds),
            events=int(res.events),
            events_overflow=bool(res.events_overflow),
            outputs={},
        )
        for i, arg, buf in packed.copies:
            out = buf.read(arg.array.dtype, arg.array.shape)
            result.outputs[i] = out
            if write_back:
                arg.array[...] = out
        for _buf, i, owned in packed.buffers:
            if not owned and not write_back:  # a race check compares device arrays too
                result.outputs[i] = args[i].get()
        return result

    def _error(self, res: Any, packed: Marshalled) -> CudaError:
        ffi, lib = runtime().ffi, runtime().lib
        buffers = packed.buffers
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
        self, args: Sequence[Any], schedules: Sequence[str], rtol: float, launch: dict[str, Any]
    ) -> float:
        """Run under each schedule, compare, and write the agreed outputs back."""

        def run(schedule: str) -> tuple[dict[int, np.ndarray], float]:
            r = self.launch(args, schedule=schedule, write_back=False, **launch)
            return r.outputs, r.seconds

        outputs, seconds = compare_schedules(self.name, self.params, args, schedules, run, rtol)
        for arg, out in zip(args, outputs, strict=True):
            if isinstance(arg, ArrayArg) and arg.copy_out:
                arg.array[...] = out
            elif isinstance(arg, CpuDeviceArray):
                arg.set(out)
        return seconds

    def check_races(self, *args: Any, **kw: Any) -> None:
        """Run under every schedule (default: all that this machine can); RaceDetected if outputs
        differ."""
        kw.setdefault("schedules", default_schedules())
        self(*args, **kw)

    def trace(self, *args: Any, block: Any = None, grid: Any = (1, 1), shared: int = 0, **kw: Any):
        """Run once with global-memory tracing; returns a harness.cuda.cpu.trace.Trace."""
        from harness.cuda.cpu.trace import run_trace

        return run_trace(self, args, block=block, grid=grid, shared=shared, **kw)
