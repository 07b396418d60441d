"""Fixtures of the anti-tamper tests: your guard.c built with the given main.c and sha256.c and a
secrets.h of the tests' own (fresh secrets every run), sealed with tamper.py, and run as a
program in child processes with bounded time: plain, patched byte by byte, under tracers, or as
a server that answers line by line."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import hmac
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.loader import KataLoadError
from harness.native.build import build_executable
from harness.testing import random_for

ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
RUN_TIMEOUT = 20.0  # seconds for one run of the program (it answers in milliseconds)
EXIT_TAMPERED = 3
EXIT_TODO = 99


class GuardCrash(AssertionError):  # noqa: N818 - a crash, not an "Error"
    """The unchanged program died of a signal: a crash of the C code. The test fails with the
    sentence and no gate trips (`kata_learner_crash`: an honest mistake, not a dodge)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.kata_learner_crash = message.splitlines()[0]


class Precondition(AssertionError):  # noqa: N818 - a missing precondition, not an "Error"
    """The unchanged program does not answer right, so an attack on it proves nothing: the test
    fails with the sentence, and no gate trips (an honest mistake the other tests name)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.kata_learner_crash = message.splitlines()[0]


def fresh_secrets(key: str, count: int = 3) -> list[bytes]:
    """`count` secrets of 20..40 letters and digits from the run seed (no byte 4 times in a row)."""
    rnd = random_for(key)
    out: list[bytes] = []
    while len(out) < count:
        s = bytes(rnd.choice(ALPHABET) for _ in range(rnd.randint(20, 40)))
        if not any(s[i] == s[i + 1] == s[i + 2] == s[i + 3] for i in range(len(s) - 3)):
            out.append(s)
    return out


@dataclass
class Run:
    """One run of the program: what it wrote and how it ended."""

    args: tuple[str, ...]
    returncode: int | None  # None: killed after the time limit
    stdout: str
    stderr: str

    @property
    def signal(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            return signal.Signals(-self.returncode).name
        return None

    def todo(self, *functions: str) -> None:
        """KataTodo when the program stopped at (or skipped) a stub of one of `functions`."""
        for line in self.stderr.splitlines():
            if line.startswith("KATA_TODO ") and line.split()[1] in functions:
                if self.returncode == EXIT_TODO or "(skipped)" in line:
                    from harness import todo

                    todo(f"{line.split()[1]} answered GUARD_TODO")

    def describe(self) -> str:
        end = (
            "was killed after the time limit"
            if self.returncode is None
            else f"died of {self.signal}"
            if self.signal
            else f"exited with status {self.returncode}"
        )
        tail = "\n".join(self.stderr.strip().splitlines()[-6:])
        return f"`guard {' '.join(self.args)}` {end}; stdout {self.stdout[:200]!r}; stderr:\n{tail}"

    def must_not_crash(self, how: str = "the unchanged program") -> None:
        if self.signal:
            raise GuardCrash(f"{how} died of {self.signal}\n{self.describe()}")


class Program:
    """A built and sealed program, its secrets, and ways to run it."""

    def __init__(self, path: Path, secrets: list[bytes], tamper: Any, tmp: Path) -> None:
        self.path = path
        self.secrets = secrets
        self.tamper = tamper
        self.tmp = tmp
        self.data = path.read_bytes()
        self.elf = tamper.Elf(self.data)
        self.count = 0

    def answer(self, index: int, challenge: bytes) -> str:
        """The oracle: HMAC-SHA256(secret[index], challenge) in hex."""
        return hmac.new(self.secrets[index], challenge, hashlib.sha256).hexdigest()

    def baseline(self, index: int, challenge: bytes, *todo: str) -> str:
        """The unchanged program's answer, which must be right before an attack means anything;
        KataTodo for a stub of `todo`, Precondition (never a gate) when it is wrong."""
        run = self.ask(index, challenge)
        run.todo(*todo, "guard_secret")
        run.must_not_crash()
        want = self.answer(index, challenge)
        if run.returncode != 0 or run.stdout.strip() != want:
            raise Precondition(
                f"the unchanged program does not answer secret {index} right, so the attack "
                f"proves nothing: {run.describe()}"
            )
        return want

    def checks_pass(self, index: int, challenge: bytes, *todo: str) -> None:
        """The unchanged program, untraced, gets past its checks: it answers right, or stops at
        a guard_secret stub after them. KataTodo for a stub of `todo`; GuardCrash or
        Precondition (never a gate) otherwise."""
        run = self.ask(index, challenge)
        run.todo(*todo)
        run.must_not_crash()
        if run.returncode == EXIT_TODO:
            if any(s.startswith("KATA_TODO guard_secret") for s in run.stderr.splitlines()):
                return
            run.todo("guard_secret", "guard_fail")
        if run.returncode != 0 or run.stdout.strip() != self.answer(index, challenge):
            raise Precondition(
                f"the unchanged program does not answer secret {index} right without a tracer, "
                f"so a run under a tracer proves nothing: {run.describe()}"
            )

    def functions(self) -> dict[str, Any]:
        return self.elf.functions()

    def patched(self, changes: dict[int, int] | Sequence[tuple[int, bytes]]) -> Path:
        """A copy of the program with bytes changed: {file offset: XOR mask} or [(offset, new
        bytes)]. The copy keeps the seal of the unchanged program."""
        data = bytearray(self.data)
        if isinstance(changes, dict):
            for off, mask in changes.items():
                data[off] ^= mask
        else:
            for off, new in changes:
                data[off : off + len(new)] = new
        self.count += 1
        out = self.tmp / f"patched{self.count}"
        out.write_bytes(bytes(data))
        out.chmod(0o755)
        return out

    def run(
        self, *args: str, exe: Path | None = None, wrapper: Sequence[str] = (),
        timeout: float = RUN_TIMEOUT, input: str | None = None,
    ) -> Run:  # fmt: skip
        """Run the program (or `exe`, a patched copy) with `args`, under `wrapper` if any."""
        cmd = [*wrapper, str(exe or self.path), *args]
        try:
            p = subprocess.run(
                cmd, input=input, capture_output=True, text=True, timeout=timeout,
                env=child_env(), check=False, errors="replace",
            )  # fmt: skip
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else ""
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else ""
            return Run(tuple(args), None, out or "", err or "")
        return Run(tuple(args), p.returncode, p.stdout, p.stderr)

    def ask(self, index: int, challenge: bytes, **kw: Any) -> Run:
        return self.run(str(index), challenge.hex(), **kw)

    @contextlib.contextmanager
    def serve(
        self, exe: Path | None = None, nofile: int = 0, core: bool = False
    ) -> Iterator[Server]:
        """The program in --serve mode: server.ask(line) -> its answer line; with `nofile`, at
        most that many open files (RLIMIT_NOFILE); with `core`, started with core files
        allowed (RLIMIT_CORE CORE_LIMIT, where this process may set it: core_limit_settable)."""

        def limit() -> None:
            import resource

            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            if core:
                allow_core()

        p = subprocess.Popen(
            [str(exe or self.path), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=child_env(), bufsize=0,
            preexec_fn=limit if nofile or core else None,
        )  # fmt: skip
        server = Server(p)
        try:
            yield server
        finally:
            with contextlib.suppress(Exception):
                p.kill()
            with contextlib.suppress(Exception):
                p.communicate(timeout=RUN_TIMEOUT)


class Server:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid

    def poke(self, file_offset: int, mask: int) -> None:
        """XOR the byte of the running program's code that `file_offset` maps to with `mask`
        (main.c's "poke": through /proc/self/mem, as a debugger plants a breakpoint)."""
        got = self.ask(f"poke {file_offset:x} {mask:x}")
        assert got == "poked", f"main.c's poke {file_offset:#x} answered {got!r}"

    def attach(self, required: bool = True) -> bool:
        """A tracer attaches to the running program now (main.c's "attach": PTRACE_SEIZE by a
        child of the program, which stays attached until the program ends). Where the machine
        allows no ptrace at all: a skip, or with `required=False`, False."""
        got = self.ask("attach")
        if got == "attach failed":
            assert not seize_allowed(), (
                "main.c's attach could not PTRACE_SEIZE the running program, though this "
                "machine lets a process trace its child: the program refuses ptrace itself (a "
                "seccomp filter or a prctl of guard.c's), so a tracer that attaches later is "
                "never seen by the tests; a real debugger attaches from outside the process"
            )
            if required:
                pytest.skip("ptrace(PTRACE_SEIZE) is not allowed on this machine")
            return False
        assert got == "attached", f"main.c's attach answered {got!r}"
        return True

    def ask(self, line: str, timeout: float = RUN_TIMEOUT) -> str | None:
        """Send one request line; its answer line, or None when the program ended first. A
        probe of main.c's (probe, scan, poke, attach) is refused when the program put a seccomp
        filter of its own on its system calls: the answers of raw system calls are then the
        filter's, not the kernel's."""
        if line.split(" ", 1)[0] in ("probe", "scan", "poke", "attach"):
            added = seccomp_filters(self.pid) - seccomp_filters(os.getpid())
            assert added <= 0, (
                f"the program runs under {added} seccomp filter(s) it installed itself "
                f"(/proc/{self.pid}/status): main.c's {line.split()[0]!r} probe uses raw "
                f"system calls, whose answers a filter can replace, so it cannot be trusted"
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        buf = b""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the program in --serve mode did not answer {line!r} in time")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    return None
                buf += chunk
        return buf.decode(errors="replace").strip()

    def finish(self) -> Run:
        """Close stdin and wait: how it ended, and what it wrote after the last answer."""
        try:
            out, err = self.proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            return Run(
                ("--serve",), None, out.decode(errors="replace"), err.decode(errors="replace")
            )
        return Run(
            ("--serve",), self.proc.returncode, out.decode(errors="replace"),
            err.decode(errors="replace"),
        )  # fmt: skip


def seccomp_filters(pid: int) -> int:
    """How many seccomp filters process `pid` runs under (`Seccomp_filters:`, Linux 5.9+; 1
    for any filter mode where the count is not shown); 0 when it has ended."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if "Seccomp_filters" in fields:
        return int(fields["Seccomp_filters"].strip() or 0)
    return 1 if fields.get("Seccomp", "0").strip() == "2" else 0


# The core limit the program starts with where the tests can set it: above 0, so a guard_harden
# that never lowers it is seen, yet no core file is ever written (the kernel writes none below a
# page, and 1 is its "never" for a piped core_pattern).
CORE_LIMIT = 1


def allow_core() -> None:
    """Between fork and exec: RLIMIT_CORE to CORE_LIMIT (soft and hard), where allowed (raising
    a hard limit of 0 needs CAP_SYS_RESOURCE)."""
    import resource

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (CORE_LIMIT, CORE_LIMIT))


def core_limit_settable() -> bool:
    """Whether a program started by these tests can get a core limit above 0 (the machine's
    hard limit, or the privilege to raise it)."""
    try:
        limits = subprocess.run(
            ["cat", "/proc/self/limits"], capture_output=True, text=True, timeout=RUN_TIMEOUT,
            preexec_fn=allow_core, check=False,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    core = [s.split() for s in limits.splitlines() if s.startswith("Max core file size")]
    return bool(core) and core[0][4] == str(CORE_LIMIT)


def seize_allowed() -> bool:
    """Whether this machine lets a process PTRACE_SEIZE its own child (Yama, seccomp, a
    container's policy): a child of this test process, not of the program under test."""
    libc = _libc()
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=child_env())
    try:
        return libc.ptrace(PTRACE_SEIZE, p.pid, None, None) == 0
    finally:
        p.kill()
        p.wait()


def child_env() -> dict[str, str]:
    """The environment of the program: the tests' own, without preloads or debugger settings."""
    drop = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT")
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="module")
def program(kata: Any, tmp_path_factory: pytest.TempPathFactory) -> Program:
    """Your guard.c + main.c + sha256.c, with a fresh secrets.h, built (-O2 -g) and sealed."""
    tamper = kata.module("tamper")
    for d in kata.search_path:
        if (Path(d) / "secrets.h").exists():  # the sources do not load as the tests build them
            raise KataLoadError(
                f"{Path(d) / 'secrets.h'} would hide the tests' own secrets.h (guard.c's "
                f'#include "secrets.h" finds the one beside it first): delete it; '
                f"`python3 tamper.py build` keeps its secrets.h in a temporary directory"
            )
    tmp = tmp_path_factory.mktemp("anti-tamper")
    secrets = fresh_secrets(f"anti-tamper secrets {tmp.name}")
    (tmp / "inc").mkdir()
    (tmp / "inc" / "secrets.h").write_text(tamper.secrets_header(secrets))
    built = build_executable(
        [kata.source("main.c"), kata.source("guard.c"), kata.source("sha256.c")],
        include_dirs=[tmp / "inc", *kata.search_path],
    ).path
    exe = tmp / "guard"
    shutil.copyfile(built, exe)
    exe.chmod(0o755)
    tamper.seal(exe)
    return Program(exe, secrets, tamper, tmp)


@pytest.fixture
def challenge(kata_random: Any) -> bytes:
    """A fresh challenge: 8..48 random bytes."""
    return bytes(kata_random.getrandbits(8) for _ in range(kata_random.randint(8, 48)))


def need_tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} is not installed on this machine")
    return path


