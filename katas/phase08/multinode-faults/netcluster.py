"""A cluster of "hosts" on one machine (given; you read and use it, you do not edit it).

    with netcluster.Cluster(4) as c:            # 4 hosts, a switch, 4 veth pairs, a relay
        c.shape((0, 2), delay=0.05, rate=256e3) # link 0-2: +50 ms, 256 kB/s
        res = c.run(fn, cfg, faults=[Fault("kill", host=2, step=3)], deadline=20)
    res.value(0)                                # what fn(node, cfg) returned on host 0

What a host is. Each host is a Linux network namespace of its own (``unshare(CLONE_NEWNET)``
through ctypes, in a process forked for it) with one interface, ``eth0`` = 10.200.0.<h+1>/24,
the end of a veth pair whose other end, ``vh<h>``, is a port of the bridge ``br0`` in the
switch's namespace (10.200.0.254). Nothing else is in these namespaces: no default route, no
link to this machine's own network, so no packet can leave the cluster. The namespaces have no
name (no ``ip netns add``): each lives exactly as long as the processes inside it, so killing
the processes removes the namespaces, the veths and the bridge with them, whatever your code
did. Every process here dies with the process that made the cluster (``PR_SET_PDEATHSIG``), and
``Cluster.close`` (``with``, a ``finally``) kills and reaps the rest.

The links. Every TCP connection between two hosts goes through the relay, a userspace process
in the switch's namespace that forwards bytes and shapes them per link, the way ``tc netem``
would in a kernel that had it: a link {a, b} has an added one-way `delay`, a random `jitter` on
top, a `rate` (bytes per second, a token bucket shared by every connection on that link, in
each direction), and a `blackhole` switch (the relay stops forwarding: the bytes wait, TCP
keeps the connections open, exactly like a cable pulled between two switches). Packet loss is
not modelled as loss: TCP retransmits what is lost, so what a program sees of loss is stalls
(a retransmission timeout, 200 ms and doubling) and, beyond a limit, a reset; the relay gives
stalls (blackhole, jitter) and the kernel gives the rest (``ip link set vh<h> down``: nothing
reaches the host at all, every connection to it stalls).

The faults (`Fault`): "kill" (SIGKILL the host's process: the kernel closes its sockets and the
relay passes the close on, as a proxy does), "stop" (SIGSTOP: alive, connected, silent: a hung
process or a GPU stuck in a kernel), "partition" (``ip link set vh<h> down``: the host is up but
unreachable, and it cannot reach the store either), "link" (blackhole the link between two
hosts: both are fine, only they cannot talk), "slow" (the link's rate cut to 200 kB/s, 50 ms added and up to 100 ms of jitter: a
straggler link), "flap" (``ip link set vh<h> down`` and up again every `period`
seconds). A fault fires `at` seconds after the start, or when host `host` calls
``node.begin_step(step)`` with the fault's `step` (the host waits there until it has fired: the
fault lands before that step's first byte).

On a host your function gets a `Node`: its host id, the store (a key-value server in the
switch's namespace, as etcd or torchrun's c10d store is a server outside the job), the shared
checkpoint directory, and ``node.connect(members, tag)``, which builds a full mesh of TCP
connections between the hosts in `members` (waiting up to `join_timeout`, 10 s, for all of
them) and returns a `Comm` whose ranks are the positions in `members` and whose sockets time
out after `timeout` seconds without progress.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import random
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
SUBNET = "10.200.0"
SWITCH_IP = f"{SUBNET}.254"
RELAY_PORT = 7000
STORE_PORT = 7001
HOST_PORT = 7100
HEADER = struct.Struct("<iii")  # src host, dst host, tag (what the relay and the acceptor read)
FRAME = struct.Struct("<II")  # kind, payload length (the collective's frames)
FAULTS = ("kill", "stop", "partition", "link", "slow", "flap")


def host_ip(h: int) -> str:
    """Host h's address (inside the cluster's namespaces only)."""
    return f"{SUBNET}.{h + 1}"


class ClusterError(Exception):
    """The cluster could not be built, or a host's code failed (the message says which)."""


class RankFailure(Exception):
    """A collective gave up because the host `host` stopped answering (or closed its end)."""

    def __init__(self, host: int, reason: str = "") -> None:
        super().__init__(f"host {host} failed: {reason}" if reason else f"host {host} failed")
        self.host = int(host)
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[int, str]]:
        return (RankFailure, (self.host, self.reason))


class StoreUnreachable(Exception):
    """The store did not answer within the client's timeout (this host is cut off)."""


@dataclass(frozen=True)
class Fault:
    kind: str  # one of FAULTS
    host: int = -1  # kill, stop, partition, flap: the host; step faults: who triggers it
    link: tuple[int, int] | None = None  # link, slow: the two hosts
    at: float | None = None  # seconds after the start
    step: int | None = None  # or: when `host` calls begin_step(step)
    period: float = 0.3  # flap: seconds down, then seconds up, ...

    def __post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ValueError(f"unknown fault {self.kind!r}; one of {FAULTS}")


# --------------------------------------------------------------------------- libc
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _unshare_net() -> None:
    if _libc.unshare(_CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"unshare(CLONE_NEWNET): {os.strerror(e)}")


def _ip(pid: int, script: str) -> None:
    """Run `ip -batch -` inside the network namespace of process `pid` (setns in the child)."""
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)

    def enter() -> None:
        if _libc.setns(fd, _CLONE_NEWNET) != 0:
            os._exit(99)

    try:
        out = subprocess.run(
            ["ip", "-batch", "-"], input=script, capture_output=True, text=True,
            timeout=20, pass_fds=(fd,), preexec_fn=enter,
        )  # fmt: skip
    finally:
        os.close(fd)
    if out.returncode != 0:
        raise ClusterError(f"ip -batch failed ({out.returncode}): {out.stderr.strip()[:300]}")


