"""GIVEN (not graded): the model the tests check your block manager against, step by step.

`machine(...)` builds a hypothesis RuleBasedStateMachine that drives a BlockManager with random
operations (add a sequence, append a token, fork, swap out and in, free) and keeps a *model*:
the tokens each live sequence should hold, and where it lives. After every operation it checks:

- every live sequence reads back its own tokens through its block table, from the pool it is in;
- each table has exactly ceil(tokens / block_size) blocks, no block twice, all in range;
- ref_count(b) == how many gpu tables hold b, for every gpu block; num_free_blocks() ==
  blocks that no table holds (nothing leaked, nothing double-freed);
- a gpu block shared by two tables sits at the same position in both, after identical tokens
  (sharing is only ever of equal prefixes);
- cpu blocks of swapped-out sequences are all distinct;
- an operation that must fit (enough free blocks even without any cache hit) succeeds; one that
  raises NoFreeBlocks changed nothing.

When the machine stops, every sequence is freed and every gpu block must be free again.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from .kv_store import KVPool, NoFreeBlocks

# Prompts are drawn from a few shared prefixes plus random tails over a tiny vocabulary, so
# that full blocks repeat (prefix hits) and nearly-equal prefixes meet (wrong hashes show).
_PREFIXES = (
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
    [1, 2, 3, 4, 9, 9, 9, 9],
    [7, 7, 7, 7, 5, 6, 7, 8],  # the first prefix's second block after another first block
    [5, 5, 5, 5, 5, 5, 5, 5, 5],  # one block's tokens twice in a row
)


def _prompt(seed: int) -> list[int]:
    # One integer per prompt (cheaper for hypothesis than drawing the lists themselves).
    rng = random.Random(seed)
    head = rng.choice(_PREFIXES)[: rng.randint(0, 12)]
    return head + [rng.randint(0, 3) for _ in range(rng.randint(0 if head else 1, 9))]


def machine(
    manager_class: Any,
    *,
    num_blocks: int = 16,
    block_size: int = 4,
    num_cpu_blocks: int = 0,
    prefix_caching: bool = False,
    forks: bool = False,
    swaps: bool = False,
) -> type[RuleBasedStateMachine]:
    """A state machine class for `manager_class` with the given features switched on."""

    class BlockManagerMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.gpu = KVPool(num_blocks, block_size, "gpu")
            self.cpu = KVPool(num_cpu_blocks, block_size, "cpu") if swaps else None
            self.m = manager_class(self.gpu, self.cpu, prefix_caching=prefix_caching)
            self.seqs: dict[int, list[int]] = {}  # live sequence -> its tokens
            self.swapped: set[int] = set()
            self.next_id = 0
            self.clean = False  # True only right after every check has passed

        # -------------------------------------------------------------- helpers
        def _snapshot(self) -> Any:
            tables = {s: self.m.block_table(s) for s in self.seqs}
            refs = [self.m.ref_count(b) for b in range(num_blocks)]
            return tables, refs, self.m.num_free_blocks(), self.gpu.writes

        def _unchanged(self, before: Any, what: str) -> None:
            after = self._snapshot()
            assert after == before, f"{what} raised NoFreeBlocks but changed the manager's state"

        def _on_gpu(self) -> list[int]:
            return [s for s in self.seqs if s not in self.swapped]

        def _blocks(self, n: int) -> int:
            return -(-n // block_size)

        # -------------------------------------------------------------- rules
        @rule(seed=st.integers(0, 2**32))
        def add(self, seed: int) -> None:
            self.clean = False
            prompt = _prompt(seed)
            sid = self.next_id
            self.next_id += 1
            free, before = self.m.num_free_blocks(), self._snapshot()
            need = self._blocks(len(prompt))
            try:
                cached = self.m.add_sequence(sid, prompt)
            except NoFreeBlocks:
                assert need > free, (
                    f"add_sequence({sid}, {len(prompt)} tokens) needs {need} blocks at most, "
                    f"{free} are free, but it raised NoFreeBlocks"
                )
                self._unchanged(before, f"add_sequence({sid}, ...)")
                return
            assert prefix_caching or need <= free, (
                f"add_sequence: {need} blocks needed, {free} free, but it did not raise"
            )
            written = self.gpu.writes - before[3]
            assert cached + written == len(prompt), (
                f"add_sequence({sid}, {len(prompt)} tokens) returned {cached} cached tokens and "
                f"wrote {written}: cached + written must be the prompt length"
            )
            if not prefix_caching:
                assert cached == 0, f"prefix caching is off but {cached} tokens were 'cached'"
            assert cached % block_size == 0 and cached < len(prompt), (
                f"add_sequence: {cached} cached tokens of {len(prompt)}: hits are whole blocks, "
                "and the last prompt token is always computed"
            )
            self.seqs[sid] = list(prompt)

        @precondition(lambda self: self._on_gpu())
        @rule(data=st.data(), token=st.integers(0, 3))
        def append(self, data: Any, token: int) -> None:
            self.clean = False
            sid = data.draw(st.sampled_from(sorted(self._on_gpu())), label="sequence")
            n = len(self.seqs[sid])
            table = self.m.block_table(sid)
            need = 1 if n % block_size == 0 or self.m.ref_count(table[-1]) > 1 else 0
            free, before = self.m.num_free_blocks(), self._snapshot()
            try:
                self.m.append_token(sid, token)
            except NoFreeBlocks:
                assert need > free, (
                    f"append_token({sid}) needs {need} block(s), {free} free, but it raised "
                    "NoFreeBlocks"
                )
                self._unchanged(before, f"append_token({sid}, ...)")
                return
            assert need <= free, (
                f"append_token({sid}) needs a block, none is free, yet it did not raise"
            )
            self.seqs[sid].append(token)

        @precondition(lambda self: forks and self._on_gpu())
        @rule(data=st.data())
        def fork(self, data: Any) -> None:
            self.clean = False
            parent = data.draw(st.sampled_from(sorted(self._on_gpu())), label="parent")
            child = self.next_id
            self.next_id += 1
            free, writes = self.m.num_free_blocks(), self.gpu.writes
            self.m.fork(parent, child)
            assert self.m.num_free_blocks() == free and self.gpu.writes == writes, (
                "fork() must share the parent's blocks: it allocated or wrote"
            )
            self.seqs[child] = list(self.seqs[parent])

        @precondition(lambda self: swaps and self._on_gpu())
        @rule(data=st.data())
        def swap_out(self, data: Any) -> None:
            self.clean = False
            sid = data.draw(st.sampled_from(sorted(self._on_gpu())), label="sequence")
            need = len(self.m.block_table(sid))
            cpu_used = sum(len(self.m.block_table(s)) for s in self.swapped)
            free, before = num_cpu_blocks - cpu_used, self._snapshot()
            try:
                self.m.swap_out(sid)
            except NoFreeBlocks:
                assert need > free, (
                    f"swap_out({sid}) needs {need} cpu blocks, {free} free, but it raised NoFreeBlocks"
                )
                self._unchanged(before, f"swap_out({sid})")
                return
            assert need <= free, f"swap_out({sid}) used {need} cpu blocks, only {free} were free"
            assert self.m.is_swapped(sid), f"is_swapped({sid}) is False after swap_out"
            self.swapped.add(sid)

        @precondition(lambda self: swaps and self.swapped)
        @rule(data=st.data())
        def swap_in(self, data: Any) -> None:
            self.clean = False
            sid = data.draw(st.sampled_from(sorted(self.swapped)), label="sequence")
            need = len(self.m.block_table(sid))
            free, before = self.m.num_free_blocks(), self._snapshot()
            try:
                self.m.swap_in(sid)
            except NoFreeBlocks:
                assert need > free, (
                    f"swap_in({sid}) needs {need} blocks, {free} free, but it raised NoFreeBlocks"
                )
                self._unchanged(before, f"swap_in({sid})")
                return
            assert not self.m.is_swapped(sid), f"is_swapped({sid}) is True after swap_in"
            self.swapped.discard(sid)

        @precondition(lambda self: self.seqs)
        @rule(data=st.data())
        def free(self, data: Any) -> None:
            self.clean = False
            sid = data.draw(st.sampled_from(sorted(self.seqs)), label="sequence")
            self.m.free(sid)
            del self.seqs[sid]
            self.swapped.discard(sid)

        # -------------------------------------------------------------- invariants
        @invariant()
        def tables_hold_the_tokens(self) -> None:
            where: dict[int, list[tuple[int, int]]] = {}  # gpu block -> [(sequence, index)]
            cpu_blocks: list[int] = []
            for sid, toks in self.seqs.items():
                table = self.m.block_table(sid)
                assert self.m.num_tokens(sid) == len(toks), (
                    f"num_tokens({sid}) = {self.m.num_tokens(sid)}, want {len(toks)}"
                )
                assert len(table) == self._blocks(len(toks)), (
                    f"sequence {sid}: {len(toks)} tokens in {len(table)} blocks of {block_size}"
                )
                assert len(set(table)) == len(table), f"sequence {sid}: a block twice: {table}"
                pool = self.cpu if sid in self.swapped else self.gpu
                for i, b in enumerate(table):
                    assert 0 <= b < pool.num_blocks, f"sequence {sid}: block {b} out of range"
                    want = toks[i * block_size : (i + 1) * block_size]
                    got = pool.read(b, 0, len(want))
                    assert got == want, (
                        f"sequence {sid} reads {got} from {pool.name} block {b} (logical block "
                        f"{i}), want {want}: its tokens are not where its block table says"
                    )
                    if pool is self.gpu:
                        where.setdefault(b, []).append((sid, i))
                    else:
                        cpu_blocks.append(b)
            assert len(set(cpu_blocks)) == len(cpu_blocks), (
                "two swapped sequences share a cpu block"
            )
            for b in range(num_blocks):
                holders = where.get(b, [])
                assert self.m.ref_count(b) == len(holders), (
                    f"ref_count({b}) = {self.m.ref_count(b)}, but {len(holders)} block tables hold "
                    f"it: {holders}"
                )
                if len(holders) > 1:
                    (s0, i0), rest = holders[0], holders[1:]
                    for s1, i1 in rest:
                        assert i1 == i0, f"block {b} is logical block {i0} of {s0} and {i1} of {s1}"
                        end = i0 * block_size
                        assert self.seqs[s0][:end] == self.seqs[s1][:end], (
                            f"block {b} is shared by sequences {s0} and {s1} after different "
                            "prefixes: a block's KV depends on every token before it"
                        )
            used = len(where)
            assert self.m.num_free_blocks() == num_blocks - used, (
                f"num_free_blocks() = {self.m.num_free_blocks()}, but {used} of {num_blocks} "
                "blocks are in block tables"
            )
            self.clean = True

        def teardown(self) -> None:
            # Only when every check passed (else the first failure is the message): free all;
            # every gpu block must be free again.
            if not getattr(self, "clean", False):
                return
            for sid in list(self.seqs):
                self.m.free(sid)
            free = self.m.num_free_blocks()
            assert free == num_blocks, f"all sequences freed, {free} of {num_blocks} blocks free"

    return BlockManagerMachine
