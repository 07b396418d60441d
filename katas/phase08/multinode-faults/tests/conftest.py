"""Fixtures of the multinode-faults tests: your modules and the given ones, the failure drills
(real clusters, real faults; run once per session, on first use, from the run seed) and the
replay of a recorded trace through a detector."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.testing import rng, run_seed

# The detector's thresholds in every drill: a heartbeat every 50 ms, suspect after 300 ms of
# silence, dead after 1.5 s. A fault fires 0.6 s into a 3.0 s drill: 0.9 s of margin after the
# 1.5 s a silent host needs to be declared dead.
PERIOD, SUSPECT_AFTER, DEAD_AFTER = 0.05, 0.3, 1.5
FAULT_AT, DURATION = 0.6, 3.0
DRILL_KINDS = ("kill", "stop", "partition", "link", "slow", "flap")


@pytest.fixture(scope="module")
def detector(kata: Any) -> Any:
    """detector.py (yours): task "detect"."""
    return kata.module("detector")


@pytest.fixture(scope="module")
def diagnose(kata: Any) -> Any:
    """diagnose.py (yours): tasks "report" and "straggler"."""
    return kata.module("diagnose")


@pytest.fixture(scope="module")
def elastic(kata: Any) -> Any:
    """elastic.py (yours): task "recover"."""
    return kata.module("elastic")


@pytest.fixture(scope="module")
def netcluster(kata: Any) -> Any:
    """netcluster.py (given): the cluster, its faults, the store, the ring all-reduce."""
    return kata.module("netcluster")


@pytest.fixture(scope="module")
def jobs(kata: Any) -> Any:
    """jobs.py (given): the drill, the training job, the types."""
    return kata.module("jobs")


@dataclass
class Drill:
    kind: str
    hosts: int
    fault: Any  # netcluster.Fault
    fault_time: float  # CLOCK_MONOTONIC when it fired
    traces: dict[int, dict[str, Any]]  # host -> its drill trace (hosts that reported)

    def faulty_hosts(self) -> set[int]:
        return {self.fault.host} if self.fault.host >= 0 else set()

    def faulty_link(self) -> tuple[int, int] | None:
        return tuple(sorted(self.fault.link)) if self.fault.link else None  # type: ignore[return-value]


_DRILLS: dict[str, Drill] = {}


def _cache_file(netcluster: Any, jobs: Any, kind: str) -> Path | None:
    """Where the drill of `kind` for this run seed is kept between pytest processes: a drill runs
    no code of yours, so `kata verify`'s runs of one seed (the reference, then every shortcut)
    measure it once. Keyed by the seed and the given code; None where there is no cache."""
    try:
        from harness.native.cache import cache_root

        given = b"".join(Path(m.__file__).read_bytes() for m in (netcluster, jobs))
        key = hashlib.sha256(
            given + repr((run_seed(), kind, PERIOD, FAULT_AT, DURATION)).encode()
        ).hexdigest()[:24]
        return cache_root() / "multinode-faults-drills" / f"{key}.json"
    except Exception:  # no cache here: run the drill
        return None


def run_drill(netcluster: Any, jobs: Any, kind: str) -> Drill:
    """A cluster of 3 to 5 hosts, one fault of `kind` on a host or link drawn from the run
    seed, every host running jobs.drill; the cluster is gone (checked) when this returns."""
    if kind in _DRILLS:
        return _DRILLS[kind]
    cached = _cache_file(netcluster, jobs, kind)
    if cached is not None and cached.exists():
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            d = json.loads(cached.read_text())
            fault = netcluster.Fault(**{**d["fault"], "link": tuple(d["fault"]["link"])
                                        if d["fault"]["link"] else None})  # fmt: skip
            traces = {int(h): _int_keys(t) for h, t in d["traces"].items()}
            _DRILLS[kind] = Drill(kind, d["hosts"], fault, d["fault_time"], traces)
            return _DRILLS[kind]
    g = rng(f"drill-{kind}")
    n = int(g.integers(3, 6))
    a, b = (int(x) for x in g.choice(n, 2, replace=False))
    if kind in ("link", "slow"):
        fault = netcluster.Fault(kind, link=(a, b), at=FAULT_AT)
    else:
        fault = netcluster.Fault(kind, host=a, at=FAULT_AT, period=0.3)
    cfg = jobs.DrillConfig(period=PERIOD, duration=DURATION)
    with netcluster.Cluster(n, seed=int(g.integers(1 << 30))) as c:
        res = c.run(jobs.drill, cfg, faults=[fault], deadline=DURATION + 30, barrier=0)
    left = c.leftovers()
    assert not left, f"the {kind} drill's cluster left {left} behind"
    fired = [t for f, t in res.fired if f == fault]
    assert fired, f"the {kind} drill's fault never fired"
    traces = {}
    for r in res.results:
        if r.finished and r.error is None:
            traces[r.host] = _int_keys(netcluster.unplain(r.value))
        elif r.error is not None:
            raise AssertionError(f"host {r.host} of the {kind} drill raised {r.error}")
    _DRILLS[kind] = Drill(kind, n, fault, fired[0], traces)
    if cached is not None:
        with contextlib.suppress(OSError):
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"hosts": n, "fault": dataclasses.asdict(fault),
                                       "fault_time": fired[0], "traces": traces}))  # fmt: skip
            os.replace(tmp, cached)
            kept = sorted(cached.parent.glob("*.json"), key=lambda f: f.stat().st_mtime)
            for old in kept[:-36]:  # the last six seeds' drills: fresh seeds never pile up
                old.unlink()
    return _DRILLS[kind]


def _int_keys(trace: dict[str, Any]) -> dict[str, Any]:
    for k in ("heartbeats", "closed", "probes"):
        trace[k] = {int(p): v for p, v in trace[k].items()}
    return trace


@pytest.fixture(scope="module")
def drill(netcluster: Any, jobs: Any) -> Any:
    """drill(kind) -> Drill: the session's drill of that kind (run on first use)."""
    return lambda kind: run_drill(netcluster, jobs, kind)