def _net_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def processes_in(inodes: set[int]) -> list[int]:
    """The pids of every process on this machine whose network namespace is one of `inodes`."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            ino = _net_inode(int(d))
            if ino is not None and ino in inodes:
                found.append(int(d))
    return found


# --------------------------------------------------------------------------- pipes
def _send_msg(fd: int, tag: bytes, payload: bytes = b"") -> None:
    data = memoryview(tag + struct.pack("<I", len(payload)) + payload)
    while data:
        data = data[os.write(fd, data) :]


class _Reader:
    def __init__(self, fd: int) -> None:
        self.fd, self.buf, self.msgs, self.eof = fd, bytearray(), [], False

    def pump(self) -> None:
        try:
            data = os.read(self.fd, 1 << 20)
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return
        self.buf += data
        while len(self.buf) >= 5:
            (length,) = struct.unpack_from("<I", self.buf, 1)
            if len(self.buf) < 5 + length:
                break
            self.msgs.append((bytes(self.buf[:1]), bytes(self.buf[5 : 5 + length])))
            del self.buf[: 5 + length]


def _read_exact_fd(fd: int, n: int) -> bytes:
    got = b""
    while len(got) < n:
        more = os.read(fd, n - len(got))
        if not more:
            raise EOFError("the cluster's parent is gone")
        got += more
    return got


# --------------------------------------------------------------------------- sockets
def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly n bytes from sock (EOFError at a close, socket.timeout at its timeout)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise EOFError(f"the peer closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


def send_frame(sock: socket.socket, payload: bytes, kind: int = 0) -> None:
    sock.sendall(FRAME.pack(kind, len(payload)) + payload)


def recv_frame(sock: socket.socket) -> tuple[int, bytes]:
    kind, length = FRAME.unpack(recv_exact(sock, FRAME.size))
    return kind, recv_exact(sock, length)


@dataclass
class Comm:
    """A mesh among `hosts`: rank r is hosts[r]; peers[k] is the socket to rank k."""

    rank: int
    size: int
    hosts: list[int]
    peers: dict[int, socket.socket] = field(repr=False)
    timeout: float

    def peer(self, k: int) -> socket.socket:
        k %= self.size
        if k == self.rank:
            raise ValueError(f"rank {self.rank} has no socket to itself")
        return self.peers[k]

    @property
    def left(self) -> int:
        return (self.rank - 1) % self.size

    @property
    def right(self) -> int:
        return (self.rank + 1) % self.size

    def close(self) -> None:
        """Close every socket (the peers then see the close instead of waiting a timeout)."""
        for s in self.peers.values():
            with contextlib.suppress(OSError):
                s.close()


def allreduce(comm: Comm, x: np.ndarray) -> np.ndarray:
    """Sum of `x` over the comm's ranks, by a ring (reduce-scatter, all-gather) over the comm.

    For the small arrays of this kata (every chunk fits the socket buffers). A peer that sends
    nothing for comm.timeout seconds, or closes, raises RankFailure naming the host this rank
    was waiting for, the left neighbour: like NCCL, a rank only knows whom it waited on, not
    who broke the ring (the real culprit may be further round it)."""
    n, r = comm.size, comm.rank
    out = np.array(x, copy=True)
    if n == 1:
        return out
    bounds = np.linspace(0, out.size, n + 1).astype(int)
    right, left = comm.peer(comm.right), comm.peer(comm.left)
    who = comm.hosts[comm.left]

    def recv_chunk(c: int) -> np.ndarray:
        try:
            _kind, payload = recv_frame(left)
        except (OSError, EOFError) as e:
            raise RankFailure(who, f"{type(e).__name__}: {e}") from None
        got = np.frombuffer(payload, dtype=out.dtype)
        if got.size != bounds[c + 1] - bounds[c]:
            raise RankFailure(who, "a chunk of the wrong size")
        return got

    def send_chunk(c: int) -> None:
        try:
            send_frame(right, out[bounds[c] : bounds[c + 1]].tobytes())
        except OSError as e:
            raise RankFailure(comm.hosts[comm.right], f"{type(e).__name__}: {e}") from None

    for s in range(n - 1):
        send_chunk((r - s) % n)
        c = (r - s - 1) % n
        out[bounds[c] : bounds[c + 1]] += recv_chunk(c)
    for s in range(n - 1):
        send_chunk((r + 1 - s) % n)
        c = (r - s) % n
        out[bounds[c] : bounds[c + 1]] = recv_chunk(c)
    return out


# --------------------------------------------------------------------------- the store
class Store:
    """A client of the cluster's key-value store (a server in the switch's namespace).

    Values are strings. Every call either answers within `timeout` seconds or raises
    StoreUnreachable (a partitioned host's calls do)."""

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = b""

    def _call(self, req: dict[str, Any]) -> Any:
        try:
            if self._sock is None:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(self.timeout)
                s.connect((SWITCH_IP, STORE_PORT))
                self._sock = s
            self._sock.sendall(json.dumps(req).encode() + b"\n")
            while b"\n" not in self._buf:
                more = self._sock.recv(65536)
                if not more:
                    raise EOFError("the store closed the connection")
                self._buf += more
        except (OSError, EOFError) as e:
            self.close()
            raise StoreUnreachable(f"store {req['op']}: {type(e).__name__}: {e}") from None
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)["v"]

    def set(self, key: str, value: str) -> None:
        self._call({"op": "set", "k": key, "v": str(value)})

    def get(self, key: str) -> str | None:
        """The value, or None if the key is not set (never waits for it)."""
        return self._call({"op": "get", "k": key})

    def add(self, key: str, amount: int = 1) -> int:
        """Atomically add `amount` to the integer at key (0 if unset); returns the new value."""
        return int(self._call({"op": "add", "k": key, "v": int(amount)}))

    def compare_set(self, key: str, expected: str | None, value: str) -> str | None:
        """Atomically: if the key's value is `expected` (None: unset), set it to `value`.
        Returns the value the key holds afterwards (yours if you won)."""
        return self._call({"op": "cas", "k": key, "e": expected, "v": str(value)})

    def list(self, prefix: str) -> dict[str, str]:
        """Every key that starts with `prefix`, with its value."""
        return dict(self._call({"op": "list", "k": prefix}))

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock, self._buf = None, b""


