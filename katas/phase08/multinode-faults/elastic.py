"""Task "recover": elastic training that survives the loss of a host.

train() runs on every host: it steps a state with allreduce(grad), checkpoints, and when a
collective fails it does what torchrun's elastic agent does: the survivors meet in a
rendezvous on the store, agree on the new membership, re-rank, re-form the ring and resume
from the last checkpoint.
"""

from __future__ import annotations

from harness import todo

from .jobs import Excluded, TrainConfig, TrainResult, dumps_members, grad  # noqa: F401
from .netcluster import Node, RankFailure, allreduce  # noqa: F401

POLL = 0.05  # seconds between two looks at the store


def rendezvous(node: Node, generation: int, window: float) -> list[int]:
    """Join generation `generation` and return its members (sorted host ids).

    Keys under f"rdzv/{generation}/": each host sets "joined/<host>"; the membership closes
    once nobody new joined for `window` seconds: the first host to see that writes "members"
    (json.dumps of the sorted list) with compare_set(key, None, ...), and every host then reads
    the one value that won. A host that is not in it raises Excluded; a host that cannot reach
    the store lets StoreUnreachable out."""
    todo("rendezvous")


def train(node: Node, cfg: TrainConfig) -> TrainResult:
    """cfg.steps steps of state += allreduce(grad(cfg, host, step)) over the current members.

    Step by step: node.begin_step(step) first (a fault may fire there), then the all-reduce;
    after a completed step, when the number of completed steps is a multiple of ckpt_every,
    rank 0 of the current generation saves (steps completed, state) with node.checkpoints.
    When a collective raises RankFailure: close the comm, rendezvous for the next generation
    (cfg.window), connect the new members with the generation as the tag, and load the latest
    checkpoint (or start over from zeros at step 0 if there is none). A host that cannot reach the store
    lets StoreUnreachable out: a host cut off from the job must stop, not train alone."""
    todo("train")
