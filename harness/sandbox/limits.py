"""The walls around a sandbox child: rlimits, cgroups, a network namespace, masked secrets.

Everything here is best effort and says what it could not do (:func:`isolation_notes`), so a run
on a laptop without root still works, with the report naming what was not isolated.

Parent side: :class:`Cgroup` (memory and process limits a learner's fork bomb cannot escape, and
a list of every process to kill). Child side: :func:`enter_child` right after ``fork()``, before
any learner code is imported.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import resource
import signal
import socket
import stat
import struct
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_REC, MS_PRIVATE, MS_BIND, MS_RDONLY = 0x4000, 0x40000, 0x1000, 0x1
PR_SET_PDEATHSIG = 1
OUTPUT_LIMIT = 64 << 20  # bytes any one file (captured output included) may grow to
PIDS_LIMIT = 64  # processes and threads in one sandbox (the child, gcc, a few of the learner's)
SECRET_ENV = ("KATA_HIDDEN_KEY", "KATA_HIDDEN_KEY_FILE")  # never visible to learner code


@dataclass(frozen=True)
class Limits:
    """What one child may use; wall time is enforced by the parent, not here."""

    wall_s: float
    memory_mb: int
    cpu_s: float
    address_space: bool = True  # RLIMIT_AS; off for ASan (it reserves terabytes of shadow)
    network: bool = False  # True: leave the network alone (debugging only)


@cache
def load_libc() -> ctypes.CDLL:
    """The C library, for the prctl/capset/mount calls Python does not wrap."""
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


# --------------------------------------------------------------------------- cgroups (parent)
_V1 = Path("/sys/fs/cgroup")


def _own_cgroup(controller: str) -> Path | None:
    """This process's cgroup directory for `controller` (v1), or the unified one (v2: "")."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, rel = line.split(":", 2)
        if controller and controller in names.split(","):
            return _V1 / controller / rel.lstrip("/")
        if not controller and names == "" and (_V1 / "cgroup.controllers").is_file():
            return _V1 / rel.lstrip("/")
    return None