class Checkpoints:
    """A checkpoint directory every host sees (the shared file system of a real cluster).

    save(step, state) writes atomically (a temporary file renamed over): a host killed while
    saving leaves the previous checkpoint whole. latest() is the newest (step, state) or None."""

    def __init__(
        self, path: str | Path, report: Callable[[bytes, Any], None] | None = None
    ) -> None:
        self.path = Path(path)
        self._report = report  # on a host: tells the tests what was saved and loaded

    def save(self, step: int, state: np.ndarray) -> None:
        tmp = self.path / f".tmp-{os.getpid()}-{step}.npy"
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(state))
        os.replace(tmp, self.path / f"step-{int(step):08d}.npy")
        if self._report is not None:
            self._report(b"C", [int(step), np.asarray(state).tolist()])

    def latest(self) -> tuple[int, np.ndarray] | None:
        steps = sorted(self.path.glob("step-*.npy"))
        got = None if not steps else (int(steps[-1].stem.split("-")[1]), np.load(steps[-1]))
        if self._report is not None:
            self._report(b"P", None if got is None else [got[0], got[1].tolist()])
        return got


# --------------------------------------------------------------------------- a host's node
class Node:
    """What your function gets on a host (see the module's docstring)."""

    def __init__(
        self, host: int, hosts: list[int], listener: socket.socket, ckpt: str,
        ctl_fd: int, report_fd: int, timeout: float,
    ) -> None:  # fmt: skip
        self.host = host
        self.hosts = list(hosts)  # every host the job started with
        self.timeout = timeout  # the default socket timeout of connect()'s comms
        self.store = Store()
        self.checkpoints = Checkpoints(
            ckpt, lambda tag, what: _send_msg(report_fd, tag, json.dumps(what).encode())
        )
        self._listener = listener
        self._pending: dict[tuple[int, int], socket.socket] = {}
        self._ctl, self._report = ctl_fd, report_fd

    def begin_step(self, step: int) -> None:
        """Tell the harness this host starts `step` (a fault may be waiting for it)."""
        _send_msg(self._report, b"S", struct.pack("<i", step))
        _read_exact_fd(self._ctl, 1)

    def log(self, **event: Any) -> None:
        """Record an event (JSON values) in this host's log, which the tests read."""
        event.setdefault("t", time.clock_gettime(time.CLOCK_MONOTONIC))
        _send_msg(self._report, b"L", json.dumps(event).encode())

    def connect(
        self, members: Sequence[int], tag: int, timeout: float | None = None,
        join_timeout: float = 10.0,
    ) -> Comm:  # fmt: skip
        """A full mesh among `members` (host ids; this host must be one). Every member must call
        it with the same list and tag within `join_timeout` seconds, or it raises RankFailure
        naming a member that did not join. The comm's sockets get `timeout` (default
        node.timeout): a recv or send that makes no progress for that long raises."""
        members = [int(m) for m in members]
        if self.host not in members or len(set(members)) != len(members):
            raise ValueError(f"host {self.host}: members {members} must list it once")
        timeout = self.timeout if timeout is None else timeout
        until = time.monotonic() + join_timeout
        out: dict[int, socket.socket] = {}
        for m in members:
            if m > self.host:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(join_timeout)
                try:
                    s.connect((SWITCH_IP, RELAY_PORT))
                    s.sendall(HEADER.pack(self.host, m, tag))
                except OSError as e:
                    s.close()
                    raise RankFailure(m, f"cannot reach the switch: {e}") from None
                out[m] = s
        got: dict[int, socket.socket] = {}
        lower = [m for m in members if m < self.host]
        for m in lower:
            if (m, tag) in self._pending:
                got[m] = self._pending.pop((m, tag))
        while len(got) < len(lower):
            left = until - time.monotonic()
            if left <= 0:
                missing = [m for m in lower if m not in got]
                for s in (*out.values(), *got.values()):
                    s.close()
                raise RankFailure(
                    missing[0], f"did not connect within {join_timeout} s (tag {tag})"
                )
            self._listener.settimeout(left)
            try:
                s, _ = self._listener.accept()
                s.settimeout(max(0.1, left))
                src, _dst, t = HEADER.unpack(recv_exact(s, HEADER.size))
            except (OSError, EOFError):
                continue
            if t == tag and src in lower:
                got[src] = s
            elif t > tag:
                self._pending[(src, t)] = s  # a later generation's, early
            else:
                s.close()
        for s in got.values():
            s.sendall(b"\x01")
        for m, s in out.items():
            try:
                s.settimeout(max(0.05, until - time.monotonic()))
                recv_exact(s, 1)
            except (OSError, EOFError) as e:
                for x in (*out.values(), *got.values()):
                    x.close()
                raise RankFailure(m, f"did not accept: {type(e).__name__}: {e}") from None
        peers: dict[int, socket.socket] = {}
        for m, s in {**out, **got}.items():
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.settimeout(timeout)
            peers[members.index(m)] = s
        return Comm(members.index(self.host), len(members), members, peers, timeout)


