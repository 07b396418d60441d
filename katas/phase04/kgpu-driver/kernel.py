"""GIVEN: build your driver into the user-space kernel and run programs against it. Do not edit.

From the kata directory, by hand:

    python kernel.py run -- python3 -c 'import kgpu; print(kgpu.Device().info())'
    python kernel.py run -- ./my_umd            # a C program: cc -I. my_umd.c -o my_umd

`run` builds kshim.c + kgpu_hw.c + your kgpu.c into the kernel process, starts it, runs the
program with the preload (LD_PRELOAD=libkgpu_preload.so, KGPU_SOCKET=...), stops the kernel
(module_exit) and prints the kernel's log (printk), leaks included. The tests do the same
through Kernel below.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KERNEL_SOURCES = ("kshim.c", "kgpu_hw.c", "kgpu.c")
# What a Python user program of the tests starts with: `out` is printed as JSON at its end, and
# errno_of(f, *args) is "ENOTTY" (the errno's name) when f raises OSError, else 0.
PRELUDE = """\
import errno, json, mmap, os, select, time
import kgpu
out = {}
def errno_of(f, *args):
    try:
        f(*args)
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)
    return 0
"""
# The driver's calls of libc's allocators go to kshim.c's counting wrappers (not a kernel allocator)
LIBC_ALLOCATORS = (
    "malloc", "calloc", "realloc", "reallocarray", "free", "strdup", "strndup", "posix_memalign",
    "aligned_alloc", "memalign", "valloc",
)  # fmt: skip
NOT_STARTED = "kgpu: not started: "
LEAK = "kgpu: leak: "
ALLOCATED = "kgpu: allocated now: "
IN_THE_DRIVER = "kgpu: in the driver now: "
IOCTL_NAMES = {0: "INFO", 1: "SET_PARAM", 2: "GET_PARAM", 3: "SUBMIT", 4: "WAIT"}  # _IOC_NR


def _untold(env: dict[str, str]) -> dict[str, str]:
    """An environment that does not say which test is running (PYTEST_CURRENT_TEST names it):
    a driver must behave the same whichever test drives it."""
    return {k: v for k, v in env.items() if not k.startswith("PYTEST_")}


def _overrun() -> type[Exception]:
    try:
        from harness.hangs import Overrun
    except ImportError:  # kernel.py run by hand, without the harness
        return TimeoutError
    return Overrun


class ProgramTimeout(_overrun()):  # type: ignore[misc]
    """A user program did not finish in time: the driver hung (or waited past its timeout)."""


@dataclass(frozen=True)
class Built:
    kernel: Path  # the kernel process: kshim.c + kgpu_hw.c + kgpu.c
    preload: Path  # libkgpu_preload.so
    include: tuple[Path, ...]  # where kgpu_uapi.h and kgpu.py are
    sanitize: tuple[str, ...] = ()


def build(
    source: Callable[[str], Path], search_path: Sequence[Path], sanitize: Sequence[str] = ()
) -> Built:
    """Compile the kernel process and the preload library (cached by content)."""
    from harness.native.build import build_executable, build_shared_library

    include = tuple(Path(p) for p in search_path)
    kernel = build_executable(
        [source(s) for s in KERNEL_SOURCES],
        lang="c",
        flags=("-pthread",),
        link_flags=("-pthread", "-Wl," + ",".join(f"--wrap={f}" for f in LIBC_ALLOCATORS)),
        sanitize=tuple(sanitize),
        include_dirs=include,
        root=source("kgpu.c").parent,
    )
    preload = build_shared_library(
        [source("kgpu_preload.c")], lang="c", flags=("-pthread",), include_dirs=include
    )
    return Built(kernel.path, preload.path, include, tuple(sanitize))


class Kernel:
    """A running kernel process with your driver loaded; programs reach it through the preload."""

    def __init__(
        self,
        built: Built,
        log: Path,
        wrapper: Sequence[str] = (),
        irq_delay_us: int = 0,
    ) -> None:
        self.built = built
        self.irq_delay_us = irq_delay_us  # the simulated GPU's interrupt latency
        self.log_path = log
        self.socket = f"kgpu-{os.getpid()}-{secrets.token_hex(4)}"
        # An unlinked file: the kernel's stderr names no test (the log is copied to `log` at stop)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [*wrapper, str(built.kernel), self.socket],
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=self._kernel_env(),
            preexec_fn=_big_child if wrapper or built.sanitize else _child,
        )
        self.returncode: int | None = None
        self._ready(60.0 if wrapper or built.sanitize else 20.0)

    def _kernel_env(self) -> dict[str, str]:
        env = {k: v for k, v in _untold(dict(os.environ)).items() if k != "LD_PRELOAD"}
        if self.irq_delay_us:
            env["KGPU_IRQ_DELAY_US"] = str(self.irq_delay_us)
        # io_sync=0: a reply on one socket orders nothing for the next request on another (two
        # system calls of two processes are not ordered in a kernel either)
        env["TSAN_OPTIONS"] = "halt_on_error=0:exitcode=66:second_deadlock_stack=1:io_sync=0"
        return env

    def _ready(self, timeout: float) -> None:
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        end = time.monotonic() + timeout
        seen = b""
        while time.monotonic() < end:
            chunk = self.proc.stdout.read() or b""
            seen += chunk
            if b"kgpu-kernel: ready" in seen:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.005)
        self.stop()
        raise RuntimeError(f"the kernel process did not start (module_init?):\n{self.log()}")

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a user program: the preload and this kernel's socket."""
        env = _untold(dict(os.environ))
        env.update(
            LD_PRELOAD=str(self.built.preload),
            KGPU_SOCKET=self.socket,
            PYTHONPATH=os.pathsep.join(str(p) for p in self.built.include),
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.update(extra)
        return env

    def run(
        self,
        argv: Sequence[str | Path],
        timeout: float = 10.0,
        stdin: str | None = None,
        **extra: str,
    ) -> subprocess.CompletedProcess[str]:
        """Run a user program to its end. One that outlives `timeout` (cut to the test's time
        left) raises ProgramTimeout, and harness.hangs remembers this build of the driver: a
        later test's program fails at once instead of waiting again (hang once, fail fast)."""
        from harness import hangs

        label = "kgpu.c (a user program waiting on the driver)"
        with hangs.running(hangs.NATIVE, f"kgpu-kernel:{self.built.kernel}", label):
            limit = hangs.launch_limit(timeout)
            with subprocess.Popen(
                [str(a) for a in argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=self.env(**extra),
            ) as proc:
                try:
                    out, err = proc.communicate(stdin, timeout=limit)
                except subprocess.TimeoutExpired:
                    stuck = self.in_the_driver()  # before the kill ends the calls
                    proc.kill()
                    proc.communicate()
                    raise ProgramTimeout(
                        f"{Path(str(argv[0])).name} did not finish within {limit:.3g} s: "
                        f"{_stuck_sentence(stuck)}\n--- kernel log ---\n{_tail(self.log())}"
                    ) from None
            return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def python(self, code: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
        """Run Python code (it may `import kgpu`) as a user program. The code goes in on stdin,
        not in argv, where a driver could read it from /proc and tell the tests apart."""
        return self.run([sys.executable, "-S", "-"], timeout=timeout, stdin=code)  # -S: stdlib

    def program(self, body: str, timeout: float = 10.0) -> dict[str, Any]:
        """Run PRELUDE + body as a Python user program; its `out` dict. A stub's KGPU_TODO
        raises KataTodo (not started); a failing program raises AssertionError with its error
        and the kernel's log."""
        proc = self.python(PRELUDE + body + "\nprint(json.dumps(out))\n", timeout=timeout)
        return self.result(proc, "the Python user program")

    def umd(self, program: Path, *args: str | int, timeout: float = 10.0) -> dict[str, Any]:
        """Run umd.c's program with `args`; the JSON line it printed."""
        proc = self.run([program, *(str(a) for a in args)], timeout=timeout)
        return self.result(proc, f"umd {' '.join(str(a) for a in args)}")

    def result(self, proc: subprocess.CompletedProcess[str], what: str) -> dict[str, Any]:
        self.check_started()
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""]
            raise AssertionError(
                f"{what} failed (exit {proc.returncode}): {tail[-1]}\n{self.died()}"
                f"--- kernel log ---\n{_tail(self.log())}"
            )
        return dict(json.loads(lines[-1]))

    def died(self) -> str:
        """A sentence when the kernel process is gone (your driver crashed it), else ""."""
        code = self.proc.poll()
        if code is None:
            return ""
        if code < 0:
            name = signal.Signals(-code).name
            return f"the kernel process died of {name}: an oops in the driver (see the log)\n"
        return f"the kernel process exited with status {code}\n"

    def check_started(self) -> None:
        """KataTodo when a stub of the driver answered KGPU_TODO."""
        what = self.not_started()
        if what is not None:
            from harness import todo

            todo(f"kgpu.c: {what}")

    def log(self) -> str:
        """What the kernel printed so far (printk)."""
        if self._log.closed:
            return self.log_path.read_text(errors="replace")
        self._log.flush()
        fd = self._log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def allocated(self, timeout: float = 5.0) -> tuple[int, int, int]:
        """What the driver holds now: (kmalloc'd bytes, vmalloc_user bytes, bytes from libc's
        malloc), from the kernel's own count (SIGUSR1 makes it print one "kgpu: allocated
        now:" line)."""
        line = self._report(ALLOCATED, timeout)
        # "N kmalloc (B bytes) and M vmalloc_user (V bytes) and L libc malloc (C bytes)"
        words = line.replace("(", "").split()
        return int(words[2]), int(words[7]), int(words[13])

    def in_the_driver(self, timeout: float = 2.0) -> list[tuple[str, float]]:
        """The driver calls in progress now: [("poll", seconds), ("ioctl WAIT", seconds) ...];
        [] when the kernel cannot say (it died, or did not answer in time)."""
        try:
            line = self._report(IN_THE_DRIVER, timeout)
        except AssertionError:
            return []
        calls = []
        for part in line.split("; "):
            words = part.split()
            if len(words) < 3 or words[-1] != "s":
                continue
            what = words[0]
            if what == "ioctl" and len(words) >= 5:
                nr = int(words[2])
                what = f"ioctl {IOCTL_NAMES.get(nr, f'nr {nr}')}"
            calls.append((what, float(words[-2])))
        return calls

    def _report(self, prefix: str, timeout: float) -> str:
        """SIGUSR1, then the new line of the kernel's report that starts with `prefix`."""
        seen = self.log().count(prefix)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            lines = [ln for ln in self.log().splitlines() if prefix in ln]
            if len(lines) > seen:
                return lines[-1].split(prefix, 1)[1]
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        raise AssertionError(f"the kernel did not report ({prefix.strip()}):\n{_tail(self.log())}")

    def not_started(self) -> str | None:
        """The first "not started" line of the log: a stub returned KGPU_TODO."""
        for line in self.log().splitlines():
            if NOT_STARTED in line:
                return line.split(NOT_STARTED, 1)[1]
        return None

    def stop(self, timeout: float = 10.0) -> str:
        """Unload: SIGTERM (release what is open, module_exit, the leak report); the log."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._log.write(b"kernel: did not unload within the time limit: killed\n")
        self.returncode = self.proc.returncode
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        text = self.log()
        self._log.close()
        self.log_path.write_text(text)
        return text

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._log.closed:
            self.stop()


# Why a driver call does not return, by call: what a learner looks at first.
_STUCK_WHY = {
    "poll": "poll_wait on the queue the interrupt handler wakes? a mask that never changes?",
    "ioctl WAIT": "a WAIT that ignores its timeout, or never wakes? a lock never released?",
    "open": "a lock never released?",
    "close": "release waiting for something that never comes? a lock never released?",
}


def _stuck_sentence(calls: list[tuple[str, float]]) -> str:
    """What the program waited in: the longest driver call in progress, named."""
    if not calls:
        return "no driver call was in progress (the program itself did not end?)"
    what, seconds = max(calls, key=lambda c: c[1])
    why = _STUCK_WHY.get(what, "a lock never released? a wait that never ends?")
    more = f" ({len(calls) - 1} more call(s) in progress)" if len(calls) > 1 else ""
    return f"it was in the driver's {what} for {seconds:.3g} s ({why}){more}"


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _child() -> None:
    """The kernel process dies with the test process that started it (no orphans)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _big_child() -> None:
    import resource

    _child()
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))  # TSan and valgrind map a lot


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "run" or argv[1] != "--":
        print(__doc__)
        return 2
    import tempfile

    here = Path(__file__).resolve().parent
    built = build(lambda name: here / name, [here])
    with tempfile.TemporaryDirectory() as tmp, Kernel(built, Path(tmp) / "kernel.log") as k:
        proc = subprocess.run(argv[2:], env=k.env(), check=False)
        text = k.stop()
    print(text, end="", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
