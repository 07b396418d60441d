"""What this machine offers a container runtime: root, busybox, cgroup v1 or v2, and the
clean-up of every cgroup this kata's containers leave behind. Given code."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

from .spec import CGROUP_PARENT

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "devices")
RUN_AS_ROOT = "sudo -E .venv/bin/pytest katas/phase04/container"


def busybox() -> str | None:
    """A statically linked busybox (it must run in a rootfs that has no libc)."""
    for path in ("/bin/busybox", "/usr/bin/busybox", shutil.which("busybox") or ""):
        if path and os.path.isfile(path) and _static(path):
            return path
    return None


def _static(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(4096)
    return head[:4] == b"\x7fELF" and b"ld-linux" not in head and b"/lib64/ld" not in head


def _has_cap_sys_admin() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 21 & 1)
    return False


def cgroup_version() -> int | None:
    """2 on a unified hierarchy (cgroup.controllers at the root), 1 with per-controller
    hierarchies (memory/, pids/, devices/), None without cgroups."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return 2
    if all((CGROUP_ROOT / c / "cgroup.procs").exists() for c in V1_CONTROLLERS):
        return 1
    return None


def cgroup2_dir() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on v2, /sys/fs/cgroup/unified on
    a "hybrid" v1 host (systemd's default there; no controllers, but BPF programs attach)."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] == "cgroup2" and fields[1] in (str(CGROUP_ROOT), str(CGROUP_ROOT / "unified")):
            return Path(fields[1])
    return None


def cgroup_base(controller: str = "memory") -> Path:
    """The directory under which this process's containers get their cgroups: on v1 one per
    controller (/sys/fs/cgroup/memory/gpu-katas-container/PID), on v2 one
    (/sys/fs/cgroup/gpu-katas-container/PID). PID (this process) keeps parallel test workers
    apart: each cleans up only its own."""
    top = CGROUP_ROOT if cgroup_version() == 2 else CGROUP_ROOT / controller
    return top / CGROUP_PARENT / str(os.getpid())


def missing(need_cgroups: bool = False) -> str | None:
    """Why containers cannot run here (a sentence with what to do), or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return f"a container runtime needs root (mount, pivot_root, mknod): run `{RUN_AS_ROOT}`"
    if not Path("/proc/self/ns/user").exists():
        return "this kernel has no namespaces (/proc/self/ns is missing): use Linux"
    if not _has_cap_sys_admin():
        return (
            "this process lacks CAP_SYS_ADMIN (unshare, mount, pivot_root): the sandbox keeps "
            "it for this kata (kata.toml [sandbox]) except when a secret it masks is readable "
            "on disk (a key file, grade mode's plaintext hidden tests): grade from a published "
            "bundle with the key in KATA_HIDDEN_KEY (the run's sandbox note names the file)"
        )
    if busybox() is None:
        return "no static busybox for the rootfs: apt-get install busybox-static"
    if need_cgroups:
        version = cgroup_version()
        if version is None:
            return "no writable cgroup file system at /sys/fs/cgroup (memory, pids, devices)"
        if not os.access(CGROUP_ROOT / ("" if version == 2 else "memory"), os.W_OK):
            return f"the cgroup file system is read-only here: run `{RUN_AS_ROOT}`"
    return None


def cgroup_procs(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def own_cgroups() -> dict[str, str]:
    """This process's cgroups, {hierarchy: path}: "memory", "pids", ... on v1, "unified" on v2."""
    out: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else ["unified"]:
            out[name] = path
    return out


def return_tickets() -> list[int]:
    """Open (for writing) this process's own cgroup.procs in every hierarchy, to write its pid
    back later (go_back): after pivot_root in its mount namespace the paths are gone, fds stay."""
    fds = []
    for name, path in own_cgroups().items():
        base = CGROUP_ROOT if name == "unified" else CGROUP_ROOT / name.removeprefix("name=")
        try:
            fds.append(os.open(base / path.lstrip("/") / "cgroup.procs", os.O_WRONLY))
        except OSError:
            pass  # a hierarchy not mounted here
    return fds


def go_back(tickets: list[int]) -> None:
    """Move this process back to the cgroups return_tickets() saw."""
    for fd in tickets:
        try:
            os.write(fd, str(os.getpid()).encode())
        except OSError:
            pass  # then it stays in the container's cgroup: only its own memory counts there
        os.close(fd)


def wait_empty(cgroup: dict[str, str], timeout: float = 3.0) -> None:
    """Wait (bounded) until no process is left in the container's cgroup directories."""
    deadline = time.monotonic() + timeout
    while any(cgroup_procs(Path(d)) for d in cgroup.values()) and time.monotonic() < deadline:
        time.sleep(0.005)


def cleanup_cgroups(timeout: float = 5.0) -> list[str]:
    """Kill every process in this process's container cgroups (and in those of processes that
    are gone) and remove them, deepest first. Returns what it had to clean."""
    tops = (
        [] if cgroup_version() == 2 else [CGROUP_ROOT / c / CGROUP_PARENT for c in V1_CONTROLLERS]
    )
    if (unified := cgroup2_dir()) is not None:
        tops.append(unified / CGROUP_PARENT)
    left: list[str] = []
    for top in tops:
        if not top.is_dir():
            continue
        for base in top.iterdir():
            owner = int(base.name) if base.name.isdigit() else 0
            if not base.is_dir() or (owner != os.getpid() and Path(f"/proc/{owner}").exists()):
                continue  # another live test process's containers
            dirs = sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for d in [*dirs, base]:
                if d != base:
                    left.append(str(d))
                deadline = time.monotonic() + timeout
                while pids := cgroup_procs(d):
                    for pid in pids:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
                _rmdir(d, deadline)
    return left


def _rmdir(d: Path, deadline: float) -> None:
    while True:
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY while the killed processes are being reaped
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def counters(cgroup: dict[str, str]) -> dict[str, int]:
    """What the limits did: OOM kills, refused forks, peak memory (from the cgroup's files)."""
    out: dict[str, int] = {}

    def read(path: Path) -> dict[str, int]:
        try:
            pairs = (line.split() for line in path.read_text().splitlines())
            return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].lstrip("-").isdigit()}
        except OSError:
            return {}

    if "unified" in cgroup:
        d = Path(cgroup["unified"])
        out["oom_kill"] = read(d / "memory.events").get("oom_kill", 0)
        out["pids_refused"] = read(d / "pids.events").get("max", 0)
        peak = d / "memory.peak"
        out["memory_peak"] = int(peak.read_text()) if peak.exists() else 0
        return out
    if "memory" in cgroup:
        d = Path(cgroup["memory"])
        out["oom_kill"] = read(d / "memory.oom_control").get("oom_kill", 0)
        out["memory_peak"] = int((d / "memory.max_usage_in_bytes").read_text())
    if "pids" in cgroup:
        out["pids_refused"] = read(Path(cgroup["pids"]) / "pids.events").get("max", 0)
    return out
