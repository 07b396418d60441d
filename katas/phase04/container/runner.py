"""The runtime's process plumbing (given): it calls your runtime.py in the order runc does and
runs one container to completion, however your code fails.

    parent (this process)          child ("runc init")                 grandchild (pid 1)
    create_cgroup(spec)
    create_device_nodes(spec)
    restrict_devices(spec, cg)
    fork ───────────────────────▶  enter_namespaces(spec)
                                   report "unshared", wait for "go"
    write_id_maps(pid, spec)
    join_cgroup(cg, pid)
    send "go" ─────────────────▶   fork ─────────────────────────────▶ set_hostname(spec)
                                   wait, report pid 1's status         setup_rootfs(spec) (with a rootfs)
    collect output, wait (timeout)                                      execve(spec.args)
    remove_cgroup(cg)

A CLONE_NEWPID unshare moves the *children* of the caller into the new pid namespace, which is
why there are two forks (runc does the same with its "bootstrap" process). An exception in
your code, in any of the three processes, comes back to the caller of `run` with its type and
message (`KataTodo` stays `KataTodo`); a hang is cut at `timeout` and the whole pid namespace
is killed with its pid 1.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from harness import KataTodo

from . import host
from .spec import MNT_DETACH, Spec

PR_SET_PDEATHSIG = 1


@dataclass
class Result:
    """How a container run ended."""

    exit_code: int | None  # the exit status of pid 1, None if killed by a signal
    signal: int | None  # the signal that killed pid 1 (9 for the OOM killer)
    stdout: str
    stderr: str
    timed_out: bool = False
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds
    counters: dict[str, int] = field(default_factory=dict)  # from the cgroup, before removal
    cgroup: dict[str, str] = field(default_factory=dict)
    pid1: int = 0  # pid 1's pid on the host (gone after the run)

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


class RuntimeFailed(RuntimeError):
    """Your runtime code raised in the child or in pid 1 (the message says which step)."""


def run(rt: ModuleType, spec: Spec, timeout: float = 10.0) -> Result:
    """Run `spec` with the runtime module `rt` (your runtime.py) and wait for pid 1 to exit."""
    steps: dict[str, float] = {}
    cg: dict[str, str] = {}
    child = -1
    t0 = time.perf_counter()
    inherited = _open_fds()  # the test process's own descriptors, before your code runs
    try:
        if spec.needs_cgroup:
            cg = _timed(steps, "create_cgroup", rt.create_cgroup, spec)
        if spec.devices and spec.rootfs:
            _timed(steps, "create_device_nodes", rt.create_device_nodes, spec)
        if spec.restrict_devices:
            _timed(steps, "restrict_devices", rt.restrict_devices, spec, cg)
        go_r, go_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            os.close(go_w), os.close(rep_r), os.close(out_r), os.close(err_r)
            _child(rt, spec, go_r, rep_w, out_w, err_w, inherited)
        for fd in (go_r, rep_w, out_w, err_w):
            os.close(fd)
        deadline = time.monotonic() + timeout
        reader = _Reader(rep_r, out_r, err_r)
        msg = reader.next_report(deadline)
        if msg.get("step") != "unshared":
            _raise(msg, reader)
        steps["enter_namespaces"] = msg["s"]
        if "user" in spec.namespaces:
            _timed(steps, "write_id_maps", rt.write_id_maps, child, spec)
        if cg:
            _timed(steps, "join_cgroup", rt.join_cgroup, cg, child)
        os.write(go_w, b"g")
        os.close(go_w)
        status: int | None = None
        pid1 = 0
        while status is None:
            msg = reader.next_report(deadline)
            if "pid1" in msg:
                pid1 = msg["pid1"]
            elif "step" in msg:
                steps[msg["step"]] = msg["s"]
            elif "status" in msg:
                status = msg["status"]
            elif msg.get("timeout"):
                _kill(pid1, child)
                break
            else:
                _kill(pid1, child)
                _raise(msg, reader)
        reader.drain(time.monotonic() + 1.0)
        steps["total"] = time.perf_counter() - t0
        counters = host.counters(cg) if cg else {}
        code = sig = None
        if status is not None:
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
            else:
                code = os.WEXITSTATUS(status)
        return Result(
            code,
            sig,
            reader.text(1),
            reader.text(2),
            status is None,
            steps,
            counters,
            dict(cg),
            pid1,
        )
    finally:
        if child > 0:
            _kill(0, child)
            _reap(child)
        if cg:
            host.wait_empty(cg)  # pid 1's namespace dies asynchronously after the kill
            try:
                rt.remove_cgroup(cg)
            finally:
                host.cleanup_cgroups()


def _mounts() -> set[str]:
    return {line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}


@contextmanager
def contained(rt: ModuleType) -> Iterator[Callable[..., Result]]:
    """For the tests' `run` fixture: yields run(spec, timeout) with `rt`; afterwards removes
    every cgroup of this kata (killing what is left in them) and undoes, then reports, any
    mount the runtime left in this process's own mount namespace."""
    before = _mounts()
    host.cleanup_cgroups()  # what an earlier test left when its process was killed mid-run
    try:
        yield lambda spec, timeout=10.0: run(rt, spec, timeout)
    finally:
        host.cleanup_cgroups()
        leaked = sorted(_mounts() - before, key=len, reverse=True)
        libc = ctypes.CDLL(None, use_errno=True)
        for target in leaked:
            libc.umount2(target.encode(), MNT_DETACH)
    if leaked:
        raise AssertionError(f"your runtime left mounts in the host's mount namespace: {leaked}")


