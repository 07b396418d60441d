"""The jobs the tests run on the cluster, and the types your functions take and return (given).

`drill` is what every host runs in a failure drill: heartbeats to every other host over a side
channel (its own TCP connections, through the same links as the data), and a probe message
over the data connections every `probe_every` seconds. It records what it saw, nothing more:
when each heartbeat arrived, when a connection closed, how long each probe took to cross each
link. The tests feed those real traces to your detector, your diagnosis and your straggler
finder, and hold the answers against the fault they injected.

`TrainConfig`, `grad` and `TrainResult` are the training job of task "recover".
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .netcluster import Node, RankFailure, own_data  # noqa: F401  (re-exported for elastic.py)

ALIVE, SUSPECT, DEAD = "alive", "suspect", "dead"
STATUSES = (ALIVE, SUSPECT, DEAD)
SLOW_FACTOR = 5.0  # a link is slow when its median probe time is this many times the run's median
_HB = struct.Struct("<Q")  # a heartbeat: its sequence number
_PROBE = struct.Struct("<dI")  # a probe's header: when it was sent (CLOCK_MONOTONIC), its size


@dataclass(frozen=True)
class DrillConfig:
    period: float = 0.05  # seconds between two heartbeats to each peer
    duration: float = 3.0  # seconds the drill runs on every host
    probe_every: float = 0.25  # seconds between two probes to each peer
    probe_bytes: int = 16384  # one probe's payload


@dataclass(frozen=True)
class Diagnosis:
    """What failed: hosts (a host down or cut off from everybody) and links (a pair of hosts
    that cannot talk while both talk to the others), each list sorted, links as (low, high)."""

    hosts: list[int] = field(default_factory=list)
    links: list[tuple[int, int]] = field(default_factory=list)


def drill(node: Node, cfg: DrillConfig) -> dict[str, Any]:
    """Run on every host of a drill; returns this host's trace:

    {"start": t0, "end": t1,                      CLOCK_MONOTONIC seconds (one clock for all)
     "heartbeats": {peer: [arrival times]},       one entry per heartbeat received
     "closed": {peer: time},                      the heartbeat connection closed or reset
     "probes": {peer: [seconds]}}                 one-way time of each probe from that peer
    """
    hb = node.connect(node.hosts, 1, timeout=10.0)
    data = node.connect(node.hosts, 2, timeout=10.0)
    node.begin_step(0)  # every host connected: the drill (and the faults' clock) starts now
    hosts = node.hosts
    socks: dict[socket.socket, tuple[str, int]] = {}
    for r, s in hb.peers.items():
        socks[s] = ("hb", hosts[r])
    for r, s in data.peers.items():
        socks[s] = ("data", hosts[r])
    for s in socks:
        s.setblocking(False)
    out: dict[socket.socket, bytearray] = {s: bytearray() for s in socks}
    inb: dict[socket.socket, bytearray] = {s: bytearray() for s in socks}
    beats: dict[int, list[float]] = {hosts[r]: [] for r in hb.peers}
    closed: dict[int, float] = {}
    probes: dict[int, list[float]] = {hosts[r]: [] for r in data.peers}
    dead: set[socket.socket] = set()
    start = time.monotonic()
    end = start + cfg.duration
    next_hb, next_probe, seq = start, start + cfg.probe_every / 2, 0
    payload = bytes(cfg.probe_bytes)
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if now >= next_hb:
            seq += 1
            for s, (kind, _p) in socks.items():
                if kind == "hb" and s not in dead:
                    out[s] += _HB.pack(seq)
            next_hb = max(next_hb + cfg.period, now)
        if now >= next_probe:
            for s, (kind, _p) in socks.items():
                if kind == "data" and s not in dead and not out[s]:
                    out[s] += _PROBE.pack(time.monotonic(), len(payload)) + payload
            next_probe = max(next_probe + cfg.probe_every, now)
        live = [s for s in socks if s not in dead]
        wl = [s for s in live if out[s]]
        wake = min(next_hb, next_probe, end)
        try:
            rd, wr, _ = select.select(live, wl, [], max(0.0, wake - time.monotonic()))
        except (OSError, ValueError):
            break
        now = time.monotonic()
        for s in wr:
            try:
                k = s.send(out[s])
                del out[s][:k]
            except BlockingIOError:
                pass
            except OSError:
                dead.add(s)
        for s in rd:
            kind, peer = socks[s]
            try:
                chunk = s.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                dead.add(s)
                if kind == "hb":
                    closed.setdefault(peer, now)
                continue
            buf = inb[s]
            buf += chunk
            if kind == "hb":
                whole = len(buf) // _HB.size
                beats[peer].extend([now] * whole)
                del buf[: whole * _HB.size]
            else:
                while len(buf) >= _PROBE.size:
                    sent, size = _PROBE.unpack_from(buf)
                    if len(buf) < _PROBE.size + size:
                        break
                    probes[peer].append(now - sent)
                    del buf[: _PROBE.size + size]
    stop = time.monotonic()
    time.sleep(0.5)  # the others end a little later: closing now would look like a crash
    for s in socks:
        with contextlib.suppress(OSError):
            s.close()
    return {"start": start, "end": stop, "heartbeats": beats, "closed": closed,
            "probes": probes}  # fmt: skip


# --------------------------------------------------------------------------- training
@dataclass(frozen=True)
class TrainConfig:
    steps: int = 12  # steps of the whole job
    ckpt_every: int = 3  # checkpoint after every this many completed steps
    size: int = 16  # elements of the state
    seed: int = 0  # what grad() draws from
    window: float = 3.0  # rendezvous: close once no host joined for this many seconds
    timeout: float = 2.0  # the comm's socket timeout (a collective gives up after it)


def grad(cfg: TrainConfig, host: int, step: int, data: int | None = None) -> np.ndarray:
    """Host `host`'s contribution at `step`: int64, drawn from the host's own data, which only
    host `host`'s process holds (another host's grad raises ValueError: what the others
    contributed reaches a host through the all-reduce or a checkpoint, nowhere else).
    `data` is for the tests, which learn each host's data from the cluster."""
    if data is None:
        data = own_data(host)
    rng = np.random.default_rng([cfg.seed, host, step, data])
    return rng.integers(-1000, 1000, cfg.size, dtype=np.int64)


@dataclass
class TrainResult:
    """What train() returns on a host that finished the job."""

    state: np.ndarray  # the state after cfg.steps steps
    members: list[int]  # the hosts of the last generation, sorted
    rank: int  # this host's rank in the last generation
    generation: int  # 0 if nothing failed, +1 per restart
    resumed_from: list[int]  # the step each restart resumed from, in order


class Excluded(Exception):
    """This host is not a member of the new generation (it joined too late, or not at all)."""


def dumps_members(members: list[int]) -> str:
    return json.dumps(sorted(int(m) for m in members))


__all__ = [
    "ALIVE", "DEAD", "DrillConfig", "Diagnosis", "Excluded", "RankFailure", "SLOW_FACTOR",
    "STATUSES", "SUSPECT", "TrainConfig", "TrainResult", "drill", "dumps_members", "grad",
]  # fmt: skip