# --------------------------------------------------------------------------- the relay
class _Link:
    def __init__(self) -> None:
        self.delay, self.jitter, self.rate, self.blackhole = 0.0, 0.0, None, False
        self.free: dict[tuple[int, int], float] = {}  # direction -> when the wire is free


class _Flow:
    """One direction of one relayed connection."""

    def __init__(self, src: socket.socket, dst: socket.socket, a: int, b: int) -> None:
        self.src, self.dst, self.a, self.b = src, dst, a, b
        self.queue: deque[list[Any]] = deque()  # [release time, bytes]
        self.queued = 0
        self.last = 0.0
        self.eof = False
        self.done = False


def _relay_main(ctl_fd: int, report_fd: int, n: int, seed: int) -> None:
    rnd = random.Random(seed)
    links = {(a, b): _Link() for a in range(n) for b in range(a + 1, n)}
    relay = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    relay.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    relay.bind((SWITCH_IP, RELAY_PORT))
    relay.listen(256)
    store_l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    store_l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    store_l.bind((SWITCH_IP, STORE_PORT))
    store_l.listen(256)
    relay.setblocking(False)
    store_l.setblocking(False)
    data: dict[str, str] = {}
    store_conns: dict[socket.socket, bytes] = {}
    heads: dict[socket.socket, tuple[bytes, float]] = {}  # accepted, header not read yet
    connecting: dict[socket.socket, tuple[socket.socket, bytes, float]] = {}  # dst -> src
    flows: list[_Flow] = []
    ctl_buf = b""
    headers: list[tuple[int, int, int]] = []  # (src, dst, tag) of every connection, for the tests
    _send_msg(report_fd, b"R")

    def key(a: int, b: int) -> tuple[int, int]:
        return (min(a, b), max(a, b))

    def close_pair(f: _Flow) -> None:
        for s in (f.src, f.dst):
            with contextlib.suppress(OSError):
                s.close()
        for g in flows:
            if {g.src, g.dst} == {f.src, f.dst}:
                g.done = True

    def store_op(req: dict[str, Any]) -> Any:
        op, k = req["op"], req["k"]
        if op == "set":
            data[k] = req["v"]
            return True
        if op == "get":
            return data.get(k)
        if op == "add":
            data[k] = str(int(data.get(k, "0")) + req["v"])
            return int(data[k])
        if op == "cas":
            if data.get(k) == req["e"]:
                data[k] = req["v"]
            return data.get(k)
        if op == "list":
            return {kk: v for kk, v in data.items() if kk.startswith(k)}
        return None

    while True:
        now = time.monotonic()
        flows = [f for f in flows if not f.done]
        rlist: list[Any] = [relay, store_l, ctl_fd, *store_conns, *heads]
        wlist: list[Any] = list(connecting)
        wake = now + 0.05
        for f in flows:
            link = links[key(f.a, f.b)]
            if not f.eof and not link.blackhole and f.queued < (1 << 18):
                rlist.append(f.src)
            if f.queue and not link.blackhole:
                if f.queue[0][0] <= now:
                    wlist.append(f.dst)
                else:
                    wake = min(wake, f.queue[0][0])
        # Generous limits: on a loaded machine this process may not run for a second or more,
        # and a connection that completed meanwhile must not be taken for an unreachable host.
        for s, (_b, t0) in list(heads.items()):
            if now - t0 > 10.0:
                s.close()
                del heads[s]
        for d, (s, _h, t0) in list(connecting.items()):
            if now - t0 > 10.0:  # the destination is unreachable: refuse the source
                d.close()
                s.close()
                del connecting[d]
        try:
            r, w, _ = select.select(rlist, wlist, [], max(0.0, wake - now))
        except (OSError, ValueError):
            flows = [f for f in flows if f.src.fileno() >= 0 and f.dst.fileno() >= 0]
            continue
        now = time.monotonic()
        if ctl_fd in r:
            chunk = os.read(ctl_fd, 65536)
            if not chunk:
                return
            ctl_buf += chunk
            while b"\n" in ctl_buf:
                line, ctl_buf = ctl_buf.split(b"\n", 1)
                cmd = json.loads(line)
                if "headers" in cmd:
                    _send_msg(report_fd, b"T", json.dumps(headers[:100000]).encode())
                    continue
                link = links[key(*cmd["link"])]
                for name in ("delay", "jitter", "rate", "blackhole"):
                    if name in cmd:
                        setattr(link, name, cmd[name])
                _send_msg(report_fd, b"A")
        if relay in r:
            with contextlib.suppress(OSError):
                s, _ = relay.accept()
                s.setblocking(False)
                heads[s] = (b"", now)
        if store_l in r:
            with contextlib.suppress(OSError):
                s, _ = store_l.accept()
                s.setblocking(False)
                store_conns[s] = b""
        for s in [x for x in r if x in store_conns]:
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                s.close()
                del store_conns[s]
                continue
            buf = store_conns[s] + chunk
            replies = b""
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                replies += json.dumps({"v": store_op(json.loads(line))}).encode() + b"\n"
            store_conns[s] = buf
            try:
                s.setblocking(True)
                s.settimeout(1.0)
                s.sendall(replies)
                s.setblocking(False)
            except OSError:
                s.close()
                del store_conns[s]
        for s in [x for x in r if x in heads]:
            got, t0 = heads[s]
            try:
                chunk = s.recv(HEADER.size - len(got))
            except OSError:
                chunk = b""
            if not chunk:
                s.close()
                del heads[s]
                continue
            got += chunk
            if len(got) < HEADER.size:
                heads[s] = (got, t0)
                continue
            del heads[s]
            src, dst, _tag = HEADER.unpack(got)
            headers.append((src, dst, _tag))
            if not (0 <= src < n and 0 <= dst < n and src != dst):
                s.close()
                continue
            d = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            d.setblocking(False)
            d.connect_ex((host_ip(dst), HOST_PORT))
            connecting[d] = (s, got, now)
        for d in [x for x in w if x in connecting]:
            s, hdr, _t0 = connecting.pop(d)
            if d.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                d.close()
                s.close()
                continue
            src, dst, _tag = HEADER.unpack(hdr)
            fwd, back = _Flow(s, d, src, dst), _Flow(d, s, dst, src)
            fwd.queue.append([now, hdr])
            fwd.queued = len(hdr)
            flows += [fwd, back]
        for f in flows:
            if f.done or f.src not in r:
                continue
            try:
                chunk = f.src.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                close_pair(f)
                continue
            if not chunk:
                f.eof = True
                f.queue.append([now, b""])  # the close travels behind the data
                continue
            link = links[key(f.a, f.b)]
            release = max(f.last, now + link.delay + rnd.uniform(0, link.jitter))
            if link.rate:
                start = max(release, link.free.get((f.a, f.b), 0.0))
                release = start + len(chunk) / link.rate
                link.free[(f.a, f.b)] = release
            f.last = release
            f.queue.append([release, chunk])
            f.queued += len(chunk)
        for f in flows:
            if f.done or f.dst not in w:
                continue
            while f.queue and f.queue[0][0] <= now:
                chunk = f.queue[0][1]
                if chunk == b"":
                    with contextlib.suppress(OSError):
                        f.dst.shutdown(socket.SHUT_WR)
                    f.queue.popleft()
                    f.done = True
                    other = [g for g in flows if g.src is f.dst and g.dst is f.src]
                    if not other or other[0].done:
                        close_pair(f)
                    break
                try:
                    k = f.dst.send(chunk)
                except BlockingIOError:
                    break
                except OSError:
                    close_pair(f)
                    break
                f.queued -= k
                if k < len(chunk):
                    f.queue[0][1] = chunk[k:]
                    break
                f.queue.popleft()