def events(trace: dict[str, Any]) -> list[tuple[float, str, int]]:
    """A trace's events in time order: (time, "heartbeat" or "closed", peer)."""
    out = [(t, "heartbeat", p) for p, ts in trace["heartbeats"].items() for t in ts]
    out += [(t, "closed", p) for p, t in trace["closed"].items()]
    return sorted(out)


@pytest.fixture(scope="module")
def drills() -> Any:
    """The drills' constants and helpers: PERIOD, SUSPECT_AFTER, DEAD_AFTER, FAULT_AT,
    DURATION, KINDS, events(trace)."""
    return SimpleNamespace(PERIOD=PERIOD, SUSPECT_AFTER=SUSPECT_AFTER, DEAD_AFTER=DEAD_AFTER,
                           FAULT_AT=FAULT_AT, DURATION=DURATION, KINDS=DRILL_KINDS,
                           events=events)  # fmt: skip


@pytest.fixture(scope="module")
def replay() -> Any:
    """replay(make, trace, step=0.01) -> {peer: [(time, status), ...]}: feed a recorded trace
    to the detector make(peers, start) in time order, and read every peer's status after each
    event and every `step` seconds up to the trace's end. Only the changes are kept."""

    def run(make: Any, trace: dict[str, Any], step: float = 0.01) -> dict[int, list[Any]]:
        peers = sorted(trace["heartbeats"])
        det = make(peers, trace["start"])
        timeline: dict[int, list[Any]] = {p: [] for p in peers}

        def look(now: float) -> None:
            for p in peers:
                s = det.status(p, now)
                if not timeline[p] or timeline[p][-1][1] != s:
                    timeline[p].append((round(now, 6), s))

        evs = events(trace)
        t, i = trace["start"], 0
        while t <= trace["end"]:
            while i < len(evs) and evs[i][0] <= t:
                when, what, p = evs[i]
                getattr(det, what)(p, when)
                look(when)
                i += 1
            look(t)
            t += step
        return timeline

    return run
