"""Run native learner code in a fresh Python process.

Two reasons: a segfault in learner code must fail one test, not kill the pytest worker; and an
ASan-instrumented library can only be loaded by a process that started with the ASan runtime
(`LD_PRELOAD=$(gcc -print-file-name=libasan.so)`), which the pytest process did not.

`run_isolated(func, *args)` pickles the arguments, imports `func`'s module by file path in a
child interpreter, calls it, and pickles the result (or the exception) back.
"""

from __future__ import annotations

import functools
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from harness import hangs
from harness.faults import NativeFault
from harness.native.diagnostics import trim_sanitizer_report
from harness.toolchain import find_tool

__all__ = [
    "NativeCrash",
    "NativeTimeout",
    "asan_runtime",
    "run_isolated",
    "sanitizer_env",
    "tsan_runtime",
]

_HARNESS_PARENT = str(Path(__file__).resolve().parents[2])  # so the child can import harness


class NativeCrash(NativeFault):
    """The child died (signal, sanitizer abort, timeout) before returning a result.

    `str(err)` is short feedback (the sanitizer's headline and first frames, or the signal);
    `stderr`/`stdout` hold everything the child printed.
    """

    def __init__(
        self, message: str, *, returncode: int | None, stdout: str = "", stderr: str = ""
    ) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    @property
    def signal(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


class NativeTimeout(NativeCrash, hangs.Overrun):
    """The child did not finish within its timeout (cut to the test's time left)."""


@functools.cache
def _runtime(compiler: str, libname: str) -> Path | None:
    cc = find_tool(compiler)
    if cc is None:
        return None
    proc = subprocess.run(
        [str(cc), f"-print-file-name={libname}"], capture_output=True, text=True, check=False
    )
    path = Path(proc.stdout.strip())
    # gcc echoes the bare name back when it has no such runtime.
    return path.resolve() if path.is_absolute() and path.exists() else None


def asan_runtime(compiler: str = "cc") -> Path | None:
    """Path of the compiler's shared ASan runtime (libasan.so), or None."""
    return _runtime(compiler, "libasan.so")


def tsan_runtime(compiler: str = "cxx") -> Path | None:
    """Path of the compiler's shared ThreadSanitizer runtime (libtsan.so), or None."""
    return _runtime(compiler, "libtsan.so")


def sanitizer_env(
    sanitize: Iterable[str] | str | None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment for a *Python* process that will load libraries built with `sanitize`.

    ASan: preload the runtime, keep going past CPython's own allocations at exit
    (detect_leaks=0: the interpreter never frees everything, so LSan would only report noise;
    check leaks with a C driver from build_executable instead). UBSan: print a stack trace.
    """
    env = dict(os.environ if base is None else base)
    names = set(sanitize.split(",") if isinstance(sanitize, str) else (sanitize or ()))
    names.discard("")
    if "address" in names:
        runtime = asan_runtime()
        if runtime is None:
            raise RuntimeError("sanitize=address needs gcc's libasan (apt-get install -y gcc)")
        preload = [str(runtime), *filter(None, env.get("LD_PRELOAD", "").split(":"))]
        env["LD_PRELOAD"] = ":".join(preload)
        env["ASAN_OPTIONS"] = env.get(
            "ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0:halt_on_error=1:exitcode=86"
        )
    if "undefined" in names:
        env["UBSAN_OPTIONS"] = env.get("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    return env


def _func_location(func: Callable[..., Any]) -> tuple[str, str]:
    qualname = getattr(func, "__qualname__", "")
    filename = getattr(getattr(func, "__code__", None), "co_filename", "")
    if not filename or "<locals>" in qualname or not Path(filename).is_file():
        raise TypeError(
            f"run_isolated needs a module-level function defined in a file, not {func!r}"
        )
    return filename, qualname


def run_isolated(
    func: Callable[..., Any],
    *args: Any,
    sanitize: Iterable[str] | str | None = (),
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    root: Path | None = None,
    **kwargs: Any,
) -> Any:
    """Call `func(*args, **kwargs)` in a child interpreter and return its result.

    `func` must be a module-level function in a file (its module is imported afresh in the
    child); arguments and result must pickle (BuildResult does). An exception raised by `func`
    is re-raised here with the child's traceback as a note; a crash raises NativeCrash, with
    sanitizer reports trimmed and paths shown relative to `root`.
    """
    filename, qualname = _func_location(func)
    builds = sorted(str(a.path) for a in (*args, *kwargs.values()) if hasattr(a, "sanitize"))
    key = f"isolated:{filename}:{qualname}:{':'.join(builds)}"
    with hangs.running(hangs.NATIVE, key, f"{qualname}()"):
        return _run_isolated(
            filename, qualname, args, kwargs, sanitize, hangs.launch_limit(timeout), env, root
        )


def _run_isolated(
    filename: str,
    qualname: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    sanitize: Iterable[str] | str | None,
    timeout: float,
    env: Mapping[str, str] | None,
    root: Path | None,
) -> Any:
    child_env = sanitizer_env(sanitize, env)
    child_env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [_HARNESS_PARENT, child_env.get("PYTHONPATH", "")])
    )
    child_env["PYTHONDONTWRITEBYTECODE"] = "1"  # never leave .pyc of (hidden) tests behind
    with tempfile.TemporaryDirectory(prefix="kata-isolate-") as tmp:
        request = Path(tmp) / "request.pkl"
        result = Path(tmp) / "result.pkl"
        request.write_bytes(pickle.dumps((filename, qualname, args, kwargs)))
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "harness.native._child", str(request), str(result)],
                capture_output=True,
                text=True,
                env=child_env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            raise NativeTimeout(
                f"{qualname} did not finish within {timeout:.3g} s",
                returncode=None,
                stdout=out,
                stderr=err,
            ) from None
        if result.exists() and proc.returncode == 0:
            status, payload, child_tb = pickle.loads(result.read_bytes())
            if status == "ok":
                return payload
            if isinstance(payload, BaseException):
                payload.add_note("in the isolated child process:\n" + child_tb)
                raise payload
            raise RuntimeError(f"{qualname} failed in the isolated child:\n{child_tb}")
    raise NativeCrash(
        _crash_message(qualname, proc.returncode, proc.stderr, root),
        returncode=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
    )


def _crash_message(qualname: str, returncode: int, stderr: str, root: Path | None) -> str:
    report = trim_sanitizer_report(stderr, root=root)
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        head = f"{qualname} crashed ({name})"
    else:
        head = f"{qualname} exited with status {returncode} before returning"
    return f"{head}\n{report}" if report else head