# --------------------------------------------------------------------------- the host
def _host_main(
    host: int, hosts: list[int], ctl_fd: int, report_fd: int, ckpt: str,
    fn: Callable[..., Any], cfg: Any, timeout: float,
) -> None:  # fmt: skip
    _read_exact_fd(ctl_fd, 1)  # eth0 is configured
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((host_ip(host), HOST_PORT))
    lst.listen(256)
    _send_msg(report_fd, b"R")
    _read_exact_fd(ctl_fd, 1)  # go
    # This host's own data (jobs.grad): drawn here, after the fork, so no other host's
    # process ever holds it; the tests learn it from the report, for their oracle.
    _OWN_DATA[host] = int.from_bytes(os.urandom(6), "little")
    _send_msg(report_fd, b"K", struct.pack("<Q", _OWN_DATA[host]))
    node = Node(host, hosts, lst, ckpt, ctl_fd, report_fd, timeout)
    report: dict[str, Any] = {}
    try:
        value = fn(node, cfg)
        report["value"] = _plain(value)
    except BaseException as e:  # everything a host's code can do, reported
        report["error"] = f"{type(e).__name__}: {e}"
        report["error_type"] = type(e).__name__
        report["failed_host"] = getattr(e, "host", None) if isinstance(e, RankFailure) else None
        report["where"] = _where(e)
    report["end"] = time.clock_gettime(time.CLOCK_MONOTONIC)
    _send_msg(report_fd, b"D", json.dumps(report).encode())


_OWN_DATA: dict[int, int] = {}  # on a host's process: that host's data seed, nothing else


def own_data(host: int) -> int:
    """The seed of host `host`'s own data: only host `host`'s process has it."""
    if host not in _OWN_DATA:
        where = f"host {next(iter(_OWN_DATA))}" if _OWN_DATA else "the test process"
        raise ValueError(f"host {host}'s data is only on host {host}, not on {where}")
    return _OWN_DATA[host]


