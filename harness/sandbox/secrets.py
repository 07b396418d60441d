"""Keep the hidden-test key and other katas' hidden tests away from learner code.

A sandbox child is forked from the harness, so it starts with copies of everything the harness
holds: the key (``KATA_HIDDEN_KEY`` in ``os.environ`` and in the process's original environment
block, which ``/proc/self/environ`` shows even after ``unsetenv``), the :class:`Key` object,
and the decrypted tests of every kata. Besides masking files (:mod:`.limits`), the sandbox:

- child side (:func:`forget`, before any learner code): wipes the key variables from the
  environment, and has the hidden plugin (:mod:`harness.hidden.forget`, through a hook of
  :mod:`harness.hookspec`) overwrite the key's text and bytes in place and blank the hidden test
  sources of other katas and those of this kata that are already compiled;
- child side, as root (:func:`drop_capabilities`): gives up ``CAP_SYS_PTRACE`` (reading another
  root process's ``/proc/PID/environ`` or ``mem``), ``CAP_SYS_ADMIN`` (unmounting the masks),
  ``CAP_DAC_READ_SEARCH`` (``open_by_handle_at`` around them), ``CAP_SYS_RAWIO`` and
  ``CAP_SYS_MODULE``;
- parent side (:func:`hide_process`): marks the harness process not dumpable, so another
  process of the same (non-root) user cannot read its environment or memory.

What stays: the code of the running kata's hidden tests is in the child (it has to be, to run)
and code it calls can inspect its caller's frames; see docs/integrity.md, "Sandbox".
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from pathlib import Path
from typing import Any

from .limits import SECRET_ENV, load_libc

PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_DAC_READ_SEARCH, CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_PTRACE, CAP_SYS_ADMIN = (
    2,
    16,
    17,
    19,
    21,
)
DROPPED_CAPS = (CAP_DAC_READ_SEARCH, CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_PTRACE, CAP_SYS_ADMIN)


def has_secrets(secret_paths: list[str]) -> bool:
    """Whether this run holds something learner code must not see (a key, a masked file)."""
    return bool(secret_paths) or any(os.environ.get(n) for n in SECRET_ENV)


# --------------------------------------------------------------------------- parent side
def hide_process() -> bool:
    """Make this process's /proc/PID/{environ,mem} unreadable to same-user processes that lack
    CAP_SYS_PTRACE (a side effect: no core dumps, no same-user debugger attach)."""
    if sys.platform != "linux":
        return False
    return load_libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def hide_environment() -> None:
    """Blank the key variables in this process's original environment block, which
    /proc/PID/environ shows to same-user processes even when the process is not dumpable, and
    set them again, so libc's environ (what exec'd workers inherit) and os.environ keep them."""
    values = {n: os.environ[n] for n in SECRET_ENV if os.environ.get(n)}
    if values and _wipe_environ_block(tuple(values)):
        for name, value in values.items():
            os.environ[name] = value  # putenv: a fresh heap copy, not the blanked block


# --------------------------------------------------------------------------- child side
def _zero(address: int, size: int) -> None:
    if size > 0:
        ctypes.memset(address, 0, size)


def wipe_bytes(data: bytes) -> None:
    """Overwrite a bytes object's contents in place (CPython: the buffer follows the header)."""
    n = len(data)
    if n > 1:  # the empty and one-byte objects are shared singletons
        _zero(id(data) + sys.getsizeof(data) - n - 1, n)


def wipe_str(text: str) -> None:
    """Overwrite a str's characters (and its cached UTF-8 copy) in place; for secrets and
    dropped sources only, never for a string still in use."""
    if len(text) < 2:
        return  # possibly a shared singleton, and never a secret
    size = sys.getsizeof(text)
    raw = ctypes.string_at(id(text), size)
    kind = 1 if max(text) < "\u0100" else 2 if max(text) < "\U00010000" else 4
    encodings = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}
    needles = [text.encode(encodings[kind])]
    if kind > 1 or max(text) >= "\x80":
        needles.append(text.encode("utf-8", "surrogatepass"))
    for needle in needles:
        at = raw.find(needle, 16)
        if at >= 0:
            _zero(id(text) + at, len(needle))


