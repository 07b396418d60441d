"""Readable sentences for the ways a sandbox child can end badly.

"your code was killed by SIGSEGV (segmentation fault) in calc.py line 3 (in add)",
"exceeded 10 s wall time", "tried to use 8.00 GiB, limit 2 GiB".
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

from ..layout import in_mirror

_SIGNALS = {
    signal.SIGSEGV: "segmentation fault: a read or write through a bad pointer",
    signal.SIGBUS: "bus error: a misaligned or out-of-range memory access",
    signal.SIGABRT: "aborted: abort() was called, e.g. by a failed C assert or a corrupted heap",
    signal.SIGFPE: "arithmetic error, e.g. an integer division by zero",
    signal.SIGILL: "illegal instruction",
    signal.SIGKILL: "killed",
    signal.SIGTERM: "terminated",
    signal.SIGPIPE: "wrote to a closed pipe",
}


def gib(n_bytes: float) -> str:
    if n_bytes >= 1 << 30:
        return f"{n_bytes / (1 << 30):.3g} GiB"
    return f"{n_bytes / (1 << 20):.3g} MiB"


def limit_text(memory_mb: int) -> str:
    return gib(memory_mb << 20)


def timeout(wall_s: float, why: str = "the kata's time_limit", where: str = "") -> str:
    at = f" in {where}" if where else ""
    from ..hangs import seconds_text

    return f"exceeded {seconds_text(wall_s)} s wall time ({why}){at}; the test was stopped"


def memory(memory_mb: int, requested: str | None = None, peak: int | None = None) -> str:
    if requested:
        return f"tried to use {requested}, limit {limit_text(memory_mb)} (memory_limit_mb)"
    if peak:
        return (
            f"tried to use more than {gib(peak)}, limit {limit_text(memory_mb)} "
            "(memory_limit_mb): killed by the out-of-memory killer"
        )
    return f"tried to use more memory than the limit of {limit_text(memory_mb)} (memory_limit_mb)"


_NUMPY_ALLOC = re.compile(r"Unable to allocate ([\d.]+ [KMGTP]i?B)")


def requested_from(text: str) -> str | None:
    """The size a failed allocation asked for, when the error says (numpy does)."""
    m = _NUMPY_ALLOC.search(text)
    return m.group(1) if m else None


# faulthandler: '  File "/x/katas/phase01/demo/calc.py", line 3 in add'
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)', re.M)


def crash_site(fault_text: str, kata_dir: Path | None, native: str = "") -> str:
    """Where the crash happened, from the native handler's note or faulthandler's traceback.

    The innermost frame in the kata's files is named; a crash in C code loaded by Python names
    the C function and file first (`native`), then the Python line that called it.
    """
    where = []
    if native:
        where.append(native)
    for m in _FRAME.finditer(fault_text):  # most recent call first
        path = Path(m["file"])
        if kata_dir is not None and (kata_dir in path.parents or in_mirror(path, kata_dir)):
            where.append(f"{path.name} line {m['line']} (in {m['func']})")
            break
    if not where:
        return ""
    return " in " + ", called from ".join(where)


def killed(signum: int, site: str = "") -> str:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return f"your code was killed by signal {signum}{site}"
    if signum == signal.SIGXCPU:
        return f"your code was killed by SIGXCPU: it used up its CPU-time limit{site}"
    if signum == signal.SIGXFSZ:
        return (
            f"your code was killed by SIGXFSZ: it wrote more than the 64 MiB limit on output "
            f"and file size{site}"
        )
    what = _SIGNALS.get(signal.Signals(signum), name)
    return f"your code was killed by {name} ({what}){site}"


def exited(status: int) -> str:
    return (
        f"your code ended the test process (exit status {status}) before the test finished: "
        "os._exit() or exit() called from Python or C?"
    )