def gdb_run(program: Program, *args: str, exe: Path | None = None) -> Run:
    """Run the program under `gdb -batch` (gdb starts it as its tracee)."""
    gdb = need_tool("gdb")
    run = program.run(
        *args,
        exe=exe,
        wrapper=[gdb, "-nx", "-batch", "-ex", "run", "-ex", "info inferiors", "--args"],
    )
    skip_if_ptrace_refused(run, "gdb")
    return run


def strace_run(program: Program, *args: str) -> Run:
    """Run the program under `strace -f` (strace starts it as its tracee)."""
    strace = need_tool("strace")
    run = program.run(*args, wrapper=[strace, "-f", "-qq", "-o", "/dev/null"])
    skip_if_ptrace_refused(run, "strace")
    return run


def gdb_exit_status(run: Run) -> int | None:
    """The inferior's exit status as gdb reports it ("exited with code 03", "exited normally");
    GuardCrash when gdb says it died of a signal."""
    for line in run.stdout.splitlines() + run.stderr.splitlines():
        if "terminated with signal" in line or "received signal SIG" in line:
            raise GuardCrash(f"the program died under gdb: {line.strip()}\n{run.describe()}")
        if "exited normally" in line:
            return 0
        if "exited with code" in line:
            return int(line.rsplit("code", 1)[1].strip(" ]"), 8)
    return None


