"""GIVEN (not graded): a GPU cluster, simulated one event at a time.

Events are job arrivals and job ends. After the events of one instant, the engine calls your
scheduler's schedule(view) once; the View is everything a scheduler may read, the Plan it
returns is everything it may do:

- plan.preempt(job_id): stop a running job. Its GPUs are free at once; it goes back to the
  queue and, when it runs again, first redoes `checkpoint_s` seconds of work (saving its state
  and loading it back: the checkpoint cost). Preempting a job that is bound but not running
  just releases its pods.
- plan.bind(job_id, pods): give some of a job's pods their GPUs (a list of GPU-id lists, one
  per pod, each pod on one node). When all of a job's pods are bound it starts. Binding fewer
  is allowed, as kube-scheduler binds pod by pod: those GPUs are then held, idle, until the
  rest are bound -- the partial gang that gang scheduling exists to forbid.

The engine applies the preemptions first, then the binds in order, and refuses (ScheduleError)
anything physically impossible: a GPU given twice, a pod of the wrong size or across nodes, a
job that is not waiting. It checks nothing about policy: gangs, reservations and priorities
are your scheduler's job (the tests replay the log with checker.py).

A job's base `duration` is known to the engine only; schedulers see `estimate`, the wall time
its user asked for (never less than the duration). On a placement with slowdown s
(Topology.slowdown) the job runs `remaining work x s` seconds, and its expected end is
start + remaining estimate x s.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from .cluster import Topology

ARRIVE, FINISH = 1, 0  # at one instant, ends are handled before arrivals


class ScheduleError(Exception):
    """The scheduler's plan is physically impossible (the message says why)."""


class Job(NamedTuple):
    """A job as the scheduler sees it: `pods` pods of `gpus_per_pod` GPUs each."""

    id: int
    submit: float
    pods: int
    gpus_per_pod: int
    estimate: (
        float  # remaining wall-time estimate at base speed (grows by checkpoint_s if preempted)
    )
    priority: int  # higher runs first

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def order(self) -> tuple[int, float, int]:
        """Queue order: higher priority first, then earlier submit, then lower id."""
        return (-self.priority, self.submit, self.id)


class Running(NamedTuple):
    job: Job
    pods: tuple[tuple[int, ...], ...]
    start: float
    expected_end: float  # start + job.estimate x slowdown: never earlier than its real end
    slowdown: float


@dataclass
class View:
    now: float
    topology: Topology
    checkpoint_s: float
    free: tuple[frozenset[int], ...]  # free GPU ids of each node
    queue: tuple[Job, ...]  # every job waiting to run, in queue order (Job.order)
    running: tuple[Running, ...]  # in order of start, then id
    bound: Mapping[int, tuple[tuple[int, ...], ...]]  # pods already bound of waiting jobs


@dataclass
class Plan:
    preempts: list[int] = field(default_factory=list)
    binds: list[tuple[int, list[list[int]]]] = field(default_factory=list)

    def preempt(self, job_id: int) -> None:
        self.preempts.append(job_id)

    def bind(self, job_id: int, pods: Sequence[Sequence[int]]) -> None:
        self.binds.append((job_id, [list(p) for p in pods]))


class Scheduler(Protocol):
    def schedule(self, view: View) -> Plan: ...


class LogEntry(NamedTuple):
    time: float
    kind: str  # "submit", "bind", "start", "preempt", "finish"
    job: int
    gpus: tuple[int, ...]  # bind: the pods bound now; start, preempt, finish: all the job's


class Point(NamedTuple):
    """The cluster after one scheduling decision."""

    time: float
    free: tuple[int, ...]  # free GPUs of each node
    queue: tuple[int, ...]  # pod size (gpus_per_pod) of each waiting job, in queue order
    running: int  # GPUs of running jobs
    held: int  # GPUs bound to jobs that do not run yet (partial gangs)


@dataclass(frozen=True)
class JobResult:
    id: int
    submit: float
    pods: int
    gpus_per_pod: int
    priority: int
    first_start: float
    finish: float
    preemptions: int


