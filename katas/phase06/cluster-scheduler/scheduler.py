"""YOUR FILE. Tasks "gang", "backfill", "preemption": the cluster's scheduler.

One class, GangScheduler; engine.Engine calls schedule(view) after every instant's events (read
engine.py first: View, Running, Plan, and what the engine refuses). "Queue order" is the order
of view.queue: higher priority first, then earlier submit, then lower id. A job's placement
comes from the placement function named in the constructor (placement.py), always called on
the GPUs free at that moment of your plan (copy view.free and take GPUs out as you bind).
"""

from __future__ import annotations

from harness import todo

from .engine import Job, Plan, Running, View  # noqa: F401  (you will need them)
from .placement import PLACEMENTS, Pods  # noqa: F401


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
        todo("GangScheduler")

    def schedule(self, view: View) -> Plan:
        todo("GangScheduler.schedule")
