"""GIVEN (not graded): an LLM serving engine, simulated one step (one forward pass) at a time.

Your scheduler decides, before every step, which requests run and how many of their tokens;
the engine checks the plan, advances the clock by the step's cost, and records when every
output token appears. Everything a scheduler may read is in `View`; everything it may do is a
`Plan`.

A request's life, in tokens (vLLM v1's model: "computed" tokens catch up with "all" tokens):

- `num_tokens` = prompt + tokens generated so far; `num_computed` = tokens whose KV is cached.
- A step gives a request `n` new tokens (1 <= n <= num_tokens - num_computed): a prefill chunk,
  or the single token of a decode step. When the step makes num_computed == num_tokens, the
  request emits its next output token at the end of the step (so a whole prompt in one step
  emits the first token; every decode step emits one more).
- It holds ceil(num_computed / block_size) KV blocks; blocks are taken when the step that needs
  them is planned, and all returned when the request finishes.
- Preempted by *recompute*: its blocks are freed, num_computed = 0, and it waits again; when
  readmitted it prefills prompt + everything generated so far, then continues.
- Preempted by *swap*: its blocks move to CPU memory (costing `swap_s_per_token` per cached
  token, added to the step) and come back with a swap-in (the same cost again).

The engine knows each request's true output length; schedulers see only `max_tokens`, what the
client asked for (a server never knows when a model will stop).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

RECOMPUTE, SWAP = "recompute", "swap"


class PlanError(Exception):
    """The scheduler's plan breaks a rule of the engine (the message says which)."""


@dataclass(frozen=True)
class StepCost:
    """What one step costs on a GPU: a roofline over the whole batch.

    step_time = overhead_s + max(flop_s_per_token * new tokens,
                                 weights_s + kv_s_per_token * KV tokens read)

    Every step streams all the weights from HBM once (weights_s) and reads the KV of every
    token each sequence attends to (its cached tokens plus the new ones); the matmuls cost
    flop_s_per_token per new token. Few new tokens (decode): memory-bound, the weights dominate.
    Many (prefill): compute-bound. cost.py derives the constants from a GPU and a model.
    """

    weights_s: float
    kv_s_per_token: float
    flop_s_per_token: float
    overhead_s: float = 0.0
    swap_s_per_token: float = 0.0

    def step_time(self, items: Iterable[tuple[int, int]]) -> float:
        """items: (tokens already cached, new tokens) for each request in the step."""
        new = kv = 0
        for cached, n in items:
            new += n
            kv += cached + n
        return self.overhead_s + max(
            self.flop_s_per_token * new, self.weights_s + self.kv_s_per_token * kv
        )


# Llama-3-8B in bf16 on one H100 SXM, in round numbers (README.md derives them, and cost.py
# computes them exactly): 6 ms to stream 16 GB of weights at 80 % of 3.35 TB/s, 50 ns per token
# of KV (128 KiB), 27 us of matmuls per token at 60 % of 989 TFLOP/s, 1 ms per step for the
# rest (sampling, scheduling, launch), 2 us per token of KV over PCIe.
H100_LLAMA_3_8B = StepCost(6e-3, 5e-8, 2.7e-5, 1e-3, 2e-6)
# Llama-3-70B in bf16 on two H100 SXM (tensor parallel 2): 26 ms, 61 ns, 119 us, 1 ms, 2.6 us.
H100X2_LLAMA_3_70B = StepCost(2.6e-2, 6.1e-8, 1.19e-4, 1e-3, 2.6e-6)


@dataclass(frozen=True)
class Request:
    id: int
    arrival: float  # seconds
    prompt_len: int
    output_len: int  # the engine's secret: when the model emits its end-of-sequence token
    max_tokens: int  # the client's limit, >= output_len: all a scheduler knows
    priority: int = 0  # lower is more important (vLLM's convention)


class SeqView(NamedTuple):
    """A request as a scheduler sees it (a snapshot: changing it changes nothing)."""

    id: int
    arrival: float
    prompt_len: int
    max_tokens: int
    priority: int
    num_tokens: int  # prompt + generated
    num_computed: int  # tokens whose KV is in the cache
    generated: int
    blocks: int  # KV blocks it holds (cpu blocks while swapped out)

    @property
    def remaining(self) -> int:
        """Tokens to compute before its next output token: the prompt (or what is left of it,
        or prompt + output after a recompute) for a prefill, 1 for a decode."""
        return self.num_tokens - self.num_computed


