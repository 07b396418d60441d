"""Marshalling a launch for the cpu runtime: Python arguments and launch geometry to the C records
of kata_launch.h (kata_launch_t, kata_buffer[]) and to the launch server's argument list.

Arrays passed as cuda.In/Out/InOut get a device buffer of their own for the launch (`owned`);
device arrays are passed as they are. Scalars must match the kernel parameter's kind and size
exactly, as on a GPU, where a wrong size is undefined behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness._lazy import lazy_module
from harness.cuda.args import ArrayArg, check_scalar, normalise_dims
from harness.cuda.cpu.interface import SCHEDULES
from harness.cuda.cpu.memory import CpuDeviceArray, DeviceBuffer
from harness.cuda.errors import LaunchError

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = ["Geometry", "Marshalled", "Param", "geometry", "launch_record", "marshal"]

# Parameter kinds as kata::describe reports them (kata_cuda.h).
KINDS = {0: "signed integer", 1: "unsigned integer", 2: "floating point", 3: "pointer"}
KINDS.update({4: "struct", 5: "bool"})
POINTER = 3
MAX_PARAMS = 64


@dataclass(frozen=True)
class Param:
    size: int
    kind: int
    name: str

    def describe(self) -> str:
        return f"{self.name} ({KINDS.get(self.kind, '?')}, {self.size} bytes)"


@dataclass(frozen=True)
class Geometry:
    """A checked launch shape: block and grid dims, dynamic shared bytes, the blocks to run."""

    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    shared: int
    blocks: range | None  # a probe runs only these linear block ids


def geometry(
    kernel: str,
    block: Any,
    grid: Any,
    shared: int,
    schedule: str,
    blocks: range | None,
    shared_max: int,
) -> Geometry:
    """The launch's shape, or LaunchError naming what is out of range."""
    block3, grid3 = normalise_dims(kernel, block, grid)
    if schedule not in SCHEDULES:
        raise LaunchError(f"{kernel}: unknown schedule {schedule!r}; known: {SCHEDULES}")
    shared = int(shared)
    if shared < 0 or shared > shared_max:
        raise LaunchError(
            f"{kernel}: shared={shared} bytes; dynamic shared memory is 0 to {shared_max} bytes"
        )
    nblocks = grid3[0] * grid3[1] * grid3[2]
    if blocks is not None and (
        blocks.step != 1 or len(blocks) == 0 or blocks.start < 0 or blocks.stop > nblocks
    ):
        raise LaunchError(
            f"{kernel}: blocks={blocks!r} must be a non-empty range with step 1 inside the "
            f"grid's {nblocks} blocks"
        )
    return Geometry(tuple(block3), tuple(grid3), shared, blocks)  # type: ignore[arg-type]


@dataclass
class Marshalled:
    """A launch's arguments in C: argv for kata_launch_t, buffers, and what to copy back."""

    argv: Any  # void*[]: one cell per argument
    wire: list[tuple[int, Any]]  # for the launch server: (1, buffer index) or (0, bytes)
    buffers: list[tuple[DeviceBuffer, int, bool]]  # (buffer, argument index, owned)
    copies: list[tuple[int, ArrayArg, DeviceBuffer]]  # Out/InOut arrays to read back
    keep: list[Any] = field(default_factory=list)  # cffi cells that must outlive the call

    def buffer_table(self, ffi: Any) -> Any:
        """kata_buffer[] of the launch: where each buffer lies and which argument it is."""
        table = ffi.new("kata_buffer[]", max(1, len(self.buffers)))
        for j, (buf, i, _) in enumerate(self.buffers):
            table[j].start = buf.address
            table[j].size = buf.size
            table[j].map_lo = buf.map_lo
            table[j].map_size = buf.map_size
            table[j].arg = i
        return table

    def release(self) -> None:
        """Free the buffers this launch made (device arrays stay)."""
        for buf, _, owned in self.buffers:
            if owned:
                buf.free()


def marshal(ffi: Any, kernel: str, params: Sequence[Param], args: Sequence[Any]) -> Marshalled:
    """The C form of `args` for `params`; LaunchError for a wrong count, kind or size."""
    if len(args) != len(params):
        want = ", ".join(p.describe() for p in params) or "no arguments"
        raise LaunchError(f"{kernel} takes {len(params)} arguments ({want}), got {len(args)}")
    out = Marshalled(argv=None, wire=[], buffers=[], copies=[])
    slots = []
    try:
        for i, (arg, p) in enumerate(zip(args, params, strict=True)):
            if isinstance(arg, ArrayArg | CpuDeviceArray):
                buf = _array_buffer(kernel, i, p, arg, out)
                cell = ffi.new("uintptr_t*", buf.address)
                out.wire.append((1, len(out.buffers) - 1))
            else:
                if p.kind == POINTER:
                    raise LaunchError(
                        f"{kernel}: argument {i} is {p.describe()}; pass cuda.In(a), "
                        f"cuda.Out(a), cuda.InOut(a) or a device array, got {type(arg).__name__}"
                    )
                data = scalar_bytes(kernel, i, p, check_scalar(kernel, i, arg))
                cell = ffi.new("char[]", data)
                out.wire.append((0, data))
            out.keep.append(cell)
            slots.append(ffi.cast("void*", cell))
    except BaseException:
        out.release()
        raise
    out.argv = ffi.new("void*[]", slots or [ffi.NULL])
    return out


def _array_buffer(
    kernel: str, i: int, p: Param, arg: ArrayArg | CpuDeviceArray, out: Marshalled
) -> DeviceBuffer:
    if p.kind != POINTER:
        raise LaunchError(f"{kernel}: argument {i} is {p.describe()}, not a pointer; got {arg!r}")
    if isinstance(arg, CpuDeviceArray):
        out.buffers.append((arg.buffer, i, False))
        return arg.buffer
    a = arg.array
    buf = DeviceBuffer(a.nbytes)
    out.buffers.append((buf, i, True))
    if arg.copy_in:
        buf.write(a)
    if arg.copy_out:
        out.copies.append((i, arg, buf))
    return buf


def scalar_bytes(kernel: str, index: int, p: Param, value: np.generic) -> bytes:
    """The bytes of a scalar argument, or LaunchError when its type does not fit `p`."""
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


def launch_record(
    ffi: Any,
    kernel: str,
    shape: Geometry,
    packed: Marshalled,
    *,
    schedule: str,
    seed: int,
    fibers: bool,
    isolate: bool,
    timeout: float,
) -> Any:
    """kata_launch_t of one launch, but for its entry points and trace buffer (the caller sets
    those: they depend on the build). What it points to is kept alive by `packed`."""
    name = ffi.new("char[]", kernel.encode())
    table = packed.buffer_table(ffi)
    packed.keep += [name, table]
    L = ffi.new("kata_launch_t*")
    L.args = packed.argv
    L.kernel = name
    L.grid = list(shape.grid)
    L.block = list(shape.block)
    L.shared_bytes = shape.shared
    L.schedule = SCHEDULES.index(schedule)
    L.seed = int(seed) & (2**64 - 1)
    preempt = schedule == "preempt"
    L.fibers = int(fibers or preempt)
    L.preempt = 128 if preempt else 0
    L.isolate = int(isolate)
    L.timeout = timeout
    L.nbuffers = len(packed.buffers)
    L.buffers = table
    if shape.blocks is not None:
        L.first_block, L.nblocks = shape.blocks.start, len(shape.blocks)
    return L
