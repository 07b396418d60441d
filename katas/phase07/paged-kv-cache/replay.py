"""GIVEN (not graded): replay a request trace against a block manager, as a serving engine would.

A deliberately simple engine loop, one step at a time:

1. swapped-out sequences come back first, oldest first (swap_in), while blocks allow;
2. if none is left swapped out, waiting requests are admitted in order (add_sequence, then
   fork for each further parallel sample) while at most `max_running` sequences run and the
   prompt's blocks fit;
3. every running sequence appends its next output token (append_token). When that raises
   NoFreeBlocks, the most recently admitted running sequence is preempted: swapped out if the
   cpu pool has room, else freed and put back at the head of the queue to be recomputed (its
   prompt is then its prompt plus what it has generated so far); then the append is retried;
4. a sequence whose output is complete is read back through its block table (every token must
   be where the table says) and freed.

The hit rate is measured on the gpu pool, not asked of the manager: a prompt token is *computed*
when add_sequence writes its KV (pool.writes); hit rate = 1 - computed / prompt tokens admitted.
At the end every block must be free again.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .gen_traces import tokens
from .kv_store import KVPool, NoFreeBlocks

TRACES = Path(__file__).parent / "traces"


class ReplayError(AssertionError):
    """The block manager broke a rule while the trace ran (wrong tokens, leaked blocks, ...)."""


@dataclass(frozen=True)
class Request:
    id: int
    prompt: tuple[int, ...]
    outputs: tuple[tuple[int, ...], ...]  # one per parallel sample


def load(kind: str) -> dict[str, Any]:
    """A shipped trace: traces/<kind>.json (see gen_traces.py)."""
    return json.loads((TRACES / f"{kind}.json").read_text())


def requests_of(trace: dict[str, Any]) -> list[Request]:
    return [
        Request(r["id"], tuple(tokens(r["prompt"])), tuple(tuple(tokens(o)) for o in r["outputs"]))
        for r in trace["requests"]
    ]


@dataclass
class ReplayStats:
    requests: int = 0
    steps: int = 0
    ops: int = 0  # block-manager calls
    prompt_tokens: int = 0  # prompt tokens admitted (a recomputed prompt counts again)
    computed_tokens: int = 0  # ... of which add_sequence wrote the KV (cache misses)
    output_tokens: int = 0
    swaps: int = 0
    recomputes: int = 0
    cow_copies: int = 0
    transfers: int = 0
    peak_used_blocks: int = 0

    @property
    def hit_rate(self) -> float:
        return 1 - self.computed_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class _Seq:
    __slots__ = ("sid", "req", "expected", "todo", "pos")

    def __init__(self, sid: int, req: int, expected: list[int], todo: Sequence[int], pos: int):
        self.sid, self.req, self.expected, self.todo, self.pos = sid, req, expected, todo, pos


def run(
    manager_class: Any,
    trace: dict[str, Any],
    *,
    prefix_caching: bool = True,
    requests: list[Request] | None = None,
) -> ReplayStats:
    """Replay `trace` on a fresh `manager_class(gpu, cpu, prefix_caching=...)`."""
    bs = trace["block_size"]
    gpu = KVPool(trace["num_gpu_blocks"], bs, "gpu")
    cpu = KVPool(trace["num_cpu_blocks"], bs, "cpu")
    manager = manager_class(gpu, cpu, prefix_caching=prefix_caching)
    reqs = requests if requests is not None else requests_of(trace)
    return replay(manager, gpu, reqs, trace["max_running"])


def _read_back(manager: Any, pool: KVPool, s: _Seq) -> None:
    bs = pool.block_size
    table = manager.block_table(s.sid)
    want = s.expected
    if len(table) != -(-len(want) // bs):
        raise ReplayError(
            f"request {s.req}: {len(want)} tokens in {len(table)} blocks of {bs} (table {table})"
        )
    for i, block in enumerate(table):
        chunk = want[i * bs : (i + 1) * bs]
        got = pool.read(block, 0, len(chunk))
        if got != chunk:
            j = next(k for k in range(len(chunk)) if got[k] != chunk[k])
            raise ReplayError(
                f"request {s.req}: token {i * bs + j} reads {got[j]} from block {block}, "
                f"want {chunk[j]}: another sequence's KV is in its block"
            )


def replay(manager: Any, gpu: KVPool, reqs: list[Request], max_running: int) -> ReplayStats:
    stats = ReplayStats(requests=len(reqs))
    # waiting entries: (request id, prompt tokens, [(output tokens, position), ...])
    waiting: deque[tuple[int, list[int], list[tuple[Sequence[int], int]]]] = deque(
        (r.id, list(r.prompt), [(o, 0) for o in r.outputs]) for r in reqs
    )
    running: list[_Seq] = []
    swapped: deque[_Seq] = deque()
    next_sid = 0
    idle_steps = 0

    def preempt(v: _Seq) -> None:
        running.remove(v)
        stats.ops += 1
        try:
            manager.swap_out(v.sid)
            swapped.append(v)
            stats.swaps += 1
        except NoFreeBlocks:
            stats.ops += 1
            manager.free(v.sid)
            waiting.appendleft((v.req, list(v.expected), [(v.todo, v.pos)]))
            stats.recomputes += 1

    while waiting or running or swapped:
        stats.steps += 1
        progress = False
        while swapped:
            stats.ops += 1
            try:
                manager.swap_in(swapped[0].sid)
            except NoFreeBlocks:
                break
            running.append(swapped.popleft())
            progress = True
        while not swapped and waiting and len(running) + len(waiting[0][2]) <= max_running:
            req, prompt, samples = waiting[0]
            before = gpu.writes
            stats.ops += 1
            try:
                cached = manager.add_sequence(next_sid, prompt)
            except NoFreeBlocks:
                break
            written = gpu.writes - before
            if cached != len(prompt) - written:
                raise ReplayError(
                    f"request {req}: add_sequence returned {cached} cached tokens but wrote "
                    f"{written} of {len(prompt)} (cached + written must be the prompt)"
                )
            waiting.popleft()
            stats.prompt_tokens += len(prompt)
            stats.computed_tokens += written
            first = next_sid
            for k, (todo, pos) in enumerate(samples):
                if k:
                    stats.ops += 1
                    manager.fork(first, next_sid)
                running.append(_Seq(next_sid, req, list(prompt), todo, pos))
                next_sid += 1
            progress = True
        for s in list(running):
            if s not in running:  # preempted earlier in this step
                continue
            token = s.todo[s.pos]
            while True:
                stats.ops += 1
                try:
                    manager.append_token(s.sid, token)
                    break
                except NoFreeBlocks:
                    victim = running[-1]
                    preempt(victim)
                    if victim is s:
                        break
            if s not in running:
                continue
            progress = True
            s.expected.append(token)
            s.pos += 1
            stats.output_tokens += 1
            if s.pos == len(s.todo):
                _read_back(manager, gpu, s)
                stats.ops += 1
                manager.free(s.sid)
                running.remove(s)
        stats.peak_used_blocks = max(
            stats.peak_used_blocks, gpu.num_blocks - manager.num_free_blocks()
        )
        idle_steps = 0 if progress else idle_steps + 1
        if idle_steps > 100:
            raise ReplayError(
                f"no progress for 100 steps: {len(waiting)} waiting, {len(running)} running, "
                f"{len(swapped)} swapped out, {manager.num_free_blocks()} of {gpu.num_blocks} "
                "blocks free (are blocks returned by free() and swap_out()?)"
            )
    stats.cow_copies = gpu.copies
    stats.transfers = gpu.transfers_in + gpu.transfers_out
    if manager.num_free_blocks() != gpu.num_blocks:
        raise ReplayError(
            f"every sequence finished but only {manager.num_free_blocks()} of {gpu.num_blocks} "
            "blocks are free: blocks leaked"
        )
    return stats