def _environ_block() -> tuple[int, int] | None:
    """The start and end of this process's original environment strings (proc(5), stat 50-51)."""
    try:
        stat = Path("/proc/self/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # field 3 onwards
    try:
        start, end = int(fields[47]), int(fields[48])
    except (IndexError, ValueError):
        return None
    return (start, end) if 0 < start < end else None


def wipe_environment() -> None:
    """Remove the key variables from os.environ, libc's environ and /proc/self/environ."""
    data = getattr(os.environ, "_data", {})
    for name in SECRET_ENV:
        for value in (os.environ.get(name), data.get(os.fsencode(name))):
            if isinstance(value, bytes):
                wipe_bytes(value)
            elif isinstance(value, str):
                wipe_str(value)
        os.environ.pop(name, None)  # also unsetenv()s
        posix_environ = getattr(sys.modules.get("posix"), "environ", {})
        posix_environ.pop(os.fsencode(name), None)  # os.environ's source, still importable
    _wipe_environ_block(SECRET_ENV)


def _wipe_environ_block(names: tuple[str, ...]) -> bool:
    """Zero the values of `names` in the original environment block; False if not found."""
    block = _environ_block()
    if block is None:
        return False
    start, end = block
    raw = ctypes.string_at(start, end - start)
    for name in names:
        for m in re.finditer(rb"(?:^|\0)" + re.escape(name.encode()) + rb"=([^\0]*)", raw):
            _zero(start + m.start(1), m.end(1) - m.start(1))
    return True


SCAN_LIMIT = 2 << 30  # bytes of private writable memory scanned at most


def scrub_memory(needles: list[bytes]) -> int:
    """Zero every copy of `needles` in this process's private writable memory (freed heap
    blocks keep their contents). Through /proc/self/mem, so an unmapped page cannot crash us.
    Returns how many copies were overwritten."""
    needles = [n for n in needles if len(n) >= 16]
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
        fd = os.open("/proc/self/mem", os.O_RDWR)
    except OSError:
        return 0
    hits, budget, chunk, overlap = 0, SCAN_LIMIT, 8 << 20, 256
    # The needles are in this memory too: skip them (zeroed, they would match everywhere).
    own = {id(n) + sys.getsizeof(n) - len(n) - 1 for n in needles}
    try:
        for line in maps:
            parts = line.split()
            if len(parts) < 2 or not parts[1].startswith("rw") or parts[1][3] != "p":
                continue
            if len(parts) >= 6 and parts[5] in ("[vvar]", "[vsyscall]"):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            pos = start
            while pos < end and budget > 0:
                n = min(chunk, end - pos)
                try:
                    data = os.pread(fd, n, pos)
                except OSError:
                    break
                budget -= len(data)
                for needle in needles:
                    at = data.find(needle)
                    while at >= 0:
                        if pos + at not in own:
                            os.pwrite(fd, b"\0" * len(needle), pos + at)
                            hits += 1
                        at = data.find(needle, at + 1)
                if len(data) < n:
                    break
                pos += n - overlap if n == chunk else n
    finally:
        os.close(fd)
    for needle in needles[1:]:  # the written forms; the caller wipes the raw key itself
        wipe_bytes(needle)
    return hits


def forget(config: Any, kata_dir: Path) -> None:
    """In a fresh child: wipe the key variables, then have the plugins that hold secrets drop
    those this child will not need (:func:`harness.hookspec.pytest_kata_forget_secrets`)."""
    # A not-dumpable parent's children inherit it, and a non-root process may not then open its
    # own /proc/self/mem for the scrub the hook's implementations do; once they are done
    # nothing secret is left here.
    if sys.platform == "linux":
        load_libc().prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    wipe_environment()
    config.hook.pytest_kata_forget_secrets(config=config, kata_dir=kata_dir)


CAP_NAMES = {"CAP_SYS_ADMIN": CAP_SYS_ADMIN}  # what a manifest may keep (manifest.GRANTABLE_...)
BUNDLE_MAGIC = b"GPUKATAS-HIDDEN 1\n"  # a sealed bundle: ciphertext, useless without the key
# Syscalls a child that keeps CAP_SYS_ADMIN must not make: with it, tracing BPF programs and
# system-wide perf_event_open(2) read other processes' memory (the harness's, holding the key)
# without ptrace's checks, and swapon(2) would write their pages to a file the child can read.
# bpf(2) keeps the commands a cgroup v2 device filter needs (PROG_LOAD, PROG_ATTACH,
# PROG_DETACH, PROG_QUERY): a loaded tracing program is inert without perf_event_open,
# BPF_RAW_TRACEPOINT_OPEN or BPF_LINK_CREATE, and BPF_PROG_TEST_RUN cannot run it.
_SYSCALLS = {"x86_64": (321, 298, 167), "aarch64": (280, 241, 224)}  # bpf, perf_event_open, swapon
_BPF_COMMANDS_KEPT = (5, 8, 9, 16)
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def capability_grant(
    keep: tuple[str, ...], secret_paths: list[str]
) -> tuple[tuple[int, ...], list[str]]:
    """Which of DROPPED_CAPS to drop for a kata whose manifest keeps `keep`, in a run with
    secrets. CAP_SYS_ADMIN can unmount the masks, so it is kept only when every masked file is
    a sealed bundle (the key itself then lives in memory only, where the other drops and a
    seccomp filter keep it out of reach); a key file or plaintext hidden tests on disk refuse
    the grant. Returns (caps to drop, notes)."""
    wanted = {CAP_NAMES[name] for name in keep if name in CAP_NAMES}
    if not wanted:
        return DROPPED_CAPS, []
    readable = [p for p in secret_paths if not _is_bundle(p)]
    if readable:
        return DROPPED_CAPS, [
            f"capability grant refused ({', '.join(keep)}): it could unmount the mask over "
            f"{readable[0]}; grade it from a published bundle with the key in KATA_HIDDEN_KEY"
        ]
    return tuple(c for c in DROPPED_CAPS if c not in wanted), []


def _is_bundle(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(BUNDLE_MAGIC)) == BUNDLE_MAGIC
    except OSError:
        return False


def refuse_syscalls() -> list[str]:
    """Install a seccomp filter that fails perf_event_open(2), swapon(2), bpf(2) but for the
    device-filter commands, and every syscall of another ABI, with EPERM. Returns notes on
    failure."""
    import platform

    machine = platform.machine()
    if sys.platform != "linux" or machine not in _SYSCALLS:
        return [f"syscalls not refused: no seccomp filter for {machine}"]

    class Insn(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                    ("k", ctypes.c_uint32)]  # fmt: skip

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]

    bpf, perf, swapon = _SYSCALLS[machine]
    code = _seccomp_program(_AUDIT_ARCH[machine], bpf, (perf, swapon))
    insns = (Insn * len(code))(*[Insn(*c) for c in code])
    prog = Prog(len(code), insns)
    libc = load_libc()
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return [f"syscalls not refused: no_new_privs: {os.strerror(ctypes.get_errno())}"]
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, MODE_FILTER
        return [f"syscalls not refused: seccomp: {os.strerror(ctypes.get_errno())}"]
    return []