class Cgroup:
    """Memory and pids cgroups for one child (v1 controllers, or v2 unified), where writable."""

    def __init__(self, name: str, memory_mb: int) -> None:
        self.dirs: dict[str, Path] = {}
        self.problems: list[str] = []
        limit = memory_mb << 20
        for controller, files in (
            ("memory", {"memory.limit_in_bytes": limit}),
            ("pids", {"pids.max": PIDS_LIMIT}),
        ):
            base = _own_cgroup(controller)
            if base is None:
                continue
            self._make(controller, base / name, files)
        if not self.dirs:
            base = _own_cgroup("")
            if base is not None:
                self._make("unified", base / name, {"memory.max": limit, "pids.max": PIDS_LIMIT})

    def _make(self, key: str, path: Path, files: dict[str, int]) -> None:
        try:
            path.mkdir(exist_ok=True)
            for f, value in files.items():
                (path / f).write_text(str(value))
            self.dirs[key] = path
        except OSError as e:
            self.problems.append(f"{key} cgroup: {e.strerror or e}")
            try:
                path.rmdir()
            except OSError:
                pass

    @property
    def limits_pids(self) -> bool:
        return "pids" in self.dirs or "unified" in self.dirs

    def join(self, pid: int) -> None:
        for path in self.dirs.values():
            try:
                (path / "cgroup.procs").write_text(str(pid))
            except OSError as e:
                self.problems.append(f"{path}: {e.strerror or e}")

    def pids(self) -> list[int]:
        out: set[int] = set()
        for path in self.dirs.values():
            try:
                out |= {int(p) for p in (path / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return sorted(out)

    def oom_killed(self) -> bool:
        """Did the kernel's OOM killer act in this cgroup (the memory limit was hit)?"""
        mem = self.dirs.get("memory")
        if mem is not None:
            try:
                return int((mem / "memory.failcnt").read_text()) > 0
            except (OSError, ValueError):
                return False
        uni = self.dirs.get("unified")
        if uni is not None:
            try:
                events = dict(
                    line.split() for line in (uni / "memory.events").read_text().splitlines()
                )
                return int(events.get("oom_kill", 0)) > 0
            except (OSError, ValueError):
                return False
        return False

    def peak_bytes(self) -> int | None:
        for key, f in (("memory", "memory.max_usage_in_bytes"), ("unified", "memory.peak")):
            if key in self.dirs:
                try:
                    return int((self.dirs[key] / f).read_text())
                except (OSError, ValueError):
                    return None
        return None

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroups until none is left (a fork bomb races us)."""
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def remove(self) -> None:
        for path in self.dirs.values():
            try:
                path.rmdir()
            except OSError:
                pass  # a zombie not reaped yet; the kernel frees it when the last one goes


def kill_group(pid: int, cgroup: Cgroup | None) -> None:
    """Kill the child, its process group and everything in its cgroups."""
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if cgroup is not None:
        cgroup.kill_all()


# --------------------------------------------------------------------------- child side
def _set(limit: int, soft: int, hard: int | None = None) -> None:
    cur_soft, cur_hard = resource.getrlimit(limit)
    hard = cur_hard if hard is None else hard
    if cur_hard != resource.RLIM_INFINITY:
        hard = min(hard, cur_hard)
        soft = min(soft, hard)
    try:
        resource.setrlimit(limit, (soft, hard))
    except (ValueError, OSError):
        pass


def _vsize() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def set_cpu_budget(seconds: float) -> None:
    """Allow `seconds` more CPU time from now (per test: a reused child carries its usage)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    soft = int(spent + seconds) + 1
    _set(resource.RLIMIT_CPU, soft, resource.RLIM_INFINITY)


def _bring_up_loopback() -> None:
    """A fresh network namespace has `lo` down; bring it up so localhost works inside."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, siocgifflags, ifreq)[:18])[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH", b"lo", flags | iff_up))


def _isolate_network_and_mounts(secrets: list[str]) -> list[str]:
    """New network (and mount) namespace; masks secret files with /dev/null. Returns notes."""
    libc = load_libc()
    notes = []
    if libc.unshare(CLONE_NEWNET | CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        if libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            return [f"no network namespace ({os.strerror(err)}): network not isolated"]
        notes.append(f"no mount namespace ({os.strerror(err)}): secret files not masked")
        secrets = []
    try:
        _bring_up_loopback()
    except OSError:
        pass
    if secrets:
        libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
        for path in secrets:
            if os.path.exists(path):
                if libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None) != 0:
                    notes.append(f"could not mask {path}: {os.strerror(ctypes.get_errno())}")
    return notes


def _scrub_environment() -> None:
    for name in SECRET_ENV:
        os.environ.pop(name, None)  # os.environ.pop also unsetenv()s


def close_inherited_fds(keep: set[int]) -> None:
    """Close inherited pipes and sockets (an xdist worker's channel to its controller, say), so
    learner code has no way to talk to the harness but the ones the harness reads with care."""
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return
    for fd in fds:
        if fd < 3 or fd in keep:
            continue
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            try:
                os.close(fd)
            except OSError:
                pass


def enter_child(limits: Limits, secrets: list[str], root_user: bool) -> list[str]:
    """Apply the limits to this (freshly forked) process. Returns notes on what was not done."""
    notes: list[str] = []
    os.setpgid(0, 0)
    load_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # die with the harness
    _set(resource.RLIMIT_CORE, 0, 0)  # no core files in the learner's repository
    _set(resource.RLIMIT_FSIZE, OUTPUT_LIMIT)
    if limits.address_space:
        _set(resource.RLIMIT_AS, _vsize() + (limits.memory_mb << 20))
    if not root_user:
        # Root ignores RLIMIT_NPROC; it counts all of the user's processes, so leave headroom.
        try:
            uid = os.getuid()
            mine = sum(
                1 for p in Path("/proc").iterdir() if p.name.isdigit() and p.stat().st_uid == uid
            )
        except OSError:
            mine = 0
        _set(resource.RLIMIT_NPROC, mine + PIDS_LIMIT)
    set_cpu_budget(limits.cpu_s)
    if not limits.network:
        notes += _isolate_network_and_mounts(secrets)
    _scrub_environment()
    return notes


@cache
def isolation_notes() -> tuple[str, ...]:
    """What this machine cannot isolate, probed once in a throwaway child (for the header)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(r)
        notes = _isolate_network_and_mounts([])
        os.write(w, "\n".join(notes).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    notes = [n for n in data.decode().splitlines() if n]
    probe = Cgroup(f"gpu-katas-probe-{os.getpid()}", 64)
    if not probe.dirs:
        notes.append(
            "no writable cgroups: memory limited by RLIMIT_AS only"
            + ("" if os.getuid() else "; root ignores RLIMIT_NPROC, so no process limit")
        )
    elif not probe.limits_pids:
        notes.append("no pids cgroup: process count limited by RLIMIT_NPROC only")
    probe.remove()
    return tuple(notes)


__all__ = [
    "Cgroup",
    "Limits",
    "OUTPUT_LIMIT",
    "PIDS_LIMIT",
    "close_inherited_fds",
    "enter_child",
    "isolation_notes",
    "kill_group",
    "set_cpu_budget",
]
