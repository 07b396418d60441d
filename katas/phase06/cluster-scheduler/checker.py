"""GIVEN (not graded): the invariant checker the tests run on every simulation.

check() replays an engine.Result's log, one instant at a time, against the trace alone (the
jobs' shapes, durations, estimates and priorities) and the topology's numbers; it trusts
nothing else the engine computed. After every instant it checks:

- no GPU double-booked: a GPU is bound to at most one job; pods have their size, on one node;
- gangs whole: a job holds GPUs only while it runs (no partial gang holds GPUs idle);
- work conserved for the head: the first waiting job in queue order (higher priority, then
  earlier submit, then lower id) never waits while it could start (enough free GPUs in pods
  of its shape);
- reservations honoured (EASY): when a job becomes the head, its shadow time is when the jobs
  running then would free room for it, by their expected ends (start + remaining estimate x
  slowdown); it must start by then, unless a more important job arrives or starts first;
- physics: each run lasts remaining work x slowdown; a preempted job redoes checkpoint_s.

It raises InvariantError naming the instant, the job and the rule. Use it yourself:
`checker.check(result, trace["jobs"])`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

TOL = 1e-6


class InvariantError(AssertionError):
    """A schedule broke an invariant (the message says which, when and for which job)."""


@dataclass
class Replay:
    """What happened to each job, rebuilt from the log (what the tests measure)."""

    submit: dict[int, float] = field(default_factory=dict)
    first_start: dict[int, float] = field(default_factory=dict)
    finish: dict[int, float] = field(default_factory=dict)
    preemptions: dict[int, int] = field(default_factory=dict)
    priority: dict[int, int] = field(default_factory=dict)
    instants: int = 0


def check(result: Any, rows: Sequence[Sequence[Any]]) -> Replay:
    """Replay `result` (an engine.Result) against the trace rows it was run on."""
    topo = result.topology
    per_node, island = topo.gpus_per_node, topo.island_size
    spec = {
        int(r[0]): (float(r[1]), int(r[2]), int(r[3]), float(r[4]), float(r[5]), int(r[6]))
        for r in rows
    }
    ckpt = float(result.checkpoint_s)
    order = {j: (-s[5], s[0], j) for j, s in spec.items()}
    owner: dict[int, int] = {}
    bound: dict[int, list[int]] = {}
    running: dict[int, tuple[float, list[int], float]] = {}  # start, gpus, slowdown
    work = {j: s[3] for j, s in spec.items()}
    est = {j: s[4] for j, s in spec.items()}
    waiting: set[int] = set()
    rep = Replay(priority={j: s[5] for j, s in spec.items()})
    guarantee: tuple[int, float] | None = None  # (head job, shadow time)

    def fail(t: float, msg: str) -> None:
        raise InvariantError(f"t={t:g}: {msg}")

    def slowdown(gpus: list[int], g: int) -> float:
        pods = [gpus[i : i + g] for i in range(0, len(gpus), g)]
        s = 1.0
        if any(len({x // island for x in p}) > -(-len(p) // island) for p in pods):
            s *= topo.island_penalty
        if len({p[0] // per_node // topo.nodes_per_rack for p in pods}) > 1:
            s *= topo.rack_penalty
        return s

    def release(gpus: list[int]) -> None:
        for x in gpus:
            del owner[x]

    def shadow(now: float, job: int) -> float:
        _, pods, g, *_ = spec[job]
        free = [per_node] * topo.nodes
        for x in owner:
            free[x // per_node] -= 1
        fits = lambda: sum(f // g for f in free) >= pods
        if fits():
            return now
        ends = sorted((s + est[j] * sd, j) for j, (s, _, sd) in running.items())
        for end, j in ends:
            for x in running[j][1]:
                free[x // per_node] += 1
            if fits():
                return end
        return math.inf

    def end_of_instant(t: float, started: list[int]) -> None:
        nonlocal guarantee
        rep.instants += 1
        for j, gpus in bound.items():
            fail(t, f"job {j} holds {len(gpus)} of its {spec[j][1] * spec[j][2]} GPUs without "
                    "running: a partial gang holds GPUs (bind all its pods at once or none)")  # fmt: skip
        head = min(waiting, key=order.__getitem__, default=None)
        if guarantee is not None:
            x, due = guarantee
            if x != head or any(order[j] < order[x] for j in started):
                guarantee = None  # a more important job came first: the reservation is void
            elif t > due + TOL * max(1.0, due):
                fail(t, f"job {x}, the head of the queue, was due to start by its reservation "
                        f"at t={due:g} and still waits: something delayed it (a backfilled job?)")  # fmt: skip
        if head is not None and guarantee is None:
            due = shadow(t, head)
            if due <= t:
                fail(t, f"job {head}, the head of the queue, could start now (enough free GPUs "
                        "for its pods) but waits")  # fmt: skip
            guarantee = (head, due)

    log = list(result.log)
    started: list[int] = []
    for i, e in enumerate(log):
        t, kind, j, gpus = e.time, e.kind, e.job, list(e.gpus)
        if j not in spec:
            fail(t, f"job {j} is not in the trace")
        submit, pods, g, _, _, _ = spec[j]
        if kind == "submit":
            if j in rep.submit or abs(t - submit) > TOL * max(1.0, submit):
                fail(t, f"job {j} submitted twice or at the wrong time")
            rep.submit[j] = t
            waiting.add(j)
        elif kind == "bind":
            if j not in waiting or j in running:
                fail(t, f"job {j} bound while not waiting")
            if not gpus or len(gpus) % g or len(bound.get(j, [])) + len(gpus) > pods * g:
                fail(t, f"job {j}: bound {len(gpus)} GPUs, not whole pods of {g} within its {pods}")
            for k in range(0, len(gpus), g):
                pod = gpus[k : k + g]
                if len(set(pod)) != g or len({x // per_node for x in pod}) != 1:
                    fail(t, f"job {j}: pod {pod} is not {g} distinct GPUs on one node")
            for x in gpus:
                if x in owner:
                    fail(
                        t, f"GPU {x} double-booked: job {j} bound it while job {owner[x]} holds it"
                    )
                if not 0 <= x < topo.gpus:
                    fail(t, f"job {j}: no GPU {x}")
                owner[x] = j
            bound.setdefault(j, []).extend(gpus)
        elif kind == "start":
            have = bound.pop(j, [])
            if len(have) != pods * g or sorted(have) != sorted(gpus):
                fail(t, f"job {j} started without all its pods bound")
            sd = slowdown(have, g)
            running[j] = (t, have, sd)
            waiting.discard(j)
            rep.first_start.setdefault(j, t)
            if guarantee is not None and guarantee[0] == j and t > guarantee[1] + TOL * max(1.0, t):
                fail(t, f"job {j} started after its reservation at t={guarantee[1]:g}")
            started.append(j)
        elif kind == "finish":
            if j not in running:
                fail(t, f"job {j} finished without running")
            start, have, sd = running.pop(j)
            due = start + work[j] * sd
            if abs(t - due) > TOL * max(1.0, due):
                fail(t, f"job {j} finished at {t:g}, its work ends at {due:g}")
            release(have)
            rep.finish[j] = t
        elif kind == "preempt":
            if j in running:
                start, have, sd = running.pop(j)
                done = (t - start) / sd
                work[j] += ckpt - done
                est[j] += ckpt - done
                rep.preemptions[j] = rep.preemptions.get(j, 0) + 1
                waiting.add(j)
            elif j in bound:
                have = bound.pop(j)
            else:
                fail(t, f"job {j} preempted while holding nothing")
            if sorted(have) != sorted(gpus):
                fail(t, f"job {j}: preempted GPUs differ from those it held")
            release(have)
        else:
            fail(t, f"unknown log entry {kind!r}")
        if i + 1 == len(log) or log[i + 1].time != t:
            end_of_instant(t, started)
            started = []
    missing = [j for j in spec if j not in rep.finish]
    if missing:
        raise InvariantError(f"jobs never finished: {missing[:5]}")
    if owner:
        raise InvariantError(f"GPUs still held at the end: {sorted(owner)[:8]}")
    return rep
