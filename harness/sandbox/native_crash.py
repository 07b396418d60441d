"""Name the C function a sandbox child crashed in: "in allocator.c:42 (in arena_alloc)".

Child side (:func:`install`): a one-shot ``sigaction`` handler for SIGSEGV, SIGBUS, SIGFPE and
SIGILL walks the native stack (glibc ``backtrace`` from the faulting pc), takes the first frame
in a library that is not Python's or the system's (the learner's cached build), and writes
``native-frame: LIB|OFFSET|SYMBOL`` plus faulthandler's Python traceback to the fault pipe; then
it returns and the fault repeats with the default action, so the child dies by the signal.
Parent side (:func:`site_from_note`): ``addr2line`` turns the offset into file and line (kata
libraries are built with ``-g``).

x86-64 Linux only; elsewhere faulthandler's Python traceback is all there is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import faulthandler
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_SA_SIGINFO, _SA_RESETHAND, _SA_ONSTACK = 0x4, 0x80000000, 0x08000000
_RIP_OFFSET = 8 + 8 + 24 + 16 * 8  # ucontext_t: uc_flags, uc_link, uc_stack, gregs[REG_RIP]
_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_SYSTEM = tuple(
    {sys.prefix, sys.base_prefix, "/lib", "/usr/lib", "/usr/local/lib", "/lib64", "/usr/lib64"}
)


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


class _Sigaction(ctypes.Structure):
    _fields_ = [
        ("sa_sigaction", _HANDLER),
        ("sa_mask", ctypes.c_ulong * 16),
        ("sa_flags", ctypes.c_int),
        ("sa_restorer", ctypes.c_void_p),
    ]


_keep: list[object] = []  # the callback must outlive every call into C
# The signals of code that crashed: a fault, or abort() (a failed C assert, a corrupted heap, a
# Rust panic that cannot unwind through `extern "C"`).
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT)
MAX_FRAMES = 8


def _learner_library(path: str) -> bool:
    if (
        not path
        or path == sys.executable
        or os.path.realpath(path) == os.path.realpath(sys.executable)
    ):
        return False
    return not path.startswith(_SYSTEM)


def install(fault_fd: int) -> bool:
    """Install the handler in this (child) process; False where unsupported."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.backtrace.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    libc.sigaction.argtypes = [ctypes.c_int, ctypes.POINTER(_Sigaction), ctypes.c_void_p]
    frames = (ctypes.c_void_p * 64)()
    info = _DlInfo()

    def handler(signum: int, siginfo: int, context: int) -> None:
        try:
            os.write(fault_fd, f"native-crash-signal: {signum}\n".encode())
            # If this handler deadlocks (on a lock held by a corrupted malloc, say), die anyway.
            libc.signal(int(signal.SIGALRM), None)  # SIG_DFL at the C level
            libc.alarm(3)
            pcs = []
            if context:
                pcs.append((ctypes.c_void_p.from_address(context + _RIP_OFFSET).value, True))
            n = libc.backtrace(frames, 64)
            pcs += [(frames[i], False) for i in range(n)]
            written = 0
            for pc, exact in pcs:
                if not pc or not libc.dladdr(pc, ctypes.byref(info)):
                    continue
                lib = (info.dli_fname or b"").decode(errors="replace")
                if _learner_library(lib):
                    offset = pc - (info.dli_fbase or 0) - (0 if exact else 1)
                    sym = (info.dli_sname or b"?").decode(errors="replace")
                    os.write(fault_fd, f"native-frame: {lib}|{offset:#x}|{sym}\n".encode())
                    written += 1
                    if written == MAX_FRAMES:  # the innermost few: a panic's runtime, then yours
                        break
            faulthandler.dump_traceback(file=_Fd(fault_fd), all_threads=False)
        except BaseException:
            pass

    callback = _HANDLER(handler)
    _keep.append((callback, frames, info, libc))
    for sig in CRASH_SIGNALS:
        act = _Sigaction()
        act.sa_sigaction = callback
        act.sa_flags = _SA_SIGINFO | _SA_RESETHAND
        libc.sigaction(int(sig), ctypes.byref(act), None)
    return True


class _Fd:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


_NOTE = re.compile(r"^native-frame: (?P<lib>[^|]+)\|(?P<off>0x[0-9a-f]+)\|(?P<sym>.*)$", re.M)


@dataclass(frozen=True)
class NativeSite:
    """One native frame of a crash, resolved: its source file's name, line and function."""

    library: str  # the shared library's file name
    file: str  # the source file's name ("" when addr2line cannot tell)
    line: str
    function: str

    def text(self) -> str:
        """ "allocator.c:42 (in arena_alloc)", "allocator.c (in arena_alloc)", "f() in lib.so"."""
        if not self.file:
            return f"{self.function}() in {self.library}"
        if self.line in ("", "?", "0"):
            return f"{self.file} (in {self.function})"
        return f"{self.file}:{self.line} (in {self.function})"


def native_sites(fault: str) -> list[NativeSite]:
    """The child's noted frames in non-system libraries, innermost first, resolved with
    addr2line where it is installed (kata libraries are built with ``-g``)."""
    return [_resolve(Path(m["lib"]), m["off"], m["sym"]) for m in _NOTE.finditer(fault)]


def _resolve(lib: Path, offset: str, sym: str) -> NativeSite:
    addr2line = shutil.which("addr2line")
    if addr2line and lib.is_file():
        try:
            out = subprocess.run(
                [addr2line, "-f", "-e", str(lib), offset],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout.split("\n")
        except (OSError, subprocess.TimeoutExpired):
            out = []
        if len(out) >= 2 and not out[1].startswith("??"):
            func = out[0] if out[0] != "??" else sym
            file, _, line = out[1].partition(":")
            return NativeSite(lib.name, Path(file).name, line.split(" ", 1)[0], func)
    return NativeSite(lib.name, "", "", sym)


def pick_site(sites: list[NativeSite], learner: set[str] = frozenset()) -> NativeSite | None:
    """The innermost frame in one of the `learner` source files, else the innermost frame."""
    return next((s for s in sites if s.file in learner), sites[0] if sites else None)


def site_from_note(fault: str, learner: set[str] = frozenset()) -> str:
    """ "allocator.c:42 (in arena_alloc)" from the child's note, or "" when there is none."""
    site = pick_site(native_sites(fault), learner)
    return site.text() if site else ""


def signal_from_note(fault: str) -> int | None:
    m = re.search(r"^native-crash-signal: (\d+)$", fault, re.M)
    return int(m.group(1)) if m else None