def refused(run: Run, check: str) -> bool:
    """A refusal: a nonzero exit (or the time limit), no answer on stdout, the check named on
    stderr (by your guard_fail, or by main.c when guard_fail is still a stub)."""
    return run.returncode != 0 and not run.stdout.strip() and check in run.stderr


PTRACE_TRACEME, PTRACE_CONT, PTRACE_SEIZE = 0, 7, 0x4206
EM_X86_64, EM_AARCH64 = 62, 183
RET = {EM_X86_64: b"\xc3", EM_AARCH64: bytes.fromhex("c0035fd6")}
RETURN_ZERO = {  # xor eax, eax; ret / mov w0, #0; ret
    EM_X86_64: b"\x31\xc0\xc3",
    EM_AARCH64: bytes.fromhex("00008052c0035fd6"),
}


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    return libc


# The tracee asks to be traced by its parent (this test process), then execs the program: no
# ctypes between fork and exec in a process that may have threads.
TRACEME_EXEC = (
    "import ctypes, os, sys\n"
    "if ctypes.CDLL(None).ptrace(0, 0, None, None) != 0: sys.exit(77)\n"
    "os.execv(sys.argv[1], sys.argv[1:])"
)
TRACEME_REFUSED = 77


def skip_if_ptrace_refused(run: Run, tracer: str) -> None:
    """Skip (with the reason) when the machine refused the tracer itself: Yama's ptrace_scope 2
    or 3, a seccomp filter, a container without ptrace. The program never ran traced."""
    text = run.stdout + run.stderr
    if re.search(r"\b[0-9a-f]{64}\b", run.stdout) or "exited" in text:
        return  # the program ran (and answered, or gdb saw it exit): not a refused tracer
    if "ptrace" in text.lower() and ("Operation not permitted" in text or "EPERM" in text):
        line = next(s for s in text.splitlines() if "ptrace" in s.lower())
        pytest.skip(f"this machine does not let {tracer} trace a program: {line.strip()}")


