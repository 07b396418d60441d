"""One sandbox child: forked from the pytest process, runs kata tests, reports over its own pipe.

Parent and child share three pipes, created by the harness before ``fork()``:

- *commands* (parent -> child): which test to run next, with a fresh random token;
- *results* (child -> parent): length-prefixed JSON frames holding the serialised reports,
  the token, and the tamper check's findings. Learner output goes to pytest's capture (or the
  terminal), never here, so printing "PASSED" forges nothing; a frame without the token is
  treated as tampering;
- *faults*: faulthandler's traceback and the native crash handler's note when the child dies.

The parent never imports learner code, so a child forked from it starts clean; a child is reused
for the following tests of the same kata (module fixtures and imports stay warm) and replaced
after anything goes wrong. Timers are the parent's: wall time is measured and enforced there.
"""

from __future__ import annotations

import faulthandler
import json
import os
import select
import signal
import struct
import time
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from _pytest.runner import runtestprotocol

from .. import hangs
from . import fence, messages, secrets
from . import limits as lim
from .guard import Guard, describe
from .native_crash import install as install_native_crash_handler
from .native_crash import signal_from_note

MAX_FRAME = 32 << 20
GRACE_S = 0.5
MAX_LAG_S = 5.0  # how much later than sent a test may start in a child on a loaded machine
SECTION_LIMIT = 64 << 10  # captured output kept per report section
_ids = count()


class ChildGone(Exception):
    """The child died or stopped answering; `message` says how, for the learner."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.message, self.kind = message, kind


# --------------------------------------------------------------------------- framing
def write_frame(fd: int, obj: Any, dumps=json.dumps, write=os.write) -> None:
    data = dumps(obj).encode()
    data = struct.pack("<I", len(data)) + data
    while data:
        data = data[write(fd, data) :]


def _read_exact_blocking(fd: int, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def read_frame_blocking(fd: int) -> Any:
    head = _read_exact_blocking(fd, 4)
    if head is None:
        return None
    body = _read_exact_blocking(fd, struct.unpack("<I", head)[0])
    return None if body is None else json.loads(body)


# --------------------------------------------------------------------------- child side
def _capture_fds(config: pytest.Config) -> set[int]:
    """The fds pytest's own capturing needs in the child (its saved terminal and tmpfiles)."""
    keep: set[int] = set()
    capman = config.pluginmanager.getplugin("capturemanager")
    multi = getattr(capman, "_global_capturing", None)
    for cap in (getattr(multi, n, None) for n in ("in_", "out", "err")):
        for attr in ("targetfd_save",):
            if isinstance(getattr(cap, attr, None), int):
                keep.add(getattr(cap, attr))
        tmp = getattr(cap, "tmpfile", None)
        try:
            keep.add(tmp.fileno())
        except (AttributeError, OSError, ValueError):
            pass
    return keep


class _FaultFile:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def _cap_sections(data: dict[str, Any]) -> None:
    for section in data.get("sections", []):
        text = section[1]
        if len(text) > SECTION_LIMIT:
            section[1] = text[:SECTION_LIMIT] + f"\n[... output truncated at {SECTION_LIMIT} bytes]"


def child_main(session: pytest.Session, fds: dict[str, int], spec: ChildSpec) -> None:
    """Runs in the forked child; never returns."""
    try:
        from ..api import mark_sandbox_child
        from . import fence

        mark_sandbox_child()
        fence.install()  # before the guard's snapshot: undoing the fence is then tampering
        guarded = secrets.has_secrets(spec.secrets)  # a key or masked files: before the scrub
        drop, grant_notes = secrets.capability_grant(spec.keep_caps, spec.secrets)
        secrets.forget(session.config, spec.kata_dir)
        notes = lim.enter_child(spec.limits, spec.secrets, os.getuid() == 0)
        if guarded and os.getuid() == 0:  # after the masks are mounted: they stay mounted
            notes += grant_notes + secrets.drop_capabilities(drop)
            if drop != secrets.DROPPED_CAPS:  # a kept CAP_SYS_ADMIN: close its routes to memory
                notes += secrets.refuse_syscalls()
        keep = {fds["cmd"], fds["res"], fds["fault"]} | _capture_fds(session.config)
        lim.close_inherited_fds(keep)
        faulthandler.enable(file=_FaultFile(fds["fault"]), all_threads=True)
        install_native_crash_handler(fds["fault"])
        _serve(session, fds, spec, notes)
    except BaseException as e:  # the harness's own failure in the child: say so, then go
        try:
            os.write(fds["fault"], f"\nsandbox child error: {type(e).__name__}: {e}\n".encode())
        except OSError:
            pass
    os._exit(0)