def _plain(value: Any) -> Any:
    """What crosses back to the test: JSON, with numpy arrays as {"__array__": list, dtype}."""
    if isinstance(value, np.ndarray):
        return {"__array__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"returned a {type(value).__name__}, which cannot leave the host")


def unplain(value: Any) -> Any:
    if isinstance(value, dict):
        if "__array__" in value:
            return np.array(value["__array__"], dtype=np.dtype(value["dtype"]))
        return {k: unplain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unplain(v) for v in value]
    return value


_GIVEN = {"netcluster.py", "drills.py"}


def _where(exc: BaseException) -> tuple[str, int] | None:
    found = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        path = Path(frame.f_code.co_filename)
        if path.name not in _GIVEN and "harness" not in path.parts and path.suffix == ".py":
            found = (str(path), lineno)
    return found


# --------------------------------------------------------------------------- results
@dataclass
class HostResult:
    host: int
    value: Any = None
    error: str | None = None
    error_type: str | None = None
    failed_host: int | None = None
    where: tuple[str, int] | None = None
    end: float | None = None
    log: list[dict[str, Any]] = field(default_factory=list)
    steps: list[tuple[int, float]] = field(default_factory=list)  # (step, when begun)
    finished: bool = False  # the function returned or raised
    killed: str | None = None  # "fault" (a kill fault), "deadline" (still running at it)
    data: int | None = None  # the seed of this host's own data (jobs.grad's `data`)
    saves: list[tuple[int, list[Any], float]] = field(default_factory=list)  # checkpoints saved
    loads: list[tuple[Any, float]] = field(default_factory=list)  # what latest() returned


@dataclass
class RunResult:
    hosts: int
    start: float  # CLOCK_MONOTONIC when the hosts were released
    results: list[HostResult]
    fired: list[tuple[Fault, float]]  # each fault and when it fired
    headers: list[tuple[int, int, int]] = field(default_factory=list)  # (src, dst, tag) seen

    def value(self, h: int) -> Any:
        """What host h's function returned; raises what it raised, KataTodo as KataTodo."""
        r = self.results[h]
        if r.error is not None:
            if r.error_type == "KataTodo":
                from harness import KataTodo

                raise KataTodo(r.error.split(": ", 1)[-1])
            _reraise(f"host {h} raised {r.error}", r.where)
        if r.killed == "deadline":
            raise ClusterError(f"host {h} was still running at the run's deadline (killed)")
        if not r.finished:
            raise ClusterError(f"host {h} ended without a result ({r.killed or 'died'})")
        return unplain(r.value)

    def check_todo(self) -> None:
        """Raise KataTodo if any host reached a todo()."""
        for r in self.results:
            if r.error_type == "KataTodo":
                from harness import KataTodo

                raise KataTodo((r.error or "").split(": ", 1)[-1])


def _reraise(message: str, where: tuple[str, int] | None) -> None:
    if where is None:
        raise ClusterError(message)
    path, line = where
    code = compile("\n" * (max(line, 1) - 1) + "raise ClusterError(message)", path, "exec")
    exec(code, {"ClusterError": ClusterError, "message": message})


# --------------------------------------------------------------------------- the cluster
def _fork_in_netns(body: Callable[[int, int], None]) -> tuple[int, int, int]:
    """Fork a process in a new network namespace running body(ctl_fd, report_fd).
    Returns (pid, the parent's ctl write end, the parent's report read end)."""
    ctl_r, ctl_w = os.pipe()
    rep_r, rep_w = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 0
        try:
            _die_with_parent()
            if os.getppid() != parent:
                os._exit(1)
            os.close(ctl_w)
            os.close(rep_r)
            for fd in _Cluster_fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _unshare_net()
            body(ctl_r, rep_w)
        except BaseException:
            status = 70
        finally:
            os._exit(status)
    os.close(ctl_r)
    os.close(rep_w)
    _Cluster_fds.update((ctl_w, rep_r))
    return pid, ctl_w, rep_r


_Cluster_fds: set[int] = set()  # every cluster's pipe ends in this process (closed in children)


def _sweep_checkpoint_dirs() -> None:
    """Remove the checkpoint directories of test processes killed before close(). No Cluster
    lives a quarter of an hour (a run's deadline is a minute): an older one is a leftover,
    whatever PID namespace or machine load its process had."""
    old = time.time() - 900
    for d in Path(tempfile.gettempdir()).glob("kata-ckpt-*"):
        with contextlib.suppress(OSError):
            if d.stat().st_mtime < old:
                shutil.rmtree(d, ignore_errors=True)


class Cluster:
    """`n` hosts, a switch, a relay and a store: see the module's docstring. Use it in a `with`
    (or call close()): closing kills every process of the cluster, which removes its namespaces,
    veths and bridge, and deletes its checkpoint directory."""

    def __init__(self, n: int, seed: int = 0, timeout: float = 1.0) -> None:
        if not 1 <= n <= 16:
            raise ValueError("1 to 16 hosts")
        self.n, self.seed, self.timeout = n, seed, timeout
        self.pids: list[int] = []
        self.namespaces: set[int] = set()  # the net namespaces' inodes, for leak checks
        _sweep_checkpoint_dirs()
        # A run killed before close() leaves it behind: the next Cluster of any run removes
        # it (the pid in the name says whose it was).
        self.ckpt = tempfile.mkdtemp(prefix=f"kata-ckpt-{os.getpid()}-")
        self._fds: list[int] = []
        self._ns_fds: list[int] = []
        self._left: list[str] = []
        self._relay: tuple[int, int, _Reader] | None = None
        self._closed = False
        self._used = False

    # the switch is built with the hosts, in run(): each host is a fresh process
    def shape(
        self, link: tuple[int, int], *, delay: float | None = None, jitter: float | None = None,
        rate: float | None = None, blackhole: bool | None = None,
    ) -> None:  # fmt: skip
        """Set link {a, b}'s delay, jitter (seconds), rate (bytes/s, None: unlimited) and
        blackhole, now or (before run) for the run."""
        cmd: dict[str, Any] = {"link": [int(link[0]), int(link[1])]}
        for k, v in (
            ("delay", delay),
            ("jitter", jitter),
            ("rate", rate),
            ("blackhole", blackhole),
        ):
            if v is not None:
                cmd[k] = v
        self._shaping.append(cmd)
        if self._relay is not None:
            self._ctl_relay(cmd)

    @property
    def _shaping(self) -> list[dict[str, Any]]:
        if not hasattr(self, "_shape_cmds"):
            self._shape_cmds: list[dict[str, Any]] = []
        return self._shape_cmds

    def _ctl_relay(self, cmd: dict[str, Any]) -> None:
        assert self._relay is not None
        _pid, ctl, reader = self._relay
        os.write(ctl, json.dumps(cmd).encode() + b"\n")
        until = time.monotonic() + 5
        want = sum(1 for t, _ in reader.msgs if t == b"A") + 1
        while sum(1 for t, _ in reader.msgs if t == b"A") < want and time.monotonic() < until:
            ready, _, _ = select.select([reader.fd], [], [], max(0.0, until - time.monotonic()))
            if ready:
                reader.pump()
                if reader.eof:
                    raise ClusterError("the relay died")

    def _link_state(self, h: int, up: bool) -> None:
        assert self._relay is not None
        _ip(self._relay[0], f"link set vh{h} {'up' if up else 'down'}\n")

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Kill and reap every process of the cluster; remove the checkpoint directory."""
        if self._closed:
            return
        self._closed = True
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in self.pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        # Anything else still inside the namespaces (a grandchild your code forked, which
        # PR_SET_PDEATHSIG does not reach) is ours: the namespaces are held open, so their
        # inode numbers cannot belong to anybody else yet.
        until = time.monotonic() + 5.0
        while self._ns_fds and time.monotonic() < until:
            stray = processes_in(self.namespaces)
            if not stray:
                break
            for pid in stray:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        if self._ns_fds:
            self._left = [f"process {p} in one of the cluster's network namespaces"
                          for p in processes_in(self.namespaces)]  # fmt: skip
        for fd in self._ns_fds:
            _Cluster_fds.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
        self._ns_fds = []
        for fd in self._fds:
            _Cluster_fds.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.ckpt, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """What of this cluster was still there after close() killed and reaped it: its
        processes, processes in its namespaces (looked for while the namespaces were still
        held), its checkpoint directory. Nothing, for a cluster that cleaned up."""
        left = list(self._left) if self._closed else ["the cluster is not closed"]
        for pid in self.pids:
            try:
                os.kill(pid, 0)
                left.append(f"process {pid}")
            except ProcessLookupError:
                pass
        if os.path.exists(self.ckpt):
            left.append(f"checkpoint directory {self.ckpt}")
        return left

    def _spawn(self, body: Callable[[int, int], None]) -> tuple[int, int, _Reader]:
        pid, ctl, rep = _fork_in_netns(body)
        self.pids.append(pid)
        self._fds += [ctl, rep]
        reader = _Reader(rep)
        until = time.monotonic() + 10
        while not reader.msgs and not reader.eof and time.monotonic() < until:
            ready, _, _ = select.select([rep], [], [], max(0.0, until - time.monotonic()))
            if ready:
                reader.pump()
        ino = _net_inode(pid)
        if ino is not None:
            self.namespaces.add(ino)
            # Held open until close(): the namespace (and its inode number, which the kernel
            # recycles) stays ours while we look for processes left in it.
            with contextlib.suppress(OSError):
                fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                self._ns_fds.append(fd)
                _Cluster_fds.add(fd)
        return pid, ctl, reader

    def run(
        self, fn: Callable[..., Any], cfg: Any = None, *, faults: Sequence[Fault] = (),
        deadline: float = 30.0, barrier: int | None = None,
    ) -> RunResult:  # fmt: skip
        """Build the cluster, run fn(node, cfg) on every host, fire the faults, and return what
        each host returned or raised. A host still running `deadline` seconds after the start
        is killed and reported so. One run per Cluster.

        barrier: a step number; every host's begin_step(barrier) then waits until all hosts
        have called it, and the faults' `at` counts from that moment instead of the start (the
        drills: the faults land at the same point of every host's work, however long this
        machine took to connect them)."""
        if self._used:
            raise ClusterError("one run per Cluster: make a new one")
        self._used = True
        n = self.n
        hosts = list(range(n))
        # Hosts first (each waits to be configured), then the switch moves the veths into them.
        procs = []
        for h in hosts:

            def body(ctl: int, rep: int, h: int = h) -> None:
                _send_msg(rep, b"U")
                _host_main(h, hosts, ctl, rep, self.ckpt, fn, cfg, self.timeout)

            pid, ctl, reader = self._spawn(body)
            reader.msgs.clear()
            procs.append((pid, ctl, reader))
        ready = {"ok": False}

        def switch(ctl: int, rep: int) -> None:
            _send_msg(rep, b"U")
            _read_exact_fd(ctl, 1)
            _relay_main(ctl, rep, n, self.seed)

        sw_pid, sw_ctl, sw_reader = self._spawn(switch)
        sw_reader.msgs.clear()
        self._relay = (sw_pid, sw_ctl, sw_reader)
        # A bridge without an address of its own takes its ports' lowest MAC and changes it
        # when that port goes (a killed host's veth): every host's ARP entry for the switch
        # would then point nowhere. A fixed address keeps the switch where it is.
        script = ["link set lo up", "link add br0 address 02:00:0a:c8:00:fe type bridge"]
        script.append("link set br0 up")
        script.append(f"addr add {SWITCH_IP}/24 dev br0")
        for h, (pid, _c, _r) in zip(hosts, procs, strict=True):
            script.append(f"link add vh{h} type veth peer name eth0 netns {pid}")
            script.append(f"link set vh{h} master br0")
            script.append(f"link set vh{h} up")
        _ip(sw_pid, "\n".join(script) + "\n")
        for h, (pid, ctl, _r) in zip(hosts, procs, strict=True):
            _ip(pid, f"link set lo up\naddr add {host_ip(h)}/24 dev eth0\nlink set eth0 up\n")
            os.write(ctl, b"c")
        os.write(sw_ctl, b"c")
        until = time.monotonic() + 10
        readers = [r for _p, _c, r in procs] + [sw_reader]
        while time.monotonic() < until:
            waiting = [r for r in readers if not r.msgs and not r.eof]
            if not waiting:
                break
            rd, _, _ = select.select([r.fd for r in waiting], [], [], 0.1)
            for r in waiting:
                if r.fd in rd:
                    r.pump()
        if any(not r.msgs for r in readers):
            raise ClusterError("a host or the switch did not come up within 10 s")
        ready["ok"] = True
        for r in readers:
            r.msgs.clear()
        for cmd in self._shaping:
            self._ctl_relay(cmd)
        return self._drive(procs, list(faults), deadline, barrier)

    def _fire(self, f: Fault, pid: int) -> None:
        if f.kind == "kill":
            os.kill(pid, signal.SIGKILL)
        elif f.kind == "stop":
            os.kill(pid, signal.SIGSTOP)
        elif f.kind == "partition":
            self._link_state(f.host, False)
        elif f.kind == "link":
            assert f.link is not None
            self.shape(f.link, blackhole=True)
        elif f.kind == "slow":
            assert f.link is not None
            self.shape(f.link, delay=0.05, jitter=0.1, rate=2e5)

    def _drive(self, procs: list[tuple[int, int, _Reader]], faults: list[Fault],
               deadline: float, barrier: int | None) -> RunResult:  # fmt: skip
        start = time.clock_gettime(time.CLOCK_MONOTONIC)
        t0 = time.monotonic()
        until = t0 + deadline
        if barrier is not None:
            t0 = math.inf  # the faults' clock starts at the barrier
        waiting: set[int] = set()  # hosts held at the barrier
        for _pid, ctl, _r in procs:
            os.write(ctl, b"g")
        results = [HostResult(h) for h in range(self.n)]
        fired: list[tuple[Fault, float]] = []
        pending = [f for f in faults]
        flaps: dict[int, tuple[float, bool, float]] = {}  # host -> (next toggle, up, period)
        stopped: set[int] = set()
        while True:
            now = time.monotonic()
            for f in [f for f in pending if f.at is not None and t0 + f.at <= now]:
                pending.remove(f)
                fired.append((f, time.clock_gettime(time.CLOCK_MONOTONIC)))
                if f.kind == "flap":
                    self._link_state(f.host, False)
                    flaps[f.host] = (now + f.period, False, f.period)
                else:
                    self._fire(f, procs[f.host][0] if f.host >= 0 else 0)
                    if f.kind == "kill":
                        results[f.host].killed = "fault"
                    if f.kind == "stop":
                        stopped.add(f.host)
            for h, (when, up, period) in list(flaps.items()):
                if when <= now:
                    self._link_state(h, not up)
                    flaps[h] = (now + period, not up, period)
            live = [
                h for h in range(self.n)
                if not results[h].finished and results[h].killed is None and h not in stopped
                and not procs[h][2].eof
            ]  # fmt: skip
            if not live or now >= until:
                break
            wake = min([until, now + 0.02 if flaps else until]
                       + [t0 + f.at for f in pending if f.at is not None])  # fmt: skip
            rd, _, _ = select.select([procs[h][2].fd for h in live], [], [], max(0.0, wake - now))
            for h in live:
                reader = procs[h][2]
                if reader.fd not in rd:
                    continue
                reader.pump()
                for tag, payload in reader.msgs:
                    if tag == b"S":
                        (step,) = struct.unpack("<i", payload)
                        results[h].steps.append((step, time.clock_gettime(time.CLOCK_MONOTONIC)))
                        hit = [f for f in pending if f.step == step and f.host == h]
                        ack = True
                        if barrier is not None and step == barrier and t0 == math.inf:
                            waiting.add(h)
                            ack = False
                            if len(waiting) == self.n:
                                t0 = time.monotonic()
                                for k in sorted(waiting):
                                    os.write(procs[k][1], b"a")
                        for f in hit:
                            pending.remove(f)
                            fired.append((f, time.clock_gettime(time.CLOCK_MONOTONIC)))
                            if f.kind == "flap":
                                self._link_state(f.host, False)
                                flaps[f.host] = (time.monotonic() + f.period, False, f.period)
                            else:
                                self._fire(f, procs[f.host][0])
                            if f.kind == "kill" and f.host == h:
                                results[h].killed, ack = "fault", False
                            if f.kind == "stop" and f.host == h:
                                stopped.add(h)
                                ack = False
                        if ack:
                            os.write(procs[h][1], b"a")
                    elif tag == b"L":
                        results[h].log.append(json.loads(payload))
                    elif tag == b"K":
                        (results[h].data,) = struct.unpack("<Q", payload)
                    elif tag == b"C":
                        step, state = json.loads(payload)
                        results[h].saves.append((step, state, time.monotonic()))
                    elif tag == b"P":
                        results[h].loads.append((json.loads(payload), time.monotonic()))
                    elif tag == b"D":
                        rep = json.loads(payload)
                        r = results[h]
                        r.value, r.error = rep.get("value"), rep.get("error")
                        r.error_type, r.failed_host = rep.get("error_type"), rep.get("failed_host")
                        r.where = tuple(rep["where"]) if rep.get("where") else None  # type: ignore[assignment]
                        r.end, r.finished = rep["end"], True
                reader.msgs.clear()
        for h in range(self.n):
            r = results[h]
            if not r.finished and r.killed is None:
                r.killed = "deadline" if h not in stopped else "stopped"
        headers = self._relay_headers()
        self.close()
        return RunResult(self.n, start, results, fired, headers)

    def _relay_headers(self) -> list[tuple[int, int, int]]:
        """Every connection's header the relay forwarded: who connected to whom, with which tag."""
        if self._relay is None:
            return []
        _pid, ctl, reader = self._relay
        with contextlib.suppress(OSError):
            os.write(ctl, b'{"headers": 1}\n')
        until = time.monotonic() + 3
        while time.monotonic() < until and not reader.eof:
            for t, payload in reader.msgs:
                if t == b"T":
                    return [tuple(x) for x in json.loads(payload)]  # type: ignore[misc]
            ready, _, _ = select.select([reader.fd], [], [], max(0.0, until - time.monotonic()))
            if ready:
                reader.pump()
        return []


__all__ = [
    "Checkpoints", "ClusterError", "Cluster", "Comm", "FAULTS", "Fault", "HostResult", "Node",
    "RankFailure", "RunResult", "Store", "StoreUnreachable", "allreduce", "host_ip", "own_data",
    "processes_in", "recv_exact", "recv_frame", "send_frame",
]  # fmt: skip