def ptrace_run(program: Program, *args: str, timeout: float = RUN_TIMEOUT) -> Run:
    """Run the program as the tracee of this test process (PTRACE_TRACEME before exec): a tracer
    that is neither gdb nor strace."""
    libc = _libc()
    p = subprocess.Popen(
        [sys.executable, "-c", TRACEME_EXEC, str(program.path), *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=child_env(),
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    status = None
    while status is None:
        pid, st = os.waitpid(p.pid, os.WNOHANG)
        if pid == 0:
            if time.monotonic() > deadline:
                p.kill()
                os.waitpid(p.pid, 0)
                break
            time.sleep(0.001)
        elif os.WIFSTOPPED(st):
            sig = os.WSTOPSIG(st)
            libc.ptrace(PTRACE_CONT, p.pid, None, None if sig == signal.SIGTRAP else sig)
        else:
            status = st
    assert p.stdout is not None and p.stderr is not None
    out, err = p.stdout.read().decode(errors="replace"), p.stderr.read().decode(errors="replace")
    p.stdout.close()
    p.stderr.close()
    p.returncode = 0  # reaped here: keep Popen from waiting again
    code = None if status is None else os.waitstatus_to_exitcode(status)
    if code == TRACEME_REFUSED and not out:
        pytest.skip("this machine does not let a process ask to be traced (PTRACE_TRACEME failed)")
    return Run(tuple(args), code, out, err)


@pytest.fixture(scope="session")
def tools() -> Any:
    """The helpers of these tests, for public and hidden tests alike: tools.refused(run, check),
    tools.need_tool(name), tools.gdb_run(program, *args), tools.gdb_exit_status(run),
    tools.strace_run(program, *args), tools.ptrace_run(program, *args), tools.EXIT_TAMPERED, tools.EXIT_TODO."""
    import types

    return types.SimpleNamespace(
        refused=refused, need_tool=need_tool, gdb_run=gdb_run, gdb_exit_status=gdb_exit_status,
        ptrace_run=ptrace_run, strace_run=strace_run, libc=_libc, EXIT_TAMPERED=EXIT_TAMPERED, EXIT_TODO=EXIT_TODO,
        core_limit_settable=core_limit_settable, CORE_LIMIT=CORE_LIMIT,
        GuardCrash=GuardCrash, Run=Run, Precondition=Precondition, RET=RET,
        RETURN_ZERO=RETURN_ZERO,
    )  # fmt: skip
