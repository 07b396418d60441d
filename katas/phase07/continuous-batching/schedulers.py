"""YOUR FILE. Tasks "static", "continuous", "chunked", "preemption": batching schedulers.

A scheduler has one method, schedule(view) -> Plan, called by engine.Engine before every step
(read engine.py first: View, SeqView, Plan and the rules a plan must keep). "Order of
importance" below means sorted by (priority, arrival, id): lower priority value first, then
earlier arrival.
"""

from __future__ import annotations

from harness import todo

from .engine import RECOMPUTE, SWAP, Plan, SeqView, View  # noqa: F401  (you will need them)


class StaticBatcher:
    """Request-level batching, as servers did before Orca (FasterTransformer, early TGI).

    While any request runs, every running request gets its next token (s.remaining tokens: 1 for
    a decode) and nobody joins: the batch runs until its last request finishes. When nothing
    runs, a new batch starts: waiting requests in order of importance, at most `max_batch`, each
    with its whole prompt, while the KV blocks for prompt + max_tokens of each (reserved for the
    worst case, as a contiguous cache must) fit in view.free_blocks; stop at the first that
    does not. ValueError if max_batch < 1."""

    def __init__(self, max_batch: int) -> None:
        todo("StaticBatcher")

    def schedule(self, view: View) -> Plan:
        todo("StaticBatcher.schedule")


class ContinuousBatcher:
    """Iteration-level batching (Orca), the scheduler of vLLM, TensorRT-LLM and SGLang.

    Every step, within max_num_batched_tokens new tokens and view.free_blocks KV blocks:

    1. Running requests, in order of importance: each gets its next tokens. Without
       chunked_prefill that is all of s.remaining (skip it this step if it exceeds the tokens
       left); with chunked_prefill, min(s.remaining, tokens left) (a prefill goes on in chunks;
       decodes come first because running requests come before new ones).
       Task "preemption": when its blocks (view.blocks_needed) exceed the free ones, preempt
       the LEAST important running request not yet scheduled -- possibly itself, then stop
       step 1 -- and repeat until they fit. A preempted request frees all its blocks: by
       "swap" when preemption="swap" and the cpu has room for its blocks (view.free_cpu_blocks,
       less what this plan already swapped out), else by "recompute".
    2. If nothing was preempted this step: swapped-out requests come back, in order of
       importance (Plan.swap_in, and their next tokens as in step 1), while they fit (their
       blocks + what the step needs, tokens left, max_num_seqs); stop at the first that does
       not, and then admit nobody new.
    3. Then waiting requests, in order of importance: admit while fewer than max_num_seqs
       requests hold gpu blocks, their tokens fit (the whole prompt without chunked_prefill,
       else min(s.remaining, tokens left) > 0) and their blocks fit; stop at the first that
       does not (no overtaking). Without chunked_prefill, a prompt longer than
       max_num_batched_tokens can never run: ValueError naming the request.

    ValueError from the constructor for max_num_seqs or max_num_batched_tokens < 1, or a
    preemption other than "recompute" or "swap"."""

    def __init__(
        self,
        max_num_seqs: int = 256,
        max_num_batched_tokens: int = 8192,
        *,
        chunked_prefill: bool = False,
        preemption: str = RECOMPUTE,
    ) -> None:
        todo("ContinuousBatcher")

    def schedule(self, view: View) -> Plan:
        todo("ContinuousBatcher.schedule")