def _serve(session: pytest.Session, fds: dict[str, int], spec: ChildSpec, notes: list[str]) -> None:
    config = session.config
    items = {it.nodeid: it for it in session.items}
    kata_items = [it for it in session.items if it.nodeid in spec.nodeids]
    guard = Guard(config, kata_items)  # before any learner code: the parent never ran any
    me, write, dumps, exit_ = os.getpid(), os.write, json.dumps, os._exit
    to_json = config.hook.pytest_report_to_serializable
    write_frame(fds["res"], {"hello": me, "notes": notes}, dumps, write)
    while True:
        msg = read_frame_blocking(fds["cmd"])
        if msg is None:
            return
        item = items[msg["nodeid"]]
        nextitem = items.get(msg["next"]) if msg.get("next") else None
        if msg.get("limit") is not None:  # the parent's choice: the kata's budget may cut it
            from ..api import TEST_LIMIT
            from ..timekeeper import TestLimit

            item.stash[TEST_LIMIT] = TestLimit(float(msg["limit"]), str(msg.get("why", "")))
        lim.set_cpu_budget(spec.limits.cpu_s)
        error = ""
        try:
            reports = runtestprotocol(item, log=False, nextitem=nextitem)
        except BaseException as e:  # pytest.exit(), KeyboardInterrupt raised by learner code
            reports, error = [], f"{type(e).__name__}: {e}"
        if os.getpid() != me:  # a fork of the learner's came back through the test: not ours
            exit_(0)
        changes = guard.changes(kata_items)
        out = []
        for rep in reports:
            data = to_json(config=config, report=rep)
            _cap_sections(data)
            out.append(data)
        # A second implementation of the kata (the reference the budgets loaded) is in memory:
        # learner code of a later test could find it (sys.modules, gc); that test gets a fresh
        # child instead.
        retire = fence.another_implementation_loaded()
        frame = {"token": msg["token"], "reports": out, "tampered": changes, "error": error}
        frame["retire"] = retire
        write_frame(fds["res"], frame, dumps, write)
        if error or changes or retire:
            return  # this process can no longer be trusted to run another test


# --------------------------------------------------------------------------- parent side
@dataclass
class ChildSpec:
    kata_dir: Path
    limits: lim.Limits
    secrets: list[str]
    nodeids: set[str]
    keep_caps: tuple[str, ...] = ()  # the kata's [sandbox] keep_capabilities
    learner: frozenset[str] = frozenset()  # the names of the learner's files (kata.toml `files`)


@dataclass
class Outcome:
    """What came back for one test: reports, or a reason the child could not report."""

    reports: list[dict[str, Any]] = field(default_factory=list)
    failure: str = ""  # learner-facing message when the test must fail without reports
    kind: str = ""  # "timeout", "crash", "memory", "tampered", "exit"
    wall_s: float = 0.0
    hang: hangs.Hang | None = None  # the learner code that was running when it timed out
    signal: int = 0  # the signal the child died by (a crash), 0 when it did not
    fault: str = ""  # what the child's crash handler and faulthandler wrote as it died


