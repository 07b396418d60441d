"""Execute a PTX kernel over a grid, vectorised over all its threads with numpy.

Every thread of the grid is one element of each register array. Scheduling is *min-pc*: each
step runs the instruction at the smallest pc any live thread is waiting at, for exactly the
threads waiting there, so divergent branches run one side, then the other, and threads meet
again at the join (a thread never overtakes another through a backward branch). Blocks are
independent (no shared memory or barriers), so flattening the grid is exact.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import hangs
from . import ops
from .decoder import Decoder, Exec, State
from .memory import GlobalMemory, PtxMemoryError
from .parser import (
    Instruction,
    Kernel,
    Module,
    PtxError,
    PtxSyntaxError,
    PtxUnsupportedError,
    parse_module,
)
from .values import bits_dtype, dtype_of

__all__ = [
    "Decoder",
    "LaunchStats",
    "LoadedModule",
    "PtxFloatError",
    "PtxRuntimeError",
    "PtxStepLimit",
    "PtxTimeout",
    "State",
    "check_ieee_division",
    "load_module",
    "run_kernel",
]

Dim3 = tuple[int, int, int]
MAX_THREADS = 1 << 22


class PtxRuntimeError(PtxError):
    """The kernel did something wrong while running: a bad access, a trap, a runaway loop."""


class PtxFloatError(PtxRuntimeError):
    """Hardware would compute a float result differently from what was asked: a mul/add pair
    ptxas may contract into an fma where that changes the result, or an approximate division
    where the launch asked for IEEE division. The message names the line and what to write."""


class PtxStepLimit(PtxRuntimeError, hangs.Overrun):
    """A launch issued more instructions than its step limit allows (an endless loop?)."""


class PtxTimeout(PtxRuntimeError, hangs.Overrun):
    """A launch ran past its wall limit (by default, a little less than the test's time left)."""


@dataclass
class LaunchStats:
    """What one launch executed."""

    issues: int = 0  # instruction issues: one per (pc, group of threads waiting there)
    thread_instructions: int = 0  # instructions executed, summed over threads
    opcodes: Counter[str] = field(default_factory=Counter)  # per-thread counts by opcode
    threads: int = 0

    @property
    def per_thread(self) -> float:
        return self.thread_instructions / self.threads if self.threads else 0.0


def _dim3(value: int | Sequence[int], what: str) -> Dim3:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(int(d) < 1 for d in dims):
        raise ValueError(
            f"{what} must be a positive int or a tuple of 1-3 positive ints: {value!r}"
        )
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


# --------------------------------------------------------------------------- machine state
def _special_values(grid: Dim3, block: Dim3) -> dict[str, np.ndarray]:
    nb = block[0] * block[1] * block[2]
    ng = grid[0] * grid[1] * grid[2]
    tid = np.arange(nb * ng, dtype=np.int64)
    local, blk = tid % nb, tid // nb
    out = {
        "%tid.x": local % block[0],
        "%tid.y": (local // block[0]) % block[1],
        "%tid.z": local // (block[0] * block[1]),
        "%ctaid.x": blk % grid[0],
        "%ctaid.y": (blk // grid[0]) % grid[1],
        "%ctaid.z": blk // (grid[0] * grid[1]),
        "%laneid": local % 32,
        "%warpid": local // 32,
    }
    values = {k: v.astype(np.uint32) for k, v in out.items()}
    for axis, i in zip("xyz", range(3), strict=True):
        values[f"%ntid.{axis}"] = np.full(nb * ng, block[i], dtype=np.uint32)
        values[f"%nctaid.{axis}"] = np.full(nb * ng, grid[i], dtype=np.uint32)
    values["%warpsize"] = np.full(nb * ng, 32, dtype=np.uint32)
    values["%nwarpid"] = np.full(nb * ng, (nb + 31) // 32, dtype=np.uint32)
    values["%smid"] = np.zeros(nb * ng, dtype=np.uint32)
    return values


# --------------------------------------------------------------------------- control flow
@dataclass(frozen=True)
class Control:
    kind: str  # "bra", "exit", "trap"
    target: int = -1
    uniform: bool = False  # bra.uni: the guard must agree across each warp's threads here


Decoded = Exec | Control


def decode(inst: Instruction, dec: Decoder) -> Decoded:
    base = inst.base
    if base == "bra":
        if len(inst.operands) != 1:
            raise dec.error(inst, "bra takes one label")
        return Control("bra", dec.label(inst, inst.operands[0]), "uni" in inst.modifiers)
    if base in ("ret", "exit"):
        return Control("exit")
    if base == "trap":
        return Control("trap")
    handler = ops.HANDLERS.get(base)
    if handler is None:
        raise PtxUnsupportedError(
            f"line {inst.line}: the interpreter does not implement {inst.opcode!r}"
        )
    return handler(inst, dec)


# --------------------------------------------------------------------------- launching
class LoadedModule:
    """A parsed module whose kernels can be launched repeatedly."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self._decoded: dict[str, list[Decoded]] = {}
        self._keys: dict[str, str] = {}

    @property
    def kernels(self) -> list[str]:
        return list(self.module.kernels)

    def kernel(self, name: str | None) -> Kernel:
        kernels = self.module.kernels
        if name is None:
            if len(kernels) != 1:
                raise KeyError(f"name the kernel: the module has {', '.join(kernels) or 'none'}")
            return next(iter(kernels.values()))
        if name not in kernels:
            raise KeyError(f"no kernel {name!r} in the module; kernels: {', '.join(kernels)}")
        return kernels[name]

    def decoded(self, kernel: Kernel) -> list[Decoded]:
        if kernel.name not in self._decoded:
            dec = Decoder(kernel, self.module)
            self._decoded[kernel.name] = [decode(i, dec) for i in kernel.instructions]
        return self._decoded[kernel.name]

    def launch(
        self,
        name: str | None,
        args: Sequence[Any],
        grid: int | Sequence[int] = 1,
        block: int | Sequence[int] = 1,
        *,
        max_steps: int = 100_000,
        ieee_division: bool = False,
        timeout: float | None = None,
    ) -> LaunchStats:
        """Run kernel `name` over grid x block threads. numpy arrays in `args` are device
        buffers: they are updated in place when the kernel returns. Other args are scalars.

        `ieee_division`: the caller asks for correctly rounded f32 division, so div.approx.f32
        and div.full.f32 (within 2 ulp on hardware) raise PtxFloatError instead of running.

        The launch stops with PtxStepLimit after `max_steps` instruction issues and with
        PtxTimeout after `timeout` seconds (default: none outside a kata test; inside one, a
        little less than the test has left). A kernel that overran once in a kata test fails
        at once in later tests (harness.hangs)."""
        kernel = self.kernel(name)
        key = f"{self._key(kernel)}:{max_steps}"
        with hangs.running(hangs.KERNEL, key, f"kernel {kernel.name}"):
            wall = hangs.launch_limit(math.inf if timeout is None else timeout)
            return self._launch(kernel, args, grid, block, max_steps, wall, ieee_division)

    def _key(self, kernel: Kernel) -> str:
        """The kernel's build: a hash of its instructions (any change is new code)."""
        if kernel.name not in self._keys:
            text = "\n".join(i.text for i in kernel.instructions).encode()
            self._keys[kernel.name] = f"ptx:{kernel.name}:{hashlib.sha1(text).hexdigest()}"
        return self._keys[kernel.name]

    def _launch(
        self,
        kernel: Kernel,
        args: Sequence[Any],
        grid: int | Sequence[int],
        block: int | Sequence[int],
        max_steps: int,
        wall: float,
        ieee_division: bool,
    ) -> LaunchStats:
        program = self.decoded(kernel)
        if ieee_division:
            check_ieee_division(kernel)
        g, b = _dim3(grid, "grid"), _dim3(block, "block")
        n = g[0] * g[1] * g[2] * b[0] * b[1] * b[2]
        if n > MAX_THREADS:
            raise ValueError(f"{n} threads: the interpreter runs at most {MAX_THREADS}")
        if b[0] * b[1] * b[2] > 1024:
            raise ValueError(f"block {b}: at most 1024 threads per block")
        mem = GlobalMemory()
        params, buffers = _pack_params(kernel, args, mem)
        symbols = {
            v.name: mem.add(v.name, v.init, readonly=v.space == "const")
            for v in self.module.variables.values()
        }
        mem.seal()
        st = State(kernel, n, mem, params)
        st.special = _special_values(g, b)
        st.symbols = symbols
        stats = _execute(kernel, program, st, max_steps, g, b, wall)
        for index, array in buffers:
            flat = array.reshape(-1).view(np.uint8)
            flat[:] = np.frombuffer(mem.read(index), dtype=np.uint8)
        return stats


def _pack_params(
    kernel: Kernel, args: Sequence[Any], mem: GlobalMemory
) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    if len(args) != len(kernel.params):
        raise TypeError(
            f"{kernel.name} takes {len(kernel.params)} arguments "
            f"({', '.join('.' + p.type for p in kernel.params)}), got {len(args)}"
        )
    buf = np.zeros(max(kernel.param_bytes, 8), dtype=np.uint8)
    buffers: list[tuple[int, np.ndarray]] = []
    for i, (p, arg) in enumerate(zip(kernel.params, args, strict=True)):
        if isinstance(arg, np.ndarray) and arg.ndim > 0:
            if p.type not in ("u64", "s64", "b64"):
                raise TypeError(
                    f"argument {i} ({p.name}) is .{p.type}: pass a scalar, not an array"
                )
            if not arg.flags.c_contiguous or not arg.flags.writeable:
                raise TypeError(
                    f"argument {i} ({p.name}): arrays must be C-contiguous and writable"
                )
            value = mem.add(f"argument {i} ({p.name})", arg)
            buffers.append((len(mem.buffers) - 1, arg))
        else:
            value = arg
        dt = dtype_of(p.type)
        try:
            if dt.kind in "iu":
                raw = np.array(
                    int(value) & ((1 << (dt.itemsize * 8)) - 1), dtype=bits_dtype(p.type)
                )
            else:
                raw = np.array(value, dtype=dt)
        except (TypeError, ValueError) as e:
            raise TypeError(f"argument {i} ({p.name}, .{p.type}): {e}") from None
        buf[p.offset : p.offset + p.size] = np.frombuffer(raw.tobytes(), dtype=np.uint8)
    return buf, buffers


def _where(k: int, grid: Dim3, block: Dim3) -> str:
    nb = block[0] * block[1] * block[2]
    local, blk = k % nb, k // nb
    t = (local % block[0], (local // block[0]) % block[1], local // (block[0] * block[1]))
    c = (blk % grid[0], (blk // grid[0]) % grid[1], blk // (grid[0] * grid[1]))
    return f"thread {t} of block {c}"


def _execute(
    kernel: Kernel,
    program: list[Decoded],
    st: State,
    max_steps: int,
    g: Dim3,
    b: Dim3,
    wall: float = math.inf,
) -> LaunchStats:
    n, end = st.n, len(program)
    deadline = time.monotonic() + wall
    pc = np.zeros(n, dtype=np.int64)
    stats = LaunchStats(threads=n)
    insts = kernel.instructions
    all_true = np.ones(n, dtype=np.bool_)
    nb = b[0] * b[1] * b[2]
    warp = np.arange(n) // nb * -(-nb // 32) + np.arange(n) % nb // 32  # grid-wide warp number
    with np.errstate(all="ignore"):
        while True:
            live = pc < end
            if not live.any():
                break
            cur = int(pc[live].min())
            at = pc == cur
            inst, step = insts[cur], program[cur]
            count = int(np.count_nonzero(at))
            stats.issues += 1
            stats.thread_instructions += count
            stats.opcodes[inst.opcode] += count
            if stats.issues > max_steps:
                raise PtxStepLimit(
                    f"{kernel.name}: more than {max_steps} instruction issues (an endless loop?); "
                    f"line {inst.line}: {inst.text}"
                )
            if not stats.issues & 255 and time.monotonic() > deadline:
                raise PtxTimeout(
                    f"{kernel.name}: did not finish within {wall:.3g} s, its share of the "
                    f"test's time ({stats.issues} instruction issues: an endless loop?); "
                    f"line {inst.line}: {inst.text}"
                )
            run = at
            if inst.guard is not None:
                guard = st.regs.get(inst.guard)
                if guard is None:
                    raise PtxSyntaxError(inst.line, f"{inst.guard} is not declared: {inst.text}")
                run = at & (~guard if inst.guard_negated else guard)
            if isinstance(step, Control):
                if step.kind == "bra":
                    if step.uniform and inst.guard is not None:
                        _check_uniform(kernel, inst, warp, at, run, g, b)
                    pc[at] += 1
                    pc[run] = step.target
                elif step.kind == "exit":
                    pc[run] = end
                    pc[at & ~run] += 1
                elif run.any():
                    k = int(np.flatnonzero(run)[0])
                    raise PtxRuntimeError(f"trap in {_where(k, g, b)}, line {inst.line}")
                else:
                    pc[at] += 1
                continue
            if run.any():
                try:
                    step(st, all_true if count == n and run is at else run)
                except ops.PtxContractionError as e:
                    raise PtxFloatError(
                        f"{kernel.name}: {_where(e.thread, g, b)}, line {inst.line} "
                        f"({inst.text}): {e}"
                    ) from None
                except PtxMemoryError as e:
                    active = np.flatnonzero(run)
                    k = int(active[e.index]) if 0 <= e.index < active.size else -1
                    who = _where(k, g, b) if k >= 0 else "a thread"
                    raise PtxRuntimeError(
                        f"{kernel.name}: {who}, line {inst.line} ({inst.text}): {e}"
                    ) from None
            pc[at] += 1
    return stats


def _check_uniform(
    kernel: Kernel,
    inst: Instruction,
    warp: np.ndarray,
    at: np.ndarray,
    run: np.ndarray,
    g: Dim3,
    b: Dim3,
) -> None:
    """bra.uni promises the branch does not diverge: undefined behaviour on hardware if it does."""
    split = np.intersect1d(warp[at & run], warp[at & ~run])
    if split.size:
        k = int(np.flatnonzero(at & run & (warp == split[0]))[0])
        raise PtxRuntimeError(
            f"{kernel.name}: line {inst.line} ({inst.text}): bra.uni diverges: in the warp of "
            f"{_where(k, g, b)} some threads take it and some do not (a divergent branch is bra)"
        )


def check_ieee_division(kernel: Kernel) -> None:
    """Raise PtxFloatError at the first f32 division that is not correctly rounded."""
    for inst in kernel.instructions:
        mods = inst.modifiers
        if inst.base == "div" and "f32" in mods and ("approx" in mods or "full" in mods):
            kind = "approx" if "approx" in mods else "full"
            raise PtxFloatError(
                f"{kernel.name}: line {inst.line} ({inst.text}): div.{kind}.f32 is within 2 ulp "
                f"on hardware, not IEEE division, and IEEE division is what is asked: write "
                f"div.rn.f32 (correctly rounded, what C's / compiles to without fast math)"
            )


def load_module(ptx: str | Module) -> LoadedModule:
    """Parse PTX text (or take a parsed Module) for launching."""
    return LoadedModule(ptx if isinstance(ptx, Module) else parse_module(ptx))


def run_kernel(
    ptx: str | Module | LoadedModule,
    kernel: str | None,
    args: Sequence[Any],
    grid: int | Sequence[int] = 1,
    block: int | Sequence[int] = 1,
    *,
    max_steps: int = 100_000,
    ieee_division: bool = False,
    timeout: float | None = None,
) -> LaunchStats:
    """Parse `ptx` and run `kernel` over grid x block threads; numpy arrays in `args` are
    updated in place, as device buffers copied back after the launch would be.
    `ieee_division`: see LoadedModule.launch."""
    loaded = ptx if isinstance(ptx, LoadedModule) else load_module(ptx)
    return loaded.launch(
        kernel,
        args,
        grid,
        block,
        max_steps=max_steps,
        ieee_division=ieee_division,
        timeout=timeout,
    )
