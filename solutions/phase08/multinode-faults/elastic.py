"""Task "recover": elastic training that survives the loss of a host.

train() runs on every host: it steps a state with allreduce(grad), checkpoints, and when a
collective fails it does what torchrun's elastic agent does: the survivors meet in a
rendezvous on the store, agree on the new membership, re-rank, re-form the ring and resume
from the last checkpoint.
"""

from __future__ import annotations

import json
import time

import numpy as np

from .jobs import Excluded, TrainConfig, TrainResult, dumps_members, grad
from .netcluster import Node, RankFailure, allreduce

POLL = 0.05  # seconds between two looks at the store


def rendezvous(node: Node, generation: int, window: float) -> list[int]:
    """Join generation `generation` and return its members (sorted host ids).

    Keys under f"rdzv/{generation}/": each host sets "joined/<host>"; the membership closes
    once nobody new joined for `window` seconds: the first host to see that writes "members"
    (json.dumps of the sorted list) with compare_set(key, None, ...), and every host then reads
    the one value that won. A host that is not in it raises Excluded; a host that cannot reach
    the store lets StoreUnreachable out."""
    prefix = f"rdzv/{generation}/"
    node.store.set(f"{prefix}joined/{node.host}", "1")
    seen: set[int] = set()
    since = time.monotonic()
    deadline = since + 10 * window
    while True:
        won = node.store.get(prefix + "members")
        if won is not None:
            break
        joined = {int(k.rsplit("/", 1)[1]) for k in node.store.list(prefix + "joined/")}
        now = time.monotonic()
        if joined != seen:
            seen, since = joined, now
        elif now - since >= window:
            won = node.store.compare_set(prefix + "members", None, dumps_members(sorted(seen)))
            break
        if now > deadline:
            raise Excluded(f"generation {generation} never closed")
        time.sleep(POLL)
    members = json.loads(won)
    if node.host not in members:
        raise Excluded(f"host {node.host} is not in generation {generation}: {members}")
    return members


def train(node: Node, cfg: TrainConfig) -> TrainResult:
    """cfg.steps steps of state += allreduce(grad(cfg, host, step)) over the current members.

    Step by step: node.begin_step(step) first (a fault may fire there), then the all-reduce;
    after a completed step, when the number of completed steps is a multiple of ckpt_every,
    rank 0 of the current generation saves (steps completed, state) with node.checkpoints.
    When a collective raises RankFailure: close the comm, rendezvous for the next generation
    (cfg.window), connect the new members with the generation as the tag, and load the latest
    checkpoint (or start over from zeros at step 0 if there is none). A host that cannot reach the store
    lets StoreUnreachable out: a host cut off from the job must stop, not train alone."""
    generation, members = 0, sorted(node.hosts)
    comm = node.connect(members, generation, timeout=cfg.timeout)
    state, step = np.zeros(cfg.size, dtype=np.int64), 0
    resumed: list[int] = []
    while step < cfg.steps:
        node.begin_step(step)
        try:
            total = allreduce(comm, grad(cfg, node.host, step))
        except (RankFailure, OSError):
            comm.close()
            generation += 1
            members = rendezvous(node, generation, cfg.window)
            comm = node.connect(members, generation, timeout=cfg.timeout)
            saved = node.checkpoints.latest()
            step, state = (0, np.zeros(cfg.size, dtype=np.int64)) if saved is None else saved
            resumed.append(step)
            continue
        state = state + total
        step += 1
        if step % cfg.ckpt_every == 0 and comm.rank == 0:
            node.checkpoints.save(step, state)
    comm.close()
    return TrainResult(state, list(members), comm.rank, generation, resumed)