def _timed(steps: dict[str, float], name: str, fn: Any, *args: Any) -> Any:
    t = time.perf_counter()
    out = fn(*args)
    steps[name] = time.perf_counter() - t
    return out


def _raise(msg: dict[str, Any], reader: _Reader) -> None:
    if msg.get("timeout"):
        raise RuntimeFailed("the runtime's child reported nothing before the timeout")
    if "error" not in msg:
        raise RuntimeFailed(f"the runtime's child exited early: {msg} {reader.text(2)[-500:]}")
    text = f"{msg['where']}: {msg['type']}: {msg['message']}"
    if msg["type"] == "KataTodo":
        raise KataTodo(msg["message"])
    raise RuntimeFailed(text + "\n" + msg.get("traceback", ""))


def _kill(pid1: int, child: int) -> None:
    for pid in (pid1, child):
        if pid > 0:
            try:
                os.kill(pid, signal.SIGKILL)  # pid 1 dying kills its whole pid namespace
            except ProcessLookupError:
                pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


class _Reader:
    """Reads the child's reports (JSON lines) and pid 1's stdout/stderr without blocking."""

    def __init__(self, rep: int, out: int, err: int) -> None:
        self.fds = {rep: 0, out: 1, err: 2}
        self.buf = {0: b"", 1: b"", 2: b""}
        self.open = set(self.fds)

    def _pump(self, deadline: float) -> bool:
        wait = deadline - time.monotonic()
        if wait <= 0 or not self.open:
            return False
        ready, _, _ = select.select(list(self.open), [], [], wait)
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                self.open.discard(fd)
                os.close(fd)
            self.buf[self.fds[fd]] += data
        return True

    def next_report(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self.buf[0]:
            rep_open = any(self.fds[fd] == 0 for fd in self.open)
            if not rep_open:
                return {"eof": True}
            if not self._pump(deadline):
                return {"timeout": True}
        line, self.buf[0] = self.buf[0].split(b"\n", 1)
        return json.loads(line)

    def drain(self, deadline: float) -> None:
        while self.open and self._pump(deadline):
            pass
        for fd in list(self.open):
            os.close(fd)
        self.open.clear()

    def text(self, which: int) -> str:
        return self.buf[which].decode(errors="replace")


def _report(fd: int, **msg: Any) -> None:
    os.write(fd, (json.dumps(msg) + "\n").encode())


def _error(fd: int, where: str, e: BaseException) -> None:
    _report(
        fd,
        error=True,
        where=where,
        type=type(e).__name__,
        message=str(e),
        traceback="".join(traceback.format_exception(e)[-6:]),
    )


def _open_fds() -> list[int]:
    return [int(n) for n in os.listdir("/proc/self/fd")]


def _child(
    rt: ModuleType, spec: Spec, go: int, rep: int, out: int, err: int, inherited: list[int]
) -> None:  # pragma: no cover
    """The runtime's child: unshare, wait for the parent, fork pid 1, report its status."""
    code = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.setsid()
        # This process joins the container's cgroup (so that pid 1 is inside from its first
        # instruction) but is the runtime's, not the container's: the OOM killer must not pick
        # it, and once pid 1 is forked it goes back where it was, so that the memory this copy
        # of the test process touches is not charged to the container.
        _oom_score_adj(-1000)
        tickets = host.return_tickets()
        t = time.perf_counter()
        try:
            rt.enter_namespaces(spec)
        except BaseException as e:
            _error(rep, "enter_namespaces (in the child)", e)
            os._exit(1)
        _report(rep, step="unshared", s=time.perf_counter() - t)
        if os.read(go, 1) != b"g":
            os._exit(1)
        left_r, left_w = os.pipe()  # pid 1 starts the program once this process left
        pid1 = os.fork()
        if pid1 == 0:
            os.close(left_w)
            _pid1(rt, spec, rep, out, err, libc, inherited, left_r)
        os.close(left_r)
        _report(rep, pid1=pid1)
        host.go_back(tickets)  # out of the container's cgroup: its pids.max counts pid 1's own
        os.close(left_w)
        _, status = os.waitpid(pid1, 0)
        _report(rep, status=status)
        code = 0
    except BaseException as e:
        _error(rep, "the runtime's child", e)
    os._exit(code)


def _oom_score_adj(value: int) -> None:  # pragma: no cover - runs in the child
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass


def _pid1(
    rt: ModuleType,
    spec: Spec,
    rep: int,
    out: int,
    err: int,
    libc: Any,
    inherited: list[int],
    left: int,
) -> None:  # pragma: no cover
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _oom_score_adj(0)  # the container's processes are fair game again
        calls = [("set_hostname", rt.set_hostname)]
        if spec.rootfs is not None:
            calls.append(("setup_rootfs", rt.setup_rootfs))
        for name, fn in calls:
            t = time.perf_counter()
            try:
                fn(spec)
            except BaseException as e:
                _error(rep, f"{name} (in pid 1)", e)
                os._exit(126)
            _report(rep, step=name, s=time.perf_counter() - t)
        os.read(left, 1)  # EOF: the runtime's child has left the container's cgroup
        os.close(left)
        os.dup2(out, 1)
        os.dup2(err, 2)
        # The runner's pipes and what the test process had open do not reach the container
        # (runc marks every descriptor above 2 close-on-exec). Descriptors your code opened
        # are yours: a directory of the host's tree open at execve is a way out.
        for fd in (rep, out, err, *(fd for fd in inherited if fd > 2)):
            try:
                os.set_inheritable(fd, False)
            except OSError:  # closed meanwhile
                pass
        os.execve(spec.args[0], spec.args, spec.env)
    except BaseException as e:
        _error(rep, f"execve {spec.args[0]} (in pid 1)", e)
    os._exit(127)
