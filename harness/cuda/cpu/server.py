"""The cpu backend's launch server: one small helper program per process that forks the launches.

Forking the pytest process for every launch copies the page tables of its whole heap: 2-5 ms on a
worker with numpy, pytest and hypothesis loaded, more than the kernels themselves. The server
(runtime.cpp built with -DKATA_SERVER) is a few hundred KiB, so its forks cost a tenth of that.
Device buffers are memfds, mapped by both processes; a launch message names the kernel library,
its launch symbol, the buffers and the argument bytes, and carries this process's stdout and stderr
so that device printf lands in the test's captured output. Each launch still runs in a forked
child of the server (see runtime.cpp), so out-of-bounds accesses, crashes and hangs are caught
exactly as before.

One server per process id: a forked sandbox child starts its own (the parent's socket is left
alone). When no server can run (no memfd, KATA_CUDA_LAUNCH_SERVER=0, the server died), launches
fork this process as before.
"""

from __future__ import annotations

import array
import os
import socket
import struct
import subprocess
import threading
from pathlib import Path
from typing import Any

from harness.cuda.cpu.loader import CXX_FLAGS, HERE, INCLUDE, runtime

__all__ = ["MESSAGES", "WIRE_FIELDS", "LaunchServer", "current", "forget", "wire_struct"]

# kata_launch.h's messages (kata_wire_*, kata_msg_t), field by field: struct packs them without
# building or parsing C, and harness/tests/test_cuda_interface.py checks every field's offset and
# the sizes against the header (cffi's offsetof/sizeof).
WIRE_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "kata_wire_map": (("type", "I"), ("pad", "I"), ("id", "Q"), ("size", "Q")),
    "kata_wire_launch": (
        ("type", "I"),
        ("grid", "3I"),
        ("block", "3I"),
        ("schedule", "I"),
        ("shared", "Q"),
        ("seed", "Q"),
        ("fibers", "i"),
        ("preempt", "i"),
        ("timeout", "d"),
        ("nbuffers", "I"),
        ("nargs", "I"),
        ("lib_len", "I"),
        ("sym_len", "I"),
        ("kname_len", "I"),
        ("bytes_len", "I"),
    ),
    "kata_wire_buffer": (("id", "Q"), ("offset", "Q"), ("size", "Q"), ("arg", "q")),
    "kata_wire_arg": (("kind", "I"), ("value", "I")),
}
MESSAGES = {"KATA_MSG_MAP": 1, "KATA_MSG_UNMAP": 2, "KATA_MSG_LAUNCH": 3}


def wire_struct(name: str) -> struct.Struct:
    """The little-endian, unpadded `struct` format of message type `name`."""
    return struct.Struct("<" + "".join(code for _, code in WIRE_FIELDS[name]))


_HEADER = wire_struct("kata_wire_launch")
_MAP = wire_struct("kata_wire_map")
_BUFFER = wire_struct("kata_wire_buffer")
_ARG = wire_struct("kata_wire_arg")
_MSG_MAP = MESSAGES["KATA_MSG_MAP"]
_MSG_UNMAP = MESSAGES["KATA_MSG_UNMAP"]
_MSG_LAUNCH = MESSAGES["KATA_MSG_LAUNCH"]

_lock = threading.Lock()
# Mutated, never rebound (harness.sandbox's guard): pid -> server, and failures by pid.
_servers: dict[int, LaunchServer] = {}
_disabled: dict[int, str] = {}


def _executable() -> Path:
    from harness.native.build import build_executable

    built = build_executable(
        [HERE / "runtime.cpp"],
        lang="cpp",
        flags=[*CXX_FLAGS, "-DKATA_SERVER"],
        link_flags=["-ldl", "-rdynamic"],  # kernel libraries resolve threadIdx & co. against it
        include_dirs=[INCLUDE],
        root=HERE,
    )
    return built.path


class LaunchServer:
    def __init__(self, exe: Path) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [str(exe), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        finally:
            theirs.close()
        self.sock = ours
        self.pid = os.getpid()
        self.mapped: set[int] = set()
        self.broken = False

    def _send(self, data: bytes, fds: list[int]) -> None:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        self.sock.sendmsg([data], anc)

    def _map(self, buf: Any) -> None:
        if buf.id not in self.mapped:
            self._send(_MAP.pack(_MSG_MAP, 0, buf.id, buf.map_size), [buf.fd])
            self.mapped.add(buf.id)

    def unmap(self, buf: Any) -> None:
        if buf.id in self.mapped:
            self.mapped.discard(buf.id)
            try:
                self._send(_MAP.pack(_MSG_UNMAP, 0, buf.id, 0), [])
            except OSError:
                self.broken = True

    def launch(
        self,
        res: Any,
        *,
        library: Path,
        symbol: str,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        schedule: int,
        seed: int,
        fibers: int,
        preempt: int,
        timeout: float,
        buffers: list[tuple[Any, int]],
        args: list[tuple[int, Any]],
    ) -> bool:
        """Run one launch; fill cffi `res` (kata_result_t*). False: the caller forks instead."""
        if self.broken or any(b.fd < 0 for b, _ in buffers):
            return False
        ffi = runtime().ffi
        lib, sym, name = str(library).encode(), symbol.encode(), kernel.encode()
        blob = b"".join(v for kind, v in args if kind == 0)
        parts = [
            _HEADER.pack(
                _MSG_LAUNCH,
                *grid,
                *block,
                schedule,
                shared,
                seed,
                fibers,
                preempt,
                timeout,
                len(buffers),
                len(args),
                len(lib),
                len(sym),
                len(name),
                len(blob),
            )
        ]
        parts += [_BUFFER.pack(b.id, b.address - b.map_lo, b.size, i) for b, i in buffers]
        parts += [_ARG.pack(kind, v if kind == 1 else len(v)) for kind, v in args]
        parts += [blob, lib, sym, name]
        size = ffi.sizeof("kata_result_t")
        try:
            for b, _ in buffers:
                self._map(b)
            # The server enforces the launch's timeout itself; this one only guards against a
            # server that stopped answering.
            self.sock.settimeout(timeout + 30.0 if timeout > 0 else None)
            self._send(b"".join(parts), [1, 2])
            reply = self.sock.recv(size + 1)
        except OSError:  # the server died or hung: retire it; the caller forks this process
            self.close()
            return False
        except BaseException:
            # Interrupted between request and reply: the stream can no longer be trusted, so
            # this server is retired (a new one starts on the next launch).
            self.close()
            raise
        if len(reply) != size:
            self.close()
            return False
        ffi.memmove(res, reply, size)
        return True

    def close(self) -> None:
        self.broken = True
        if os.getpid() != self.pid:
            return  # a forked child: the server belongs to the parent
        try:
            self.sock.close()
        finally:
            try:
                self.proc.kill()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass


def current() -> LaunchServer | None:
    """This process's launch server, started on first use; None where none can run."""
    if os.environ.get("KATA_CUDA_LAUNCH_SERVER", "1") == "0":
        return None
    pid = os.getpid()
    srv = _servers.get(pid)
    if srv is not None and not srv.broken:
        return srv
    if pid in _disabled:
        return None
    with _lock:
        srv = _servers.get(pid)
        if srv is None or srv.broken:
            try:
                srv = _servers[pid] = LaunchServer(_executable())
            except Exception as e:  # no compiler, no SOCK_SEQPACKET: fork this process instead
                _disabled[pid] = str(e)
                return None
    return srv


def forget(buf: Any) -> None:
    """A buffer is being freed: the server unmaps it too."""
    srv = _servers.get(os.getpid())
    if srv is not None and not srv.broken:
        srv.unmap(buf)