@dataclass(frozen=True)
class View:
    now: float
    waiting: tuple[SeqView, ...]  # arrived, no KV cached; in (arrival, id) order
    running: tuple[SeqView, ...]  # KV on the gpu; in the order they started running
    swapped: tuple[SeqView, ...]  # KV in cpu memory; in the order they were swapped out
    free_blocks: int
    free_cpu_blocks: int
    num_blocks: int
    block_size: int

    def blocks_needed(self, seq: SeqView, new_tokens: int) -> int:
        """More gpu blocks `seq` needs to compute `new_tokens` more tokens (0 if it has room)."""
        return max(0, -(-(seq.num_computed + new_tokens) // self.block_size) - seq.blocks)


@dataclass
class Plan:
    tokens: dict[int, int] = field(default_factory=dict)  # request id -> new tokens this step
    preempt: dict[int, str] = field(default_factory=dict)  # request id -> "recompute" | "swap"
    swap_in: list[int] = field(default_factory=list)  # swapped request ids to bring back


@dataclass
class RequestResult:
    id: int
    arrival: float
    prompt_len: int
    output_len: int
    priority: int
    token_times: list[float]  # when each output token appeared (end of its step)
    preemptions: int = 0


@dataclass(frozen=True)
class StepRecord:
    start: float
    end: float
    tokens: dict[int, int]  # request id -> new tokens
    prefill_tokens: int  # tokens of requests still in their (re)prefill
    decode_tokens: int
    preempted: tuple[int, ...]
    swapped_in: tuple[int, ...]


@dataclass
class RunResult:
    results: list[RequestResult]  # in request id order
    steps: list[StepRecord]

    @property
    def end(self) -> float:
        return self.steps[-1].end if self.steps else 0.0


class _Seq:
    __slots__ = ("req", "num_tokens", "num_computed", "generated", "blocks", "times", "preemptions")

    def __init__(self, req: Request) -> None:
        self.req = req
        self.num_tokens = req.prompt_len
        self.num_computed = 0
        self.generated = 0
        self.blocks = 0
        self.times: list[float] = []
        self.preemptions = 0

    def view(self) -> SeqView:
        r = self.req
        return SeqView(
            r.id, r.arrival, r.prompt_len, r.max_tokens, r.priority,
            self.num_tokens, self.num_computed, self.generated, self.blocks,
        )  # fmt: skip


class Engine:
    """A GPU with `num_blocks` KV blocks of `block_size` tokens (and `num_cpu_blocks` of swap
    space), running steps whose time `cost` gives."""

    def __init__(
        self,
        cost: StepCost,
        *,
        num_blocks: int,
        block_size: int = 16,
        num_cpu_blocks: int = 0,
        max_steps: int = 2_000_000,
    ) -> None:
        if num_blocks < 1 or block_size < 1 or num_cpu_blocks < 0:
            raise ValueError(
                f"Engine: num_blocks={num_blocks}, block_size={block_size}, "
                f"num_cpu_blocks={num_cpu_blocks}: need >= 1, >= 1, >= 0"
            )
        self.cost = cost
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.num_cpu_blocks = num_cpu_blocks
        self.max_steps = max_steps

    def run(self, scheduler: Any, requests: Sequence[Request]) -> RunResult:
        """Serve `requests` with `scheduler.schedule(view) -> Plan` until every one finishes."""
        bs = self.block_size
        for r in requests:
            if not (r.prompt_len >= 1 and 1 <= r.output_len <= r.max_tokens):
                raise ValueError(
                    f"request {r.id}: need prompt_len >= 1, 1 <= output_len <= max_tokens: {r}"
                )
            if -(-(r.prompt_len + r.max_tokens) // bs) > self.num_blocks:
                raise ValueError(
                    f"request {r.id}: {r.prompt_len} + {r.max_tokens} tokens need more than the "
                    f"{self.num_blocks} blocks of the gpu"
                )
        if len({r.id for r in requests}) != len(requests):
            raise ValueError("request ids must be unique")
        pending = sorted(requests, key=lambda r: (r.arrival, r.id))
        seqs = {r.id: _Seq(r) for r in requests}
        waiting: list[tuple[float, int]] = []  # (arrival, id), sorted
        running: dict[int, None] = {}  # ordered: when each started running
        swapped: dict[int, None] = {}
        free, free_cpu = self.num_blocks, self.num_cpu_blocks
        now, nxt, done = 0.0, 0, 0
        steps: list[StepRecord] = []
        while done < len(requests):
            while nxt < len(pending) and pending[nxt].arrival <= now:
                bisect.insort(waiting, (pending[nxt].arrival, pending[nxt].id))
                nxt += 1
            if not (waiting or running or swapped):
                now = pending[nxt].arrival
                continue
            if len(steps) >= self.max_steps:
                raise PlanError(f"no end after {self.max_steps} steps (t = {now:.3f} s)")
            view = View(
                now,
                tuple(seqs[i].view() for _, i in waiting),
                tuple(seqs[i].view() for i in running),
                tuple(seqs[i].view() for i in swapped),
                free, free_cpu, self.num_blocks, bs,
            )  # fmt: skip
            plan = scheduler.schedule(view)
            if not isinstance(plan, Plan):
                raise PlanError(f"schedule() must return a Plan, got {type(plan).__name__}")
            at = f"step {len(steps)} (t = {now:.6f} s)"
            swap_tokens = 0
            # 1. preemptions
            for i, mode in plan.preempt.items():
                if i not in running:
                    raise PlanError(f"{at}: preempt {i}: it is not running")
                s = seqs[i]
                del running[i]
                s.preemptions += 1
                if mode == SWAP:
                    if s.blocks > free_cpu:
                        raise PlanError(
                            f"{at}: swap out {i}: {s.blocks} cpu blocks, {free_cpu} free"
                        )
                    free_cpu -= s.blocks
                    free += s.blocks
                    swap_tokens += s.num_computed
                    swapped[i] = None
                elif mode == RECOMPUTE:
                    free += s.blocks
                    s.blocks = s.num_computed = 0
                    bisect.insort(waiting, (s.req.arrival, i))
                else:
                    raise PlanError(
                        f"{at}: preempt {i}: mode {mode!r} is not 'recompute' or 'swap'"
                    )
            # 2. swap-ins
            for i in plan.swap_in:
                if i not in swapped:
                    raise PlanError(f"{at}: swap in {i}: it is not swapped out")
                s = seqs[i]
                if s.blocks > free:
                    raise PlanError(f"{at}: swap in {i}: {s.blocks} blocks, {free} free")
                del swapped[i]
                free -= s.blocks
                free_cpu += s.blocks
                swap_tokens += s.num_computed
                running[i] = None
            # 3. the batch
            if again := set(plan.preempt) & set(plan.tokens):
                raise PlanError(f"{at}: request {min(again)} is both preempted and scheduled")
            waiting_ids = {i for _, i in waiting} if waiting else set()
            items, prefill, decode = [], 0, 0
            for i, n in plan.tokens.items():
                s = seqs.get(i)
                if s is None or s.generated == s.req.output_len:
                    raise PlanError(f"{at}: request {i} does not exist or has finished")
                if i in waiting_ids:
                    del waiting[bisect.bisect_left(waiting, (s.req.arrival, i))]
                    waiting_ids.discard(i)
                    running[i] = None
                elif i not in running:
                    raise PlanError(f"{at}: request {i} is swapped out (swap it in first)")
                if not (isinstance(n, int) and 1 <= n <= s.num_tokens - s.num_computed):
                    raise PlanError(
                        f"{at}: request {i}: {n!r} new tokens, it has "
                        f"{s.num_tokens - s.num_computed} to compute (1 .. that many)"
                    )
                need = max(0, -(-(s.num_computed + n) // bs) - s.blocks)
                if need > free:
                    raise PlanError(
                        f"{at}: request {i} needs {need} more KV blocks, only {free} are free"
                    )
                free -= need
                s.blocks += need
                items.append((s.num_computed, n))
                if s.num_tokens - s.num_computed == 1 and s.generated:
                    decode += n
                else:
                    prefill += n
            if not items and not swap_tokens:
                raise PlanError(
                    f"{at}: the plan runs nothing, with {len(waiting)} waiting, {len(running)} "
                    f"running and {len(swapped)} swapped out (a plan must make progress)"
                )
            dt = (
                self.cost.step_time(items) if items else 0.0
            ) + self.cost.swap_s_per_token * swap_tokens
            start, now = now, now + dt
            for i, n in plan.tokens.items():
                s = seqs[i]
                s.num_computed += n
                if s.num_computed == s.num_tokens:
                    s.generated += 1
                    s.num_tokens += 1
                    s.times.append(now)
                    if s.generated == s.req.output_len:
                        del running[i]
                        free += s.blocks
                        s.blocks = 0
                        done += 1
            steps.append(
                StepRecord(start, now, dict(plan.tokens), prefill, decode,
                           tuple(plan.preempt), tuple(plan.swap_in))
            )  # fmt: skip
        results = [
            RequestResult(
                r.id, r.arrival, r.prompt_len, r.output_len, r.priority, s.times, s.preemptions
            )
            for r, s in sorted(((s.req, s) for s in seqs.values()), key=lambda rs: rs[0].id)
        ]
        return RunResult(results, steps)