@dataclass
class Result:
    topology: Topology
    checkpoint_s: float
    jobs: list[JobResult]  # by id
    log: list[LogEntry]
    points: list[Point]
    end: float
    events: int  # arrivals + ends + preemptions handled


@dataclass
class _Run:
    job: Job
    pods: tuple[tuple[int, ...], ...]
    start: float
    slowdown: float
    epoch: int


class Engine:
    def __init__(self, topology: Topology, checkpoint_s: float = 0.0) -> None:
        if checkpoint_s < 0:
            raise ValueError(f"checkpoint_s must be >= 0, got {checkpoint_s}")
        self.topology, self.checkpoint_s = topology, float(checkpoint_s)

    def run(
        self, scheduler: Scheduler, jobs: Sequence[Job], durations: Mapping[int, float]
    ) -> Result:
        """Simulate until every job has finished; ScheduleError if the scheduler breaks a
        physical rule or leaves jobs waiting with nothing left to happen."""
        topo = self.topology
        for j in jobs:
            if j.gpus_per_pod > topo.gpus_per_node or j.gpus > topo.gpus or j.pods < 1:
                raise ValueError(
                    f"job {j.id}: {j.pods} x {j.gpus_per_pod} GPUs never fits {topo.name}"
                )
            if not 0 < durations[j.id] <= j.estimate:
                raise ValueError(f"job {j.id}: duration must be in (0, estimate]")
        free = [set(topo.node_gpus(n)) for n in range(topo.nodes)]
        owner: dict[int, int] = {}
        waiting: dict[int, Job] = {}
        bound: dict[int, list[tuple[int, ...]]] = {}
        running: dict[int, _Run] = {}
        work = {j.id: float(durations[j.id]) for j in jobs}  # remaining work at base speed
        epoch = {j.id: 0 for j in jobs}
        first_start: dict[int, float] = {}
        finish: dict[int, float] = {}
        preemptions = {j.id: 0 for j in jobs}
        log: list[LogEntry] = []
        points: list[Point] = []
        events: list[tuple[float, int, int, int]] = [(j.submit, ARRIVE, j.id, 0) for j in jobs]
        heapq.heapify(events)
        by_id = {j.id: j for j in jobs}
        handled = 0

        def release(pods: Sequence[Sequence[int]]) -> None:
            for pod in pods:
                for g in pod:
                    del owner[g]
                    free[topo.node_of(g)].add(g)

        while events:
            now = events[0][0]
            while events and events[0][0] == now:
                _, kind, jid, ep = heapq.heappop(events)
                if kind == FINISH:
                    if ep != epoch[jid] or jid not in running:
                        continue  # the end of a run that was preempted
                    r = running.pop(jid)
                    release(r.pods)
                    finish[jid] = now
                    log.append(LogEntry(now, "finish", jid, _flat(r.pods)))
                else:
                    waiting[jid] = by_id[jid]
                    log.append(LogEntry(now, "submit", jid, ()))
                handled += 1
            view = View(
                now, topo, self.checkpoint_s,
                tuple(frozenset(f) for f in free),
                tuple(sorted(waiting.values(), key=lambda j: j.order)),
                tuple(
                    Running(r.job, r.pods, r.start, r.start + r.job.estimate * r.slowdown, r.slowdown)
                    for r in sorted(running.values(), key=lambda r: (r.start, r.job.id))
                ),
                {k: tuple(v) for k, v in bound.items()},
            )  # fmt: skip
            plan = scheduler.schedule(view)
            if not (hasattr(plan, "preempts") and hasattr(plan, "binds")):  # any copy's Plan
                raise ScheduleError(f"schedule() must return a Plan, got {type(plan).__name__}")
            for jid in plan.preempts:
                if jid in running:
                    r = running.pop(jid)
                    done = (now - r.start) / r.slowdown
                    work[jid] += self.checkpoint_s - done
                    est = r.job.estimate + self.checkpoint_s - done
                    waiting[jid] = r.job._replace(estimate=est)
                    epoch[jid] += 1
                    preemptions[jid] += 1
                    release(r.pods)
                    log.append(LogEntry(now, "preempt", jid, _flat(r.pods)))
                    handled += 1
                elif jid in bound:
                    pods = bound.pop(jid)
                    release(pods)
                    log.append(LogEntry(now, "preempt", jid, _flat(pods)))
                else:
                    raise ScheduleError(f"t={now:g}: preempt({jid}): job {jid} holds no GPUs")
            for jid, pods in plan.binds:
                job = waiting.get(jid)
                if job is None:
                    raise ScheduleError(f"t={now:g}: bind({jid}): job {jid} is not waiting")
                have = bound.setdefault(jid, [])
                if not pods or len(have) + len(pods) > job.pods:
                    raise ScheduleError(
                        f"t={now:g}: bind({jid}): {len(pods)} pods given, {job.pods - len(have)} unbound"
                    )
                for pod in pods:
                    self._check_pod(now, job, pod, owner)
                    for g in pod:
                        owner[g] = jid
                        free[topo.node_of(g)].discard(g)
                    have.append(tuple(pod))
                log.append(LogEntry(now, "bind", jid, _flat(pods)))
                if len(have) == job.pods:
                    del waiting[jid]
                    all_pods = tuple(bound.pop(jid))
                    slow = topo.slowdown(all_pods)
                    running[jid] = _Run(job, all_pods, now, slow, epoch[jid])
                    first_start.setdefault(jid, now)
                    heapq.heappush(events, (now + work[jid] * slow, FINISH, jid, epoch[jid]))
                    log.append(LogEntry(now, "start", jid, _flat(all_pods)))
            held = sum(len(p) for pods in bound.values() for p in pods)
            points.append(
                Point(
                    now,
                    tuple(len(f) for f in free),
                    tuple(j.gpus_per_pod for j in sorted(waiting.values(), key=lambda j: j.order)),
                    sum(r.job.gpus for r in running.values()),
                    held,
                )
            )
        if waiting:
            stuck = ", ".join(str(j) for j in sorted(waiting)[:5])
            raise ScheduleError(f"nothing left to happen but jobs still wait: {stuck}")
        results = [
            JobResult(j.id, j.submit, j.pods, j.gpus_per_pod, j.priority, first_start[j.id],
                      finish[j.id], preemptions[j.id])
            for j in sorted(jobs, key=lambda j: j.id)
        ]  # fmt: skip
        end = max(finish.values(), default=0.0)
        return Result(topo, self.checkpoint_s, results, log, points, end, handled)

    def _check_pod(self, now: float, job: Job, pod: Sequence[int], owner: dict[int, int]) -> None:
        topo = self.topology
        where = f"t={now:g}: bind({job.id}): pod {list(pod)}"
        if len(pod) != job.gpus_per_pod or len(set(pod)) != len(pod):
            raise ScheduleError(f"{where}: a pod needs {job.gpus_per_pod} distinct GPUs")
        if any(not 0 <= g < topo.gpus for g in pod):
            raise ScheduleError(f"{where}: no such GPU")
        if len({topo.node_of(g) for g in pod}) != 1:
            raise ScheduleError(f"{where}: a pod must sit on one node")
        taken = [g for g in pod if g in owner]
        if taken:
            raise ScheduleError(f"{where}: GPU {taken[0]} is already held by job {owner[taken[0]]}")


def _flat(pods: Sequence[Sequence[int]]) -> tuple[int, ...]:
    return tuple(g for pod in pods for g in pod)


def jobs_of(rows: Sequence[Sequence[Any]]) -> tuple[list[Job], dict[int, float]]:
    """Trace rows [id, submit, pods, gpus_per_pod, duration, estimate, priority] as the jobs a
    scheduler sees and the durations only the engine knows."""
    jobs = [
        Job(int(i), float(s), int(p), int(g), float(e), int(pr)) for i, s, p, g, _, e, pr in rows
    ]
    return jobs, {int(r[0]): float(r[4]) for r in rows}