class Child:
    """Parent-side handle of one sandbox child."""

    def __init__(self, session: pytest.Session, spec: ChildSpec) -> None:
        self.session, self.spec = session, spec
        self.notes: list[str] = []
        self.pid = 0
        self.alive = False
        self.buf = b""
        self._status: int | None = None
        self.cgroup = lim.Cgroup(f"gpu-katas-{os.getpid()}-{next(_ids)}", spec.limits.memory_mb)
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()
        self.fault_r, fault_w = os.pipe()
        os.set_blocking(self.fault_r, False)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(self.cmd_w), os.close(self.res_r), os.close(self.fault_r)
            child_main(session, {"cmd": cmd_r, "res": res_w, "fault": fault_w}, spec)
        self.pid, self.alive = pid, True
        for fd in (cmd_r, res_w, fault_w):
            os.close(fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first
        self.cgroup.join(pid)  # before the child reads its first command, so before learner code
        self.pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
        hello = self._read(time.monotonic() + 30)
        if not isinstance(hello, dict) or hello.get("hello") != pid:
            raise ChildGone(self._death_message(hello), "crash")
        self.notes = list(hello.get("notes", [])) + self.cgroup.problems

    # ----------------------------------------------------------------- reading with a deadline
    def _read(self, deadline: float) -> Any:
        """The next frame; ``"timeout"``; or None when the child is gone."""
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack("<I", self.buf[:4])[0]
                if n > MAX_FRAME:
                    return {"garbled": True}
                if len(self.buf) >= 4 + n:
                    body, self.buf = self.buf[4 : 4 + n], self.buf[4 + n :]
                    try:
                        return json.loads(body)
                    except ValueError:
                        return {"garbled": True}
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            watch = [self.res_r] + ([self.pidfd] if self.pidfd is not None else [])
            ready, _, _ = select.select(watch, [], [], min(left, 0.25))
            if self.res_r in ready:
                chunk = os.read(self.res_r, 1 << 16)
                if chunk:
                    self.buf += chunk
                    continue
                return None
            if self.pidfd in ready or (self.pidfd is None and self._exited()):
                # The child is gone; a grandchild may still hold the pipe open, so read what is
                # already there and stop.
                os.set_blocking(self.res_r, False)
                try:
                    while chunk := os.read(self.res_r, 1 << 16):
                        self.buf += chunk
                except BlockingIOError:
                    pass
                if len(self.buf) >= 4 and len(self.buf) >= 4 + struct.unpack("<I", self.buf[:4])[0]:
                    continue
                return None

    def _exited(self) -> bool:
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid:
            self._status = _
            return True
        return False

    # ----------------------------------------------------------------- running a test
    def run(
        self,
        item: pytest.Item,
        nextitem: pytest.Item | None,
        limit: float | None = None,
        why: str = "the kata's time_limit",
    ) -> Outcome:
        token = os.urandom(16).hex()
        start = time.monotonic()
        limit = self.spec.limits.wall_s if limit is None else limit
        try:
            write_frame(self.cmd_w, {"nodeid": item.nodeid, "next": nextitem and nextitem.nodeid,
                                     "token": token, "limit": limit, "why": why})  # fmt: skip
        except OSError:
            pass  # the child is gone: reading says how
        # The in-child alarm (harness.plugin) gets first go, so a reused child survives a slow
        # Python loop; the parent's deadline, a little later, catches everything else.
        grace = min(2.0, max(GRACE_S, 0.1 * limit))  # a loaded machine replies late
        frame = self._read(start + limit + grace if limit > 0 else float("inf"))
        if frame == "timeout":
            # A loaded machine may start the test in the child later than it was sent: the
            # child's own alarm is due at its deadline, so wait for that (at most MAX_LAG_S
            # later: the slot is in the child's memory, and learner code could write to it).
            late = self._child_deadline(start + limit)
            if late is not None:
                frame = self._read(late + grace)
        wall = time.monotonic() - start
        if frame == "timeout":
            # What the child was stuck in (native code, a swallowed alarm), or what it had
            # stopped but could not report in time (a loaded machine).
            running, hang = hangs.read_slot()
            self.stop(kill=True)
            text = messages.timeout(limit, why)
            if running is not None:
                kind, key, label = running
                if kind == hangs.IMPORT:
                    text = hangs.import_hang_sentence(label, limit)
                else:
                    text = messages.timeout(limit, why, label)
                hang = hangs.Hang(kind, key, label, item.name, text)
            elif hang is not None:
                text = hang.cause
            return Outcome(failure=text, kind="timeout", wall_s=wall, hang=hang)
        if frame is None:
            failure = self._death_message(None)
            sig, fault = self.death
            return Outcome(failure=failure, kind="crash", wall_s=wall, signal=sig, fault=fault)
        if not isinstance(frame, dict) or frame.get("token") != token:
            self.stop(kill=True)
            return Outcome(
                failure="your code wrote to the harness's result channel (a forged result)",
                kind="tampered",
                wall_s=wall,
            )
        if frame.get("tampered"):
            self.stop(kill=True)
            return Outcome(failure=describe(frame["tampered"]), kind="tampered", wall_s=wall)
        if frame.get("error"):
            self.stop(kill=True)
            return Outcome(
                failure=f"your code stopped the test run ({frame['error']})",
                kind="exit",
                wall_s=wall,
            )
        if frame.get("retire"):
            self.stop()  # it ends itself: the next test gets a fresh child
        return Outcome(reports=frame["reports"], wall_s=wall)

    def _child_deadline(self, due: float) -> float | None:
        """When the child's own limit of the running test ends, if later than `due` (and never
        more than MAX_LAG_S later); None when there is nothing more to wait for."""
        deadline = hangs.slot_deadline()
        if deadline is None or deadline <= due:
            return None
        return min(deadline, due + MAX_LAG_S)

    # ----------------------------------------------------------------- ending
    def _wait(self, timeout: float = 5.0) -> int | None:
        if self._status is not None:
            return self._status
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid:
                self._status = status
                return status
            time.sleep(0.005)
        return None

    def _fault_text(self) -> str:
        out = b""
        try:
            while chunk := os.read(self.fault_r, 1 << 16):
                out += chunk
                if len(out) > 1 << 20:
                    break
        except (BlockingIOError, OSError):
            pass
        return out.decode(errors="replace")

    def _death_message(self, frame: Any) -> str:
        self.death: tuple[int, str] = (0, "")  # (signal, fault text) of a child that crashed
        status = self._wait()
        oom = self.cgroup.oom_killed()
        peak = self.cgroup.peak_bytes()
        lim.kill_group(self.pid, self.cgroup)
        fault = self._fault_text()
        self._close()
        if isinstance(frame, dict) and frame.get("garbled"):
            return "your code wrote to the harness's result channel (a garbled result)"
        if status is None:
            return "the sandbox child stopped answering"
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGALRM:  # the crash handler's own deadline: report the crash
                sig = signal_from_note(fault) or sig
            if oom or (sig == 9 and peak and peak >= (self.spec.limits.memory_mb << 20) * 0.95):
                return messages.memory(self.spec.limits.memory_mb, peak=peak or 0)
            self.death = (sig, fault)
            native = _native_site(fault, self.spec.learner)
            site = messages.crash_site(fault, self.spec.kata_dir, native)
            return messages.killed(sig, site)
        code = os.WEXITSTATUS(status)
        if "sandbox child error" in fault:
            return fault.strip().splitlines()[-1]
        return messages.exited(code)

    def _closefd(self, name: str) -> None:
        fd = getattr(self, name, None)
        if fd is not None and fd >= 0:
            setattr(self, name, -1)  # never close a number twice: it may be reused by then
            try:
                os.close(fd)
            except OSError:
                pass

    def _close(self) -> None:
        self.alive = False
        for name in ("cmd_w", "res_r", "pidfd", "fault_r"):
            self._closefd(name)
        self.cgroup.remove()

    def stop(self, kill: bool = False) -> None:
        """End the child: politely (close its command pipe) or with SIGKILL to all it started."""
        if not self.alive:
            return
        if not kill:
            self._closefd("cmd_w")
            self._wait(2.0)
        lim.kill_group(self.pid, self.cgroup)
        self._wait(2.0)
        self._close()


def _native_site(fault: str, learner: frozenset[str]) -> str:
    from .native_crash import site_from_note

    return site_from_note(fault, set(learner))