def _seccomp_program(
    arch: int, bpf: int, refused: tuple[int, ...]
) -> list[tuple[int, int, int, int]]:
    """Classic BPF over struct seccomp_data {nr, arch, ip, args[6]}: (code, jt, jf, k) each;
    jumps go forward only, relative to the next instruction."""
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, RET|K
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    kept = _BPF_COMMANDS_KEPT
    m, n = len(kept), len(refused)
    allow_at = 9 + m + n  # the two returns at the end
    deny_at = allow_at + 1

    def to(target: int, at: int) -> int:
        return target - at - 1

    code = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, deny), (ld, 0, 0, 0)]
    code.append((jge, to(deny_at, 4), 0, 0x40000000))  # x32 syscall numbers: deny
    code.append((jeq, 0, m + 2, bpf))  # 5: bpf falls into its command checks
    code.append((ld, 0, 0, 16))  # 6: args[0], low 32 bits (little-endian)
    code += [(jeq, to(allow_at, 7 + i), 0, cmd) for i, cmd in enumerate(kept)]
    code.append((ret, 0, 0, deny))  # 7 + m: another bpf command
    code.append((ld, 0, 0, 0))  # 8 + m: the syscall number again
    code += [(jeq, to(deny_at, 9 + m + i), 0, nr) for i, nr in enumerate(refused)]
    code += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    assert len(code) == deny_at + 1
    return code


def drop_capabilities(caps: tuple[int, ...] = DROPPED_CAPS) -> list[str]:
    """Give up `caps` (bounding, effective, permitted, inheritable). Returns notes on failure."""
    if sys.platform != "linux":
        return []
    libc = load_libc()
    for cap in caps:
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: capset still runs
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable} words
    if libc.capget(header, data) != 0:
        return [f"capabilities not dropped: capget: {os.strerror(ctypes.get_errno())}"]
    mask = ~sum(1 << c for c in caps) & 0xFFFFFFFF
    for i in range(3):
        data[i] &= mask
    if libc.capset(header, data) != 0:
        return [f"capabilities not dropped: capset: {os.strerror(ctypes.get_errno())}"]
    return []


__all__ = [
    "DROPPED_CAPS",
    "capability_grant",
    "refuse_syscalls",
    "drop_capabilities",
    "forget",
    "has_secrets",
    "hide_environment",
    "hide_process",
    "wipe_bytes",
    "wipe_environment",
    "wipe_str",
]
