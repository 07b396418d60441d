"""The exceptions of harness.cuda. Every one names the kernel, so a test failure reads on its own."""

from __future__ import annotations

from harness.faults import NativeFault
from harness.hangs import Overrun
from harness.native.build import BuildError

__all__ = [
    "BarrierDeadlock",
    "CudaCompileError",
    "CudaError",
    "KernelCrash",
    "KernelError",
    "KernelTimeout",
    "LaunchError",
    "OutOfBounds",
    "RaceDetected",
    "SanitizerError",
    "SanitizerRefused",
]


class CudaError(Exception):
    """Base of every harness.cuda error."""


class CudaCompileError(CudaError, BuildError):
    """The compiler rejected the .cu file; the message is its trimmed diagnostics (file.cu:line)."""


class LaunchError(CudaError):
    """A launch that cannot run: bad block/grid, wrong argument count, kind or size."""


class KernelError(CudaError, NativeFault):
    """The kernel went wrong while running. `kernel`, `block`, `thread` say where.

    A NativeFault: the learner's kernel failed where Python sees none of its frames, so a gate
    test it fails is not tripped (an honest out-of-bounds access or deadlock is no dodge); a
    KernelTimeout is an Overrun too, and a time limit still trips a gate."""

    def __init__(
        self,
        message: str,
        *,
        kernel: str,
        block: tuple[int, int, int] | None = None,
        thread: tuple[int, int, int] | None = None,
    ) -> None:
        super().__init__(message)
        self.kernel = kernel
        self.block = block
        self.thread = thread


class OutOfBounds(KernelError):
    """A global-memory access outside every buffer (caught by a guard page)."""

    def __init__(self, message: str, *, address: int, argument: int | None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.address = address
        self.argument = argument


class BarrierDeadlock(KernelError):
    """A __syncthreads() or warp collective that not every thread it waits for reaches."""


class KernelCrash(KernelError):
    """Another fatal signal in the kernel: SIGFPE, a fiber's stack overflow, __trap(), assert."""


class KernelTimeout(KernelError, Overrun):
    """The launch ran past its time limit."""


class RaceDetected(CudaError, NativeFault):
    """Outputs differ between thread schedules: a missing __syncthreads() or a data race (the
    learner's kernel failed, as KernelError: it fails its test and trips no gate)."""

    def __init__(
        self,
        message: str,
        *,
        kernel: str,
        schedules: tuple[str, str],
        argument: int,
        mismatches: int,
    ) -> None:
        super().__init__(message)
        self.kernel = kernel
        self.schedules = schedules
        self.argument = argument
        self.mismatches = mismatches


class SanitizerError(KernelError):
    """compute-sanitizer (memcheck or racecheck) reported errors in a gpu-backend launch.

    `tool` is the sanitizer tool, `findings` the parsed records (harness.cuda.sanitizer.Finding).
    """

    def __init__(self, message: str, *, kernel: str, tool: str, findings: list) -> None:
        first = next((f for f in findings if f.thread is not None), None)
        super().__init__(
            message,
            kernel=kernel,
            block=first.block if first else None,
            thread=first.thread if first else None,
        )
        self.tool = tool
        self.findings = findings


class SanitizerRefused(SanitizerError):
    """compute-sanitizer did not check the launch: it refused the device ("Device not
    supported", as under gVisor), failed internally, or never ran the kernel. Never a pass: the
    message says what it printed and that nothing was checked."""
