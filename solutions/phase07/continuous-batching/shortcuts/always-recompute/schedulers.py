"""Static and continuous (iteration-level) batching schedulers (reference)."""

from __future__ import annotations

from .engine import RECOMPUTE, SWAP, Plan, SeqView, View


def _key(s: SeqView) -> tuple[int, float, int]:
    return (s.priority, s.arrival, s.id)


class StaticBatcher:
    def __init__(self, max_batch: int) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.max_batch = max_batch

    def schedule(self, view: View) -> Plan:
        plan = Plan()
        if view.running:  # the batch runs to its end; nobody joins
            plan.tokens = {s.id: s.remaining for s in view.running}
            return plan
        free, bs = view.free_blocks, view.block_size
        for s in sorted(view.waiting, key=_key):
            need = -(-(s.prompt_len + s.max_tokens) // bs)  # reserved for the worst case
            if len(plan.tokens) == self.max_batch or need > free:
                break
            free -= need
            plan.tokens[s.id] = s.remaining
        return plan


class ContinuousBatcher:
    def __init__(
        self,
        max_num_seqs: int = 256,
        max_num_batched_tokens: int = 8192,
        *,
        chunked_prefill: bool = False,
        preemption: str = RECOMPUTE,
    ) -> None:
        if max_num_seqs < 1 or max_num_batched_tokens < 1:
            raise ValueError(
                f"max_num_seqs={max_num_seqs}, max_num_batched_tokens={max_num_batched_tokens}: "
                "both must be at least 1"
            )
        if preemption not in (RECOMPUTE, SWAP):
            raise ValueError(f"preemption must be 'recompute' or 'swap', got {preemption!r}")
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.chunked_prefill = chunked_prefill
        self.preemption = preemption

    def _chunk(self, remaining: int, budget: int) -> int:
        if self.chunked_prefill:
            return min(remaining, budget)
        return remaining if remaining <= budget else 0

    def schedule(self, view: View) -> Plan:
        plan = Plan()
        budget, free, free_cpu = self.max_num_batched_tokens, view.free_blocks, view.free_cpu_blocks
        running = sorted(view.running, key=_key)
        victims = list(running)  # the least important at the end
        for s in running:
            if s.id in plan.preempt:
                break  # it and everything after it were preempted
            n = self._chunk(s.remaining, budget)
            if n == 0:
                continue
            need = view.blocks_needed(s, n)
            while need > free:
                victim = victims.pop()
                if False:  # swap or not, recompute is simpler
                    plan.preempt[victim.id] = SWAP
                    free_cpu -= victim.blocks
                else:
                    plan.preempt[victim.id] = RECOMPUTE
                free += victim.blocks
                if victim.id == s.id:
                    break
            if s.id in plan.preempt:
                break
            plan.tokens[s.id] = n
            budget -= n
            free -= need
        if plan.preempt:
            return plan  # no swap-ins or new requests in a step that had to preempt
        active = len(running)  # max_num_seqs counts every request holding gpu blocks
        for s in sorted(view.swapped, key=_key):
            n = self._chunk(s.remaining, budget)
            need = s.blocks + view.blocks_needed(s, n) if n else 0
            if active >= self.max_num_seqs or n == 0 or need > free:
                return plan  # swapped-out requests come back before any new one starts
            plan.swap_in.append(s.id)
            plan.tokens[s.id] = n
            budget -= n
            free -= need
            active += 1
        for s in sorted(view.waiting, key=_key):
            if not self.chunked_prefill and s.remaining > self.max_num_batched_tokens:
                raise ValueError(
                    f"request {s.id}: {s.remaining} prompt tokens exceed "
                    f"max_num_batched_tokens={self.max_num_batched_tokens}: without chunked "
                    "prefill it can never run"
                )
            n = self._chunk(s.remaining, budget)
            if active >= self.max_num_seqs or n == 0:
                break
            need = view.blocks_needed(s, n)
            if need > free:
                break
            plan.tokens[s.id] = n
            budget -= n
            free -= need
            active += 1
        return plan
