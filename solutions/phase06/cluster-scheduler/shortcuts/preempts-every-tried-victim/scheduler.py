"""YOUR FILE. Tasks "gang", "backfill", "preemption": the cluster's scheduler.

One class, GangScheduler; engine.Engine calls schedule(view) after every instant's events (read
engine.py first: View, Running, Plan, and what the engine refuses). "Queue order" is the order
of view.queue: higher priority first, then earlier submit, then lower id. A job's placement
comes from the placement function named in the constructor (placement.py), always called on
the GPUs free at that moment of your plan (copy view.free and take GPUs out as you bind).
"""

from __future__ import annotations

import bisect
import math

from .engine import Job, Plan, View
from .placement import PLACEMENTS, Pods


def _fits(free: list[set[int]], pods: int, g: int) -> bool:
    """Whether `pods` pods of `g` GPUs fit at all (every placement finds room when this holds)."""
    return sum(len(f) // g for f in free) >= pods


class GangScheduler:
    """Gang scheduling over a FIFO queue, with EASY backfilling and priority preemption.

    Task "gang": go through the queue in order; bind each job whole (all its pods in one
    plan.bind) when the placement finds room, and stop at the first job that does not fit: it
    is the HEAD of the queue. Never bind part of a job (no partial gang holds GPUs).

    Task "backfill" (backfill=True): EASY backfilling. Give the head a reservation: take the
    running jobs (those in view.running and those bound in this plan, with expected end
    now + estimate x slowdown) in order of expected end (ties: lower job id), release their
    GPUs one job at a time onto a copy of the free GPUs, and place the head after each; the
    first expected end at which it fits is the SHADOW TIME, and the GPUs of that placement are
    RESERVED. Then every later job in queue order starts now if it fits and cannot delay the
    head: placed on all the free GPUs, it ends (now + estimate x slowdown of that placement)
    no later than the shadow time; otherwise placed on the free GPUs minus the reserved ones.
    Jobs that fit neither way are skipped (later ones may still backfill).

    Task "preemption" (preemption=True): when a job in step one does not fit, try to make room
    before it becomes the head. Candidate victims: running jobs of lower priority whose
    expected end is more than view.checkpoint_s away (waiting for a job that ends sooner is
    cheaper than paying its checkpoint), lowest priority first, then latest start, then
    higher id. Add victims one at a time to a copy of the free GPUs until the job fits; if it
    never fits, preempt nobody. If it fits, spare every victim none of whose GPUs the
    placement uses, preempt the others (plan.preempt), bind the job, and go on in order. The
    victims rejoin the queue at once, in queue order, with the estimate the engine will give
    them (remaining estimate - (now - start) / slowdown + checkpoint_s): they may start again
    in this same plan, elsewhere.

    ValueError for an unknown placement name.
    """

    def __init__(
        self, placement: str = "best_fit", *, backfill: bool = False, preemption: bool = False
    ) -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"unknown placement {placement!r} (known: {', '.join(PLACEMENTS)})")
        self.place = PLACEMENTS[placement]
        self.backfill, self.preemption = backfill, preemption

    def schedule(self, view: View) -> Plan:
        plan, topo, now = Plan(), view.topology, view.now
        free = [set(f) for f in view.free]
        # (expected end, job id, gpus) of everything that holds GPUs after this plan
        ends = [(r.expected_end, r.job.id, [g for p in r.pods for g in p]) for r in view.running]
        preempted: set[int] = set()
        queue = list(view.queue)
        i = 0
        while i < len(queue):
            job = queue[i]
            pods = self.place(topo, free, job.pods, job.gpus_per_pod)
            if pods is None and self.preemption:
                victims = self._make_room(view, job, free, preempted, plan)
                if victims is not None:
                    pods, back = victims
                    ends = [e for e in ends if e[1] not in preempted]
                    for v in back:  # lower priority than `job`: they queue behind it
                        bisect.insort(queue, v, lo=i + 1, key=lambda j: j.order)
            if pods is None:
                break
            ends.append(self._bind(plan, free, job, pods, now, topo.slowdown(pods)))
            i += 1
        if not self.backfill or i >= len(queue):
            return plan
        shadow, reserved = self._reservation(view, queue[i], free, ends)
        outside = [f - reserved for f in free]  # free GPUs the head does not need
        for job in queue[i + 1 :]:
            if not _fits(free, job.pods, job.gpus_per_pod):
                continue  # cheap count test first: most of a long queue fails it
            pods = self.place(topo, free, job.pods, job.gpus_per_pod)
            if pods is None or now + job.estimate * topo.slowdown(pods) > shadow:
                pods = self.place(topo, outside, job.pods, job.gpus_per_pod)
            if pods is not None:
                ends.append(self._bind(plan, free, job, pods, now, topo.slowdown(pods)))
                taken = {g for p in pods for g in p}
                for f in outside:
                    f -= taken
        return plan

    @staticmethod
    def _bind(
        plan: Plan, free: list[set[int]], job: Job, pods: Pods, now: float, slowdown: float
    ) -> tuple[float, int, list[int]]:
        plan.bind(job.id, pods)
        gpus = [g for p in pods for g in p]
        for f in free:
            f.difference_update(gpus)
        return (now + job.estimate * slowdown, job.id, gpus)

    def _reservation(
        self,
        view: View,
        head: Job,
        free: list[set[int]],
        ends: list[tuple[float, int, list[int]]],
    ) -> tuple[float, set[int]]:
        topo = view.topology
        future = [set(f) for f in free]
        for end, _, gpus in sorted(ends, key=lambda e: (e[0], e[1])):
            for g in gpus:
                future[topo.node_of(g)].add(g)
            if not _fits(future, head.pods, head.gpus_per_pod):
                continue  # the placements are complete: no need to ask before the counts fit
            pods = self.place(topo, future, head.pods, head.gpus_per_pod)
            if pods is not None:
                return end, {g for p in pods for g in p}
        return math.inf, set()

    def _make_room(
        self, view: View, job: Job, free: list[set[int]], preempted: set[int], plan: Plan
    ) -> tuple[Pods, list[Job]] | None:
        topo, now = view.topology, view.now
        victims = sorted(
            (
                r
                for r in view.running
                if r.job.priority < job.priority
                and r.expected_end - now > view.checkpoint_s
                and r.job.id not in preempted
            ),
            key=lambda r: (r.job.priority, -r.start, -r.job.id),
        )
        trial = [set(f) for f in free]
        chosen = []
        for r in victims:
            chosen.append(r)
            for pod in r.pods:
                trial[topo.node_of(pod[0])].update(pod)
            pods = self.place(topo, trial, job.pods, job.gpus_per_pod)
            if pods is None:
                continue
            back = []
            for v in chosen:
                vg = {g for p in v.pods for g in p}
                if True:  # even a victim whose GPUs `pods` does not use
                    plan.preempt(v.job.id)
                    preempted.add(v.job.id)
                    for g in vg:
                        free[topo.node_of(g)].add(g)
                    left = v.job.estimate - (now - v.start) / v.slowdown + view.checkpoint_s
                    back.append(v.job._replace(estimate=left))
            return pods, back
        return None
