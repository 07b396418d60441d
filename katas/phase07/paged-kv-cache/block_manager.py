"""YOUR FILE. A paged KV-cache block manager in the style of vLLM.

The KV cache is a pool of fixed-size blocks (kv_store.KVPool, given). Each sequence has a
*block table*: logical block i (its tokens i * block_size .. (i + 1) * block_size - 1) lives in
physical block table[i]. Blocks are handed out as a sequence grows, shared by reference count,
and found again by a hash of their contents (prefix caching). See README.md for the rules;
checker.py (given) holds the invariants the tests check after every operation.

Errors: misuse (an unknown or existing sequence id, an empty prompt, appending to a swapped-out
sequence) raises ValueError; running out of blocks raises kv_store.NoFreeBlocks and changes
nothing at all (the caller may preempt something and retry).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from harness import todo

from .kv_store import KVPool, NoFreeBlocks, transfer  # noqa: F401  (you will need them)


def block_hashes(tokens: Sequence[int], block_size: int) -> list[Hashable]:
    """Task "prefix": one hash per FULL block of `tokens` (a partial last block has none).
    Block i's hash must identify block i's tokens AND every token before them (a hash chain:
    hash of (block i - 1's hash, block i's tokens)), because a block's KV depends on the whole
    prefix. Deterministic within a process (Python's hash of ints and tuples is)."""
    todo("block_hashes")


class BlockManager:
    """Blocks of `gpu` (and `cpu`, for swapping) for many sequences.

    gpu: the pool whose blocks you hand out; write every token's KV into it with
         gpu.write(block, offset, tokens).
    cpu: the swap space (task "swap"), or None.
    prefix_caching: False turns the prefix cache off (tasks "blocks", "fork", "swap" are first
         tested without it).

    The free queue holds every gpu block nobody references, in eviction order; at the start
    0, 1, ..., num_blocks - 1. A new block always comes from its FRONT (the least recently
    freed); if that block is in the prefix cache, it leaves the cache (it is evicted). A freed
    block joins the BACK. A prefix-cache hit on a block in the free queue takes it out.
    """

    def __init__(self, gpu: KVPool, cpu: KVPool | None = None, *, prefix_caching: bool = True):
        self.gpu = gpu
        self.cpu = cpu
        self.block_size = gpu.block_size
        self.prefix_caching = prefix_caching

    # ------------------------------------------------------------------ task "blocks"
    def add_sequence(self, seq_id: int, prompt: Sequence[int]) -> int:
        """A new sequence holding `prompt`: its blocks, with the KV of each prompt token written
        into them (one gpu.write per block touched). Returns how many prompt tokens the prefix
        cache served (0 without prefix caching): those are NOT written again.

        Task "prefix": look the prompt's full blocks up in the cache in order and stop at the
        first miss; never look up the block holding the last prompt token (the model must
        compute at least that token to produce the first output). A hash is not the tokens:
        Python's hash collides (hash(2**61 - 1) == hash(0)), so a hit counts only if the cached
        block holds this block's tokens (gpu.read it), or else it is a miss. Every full block
        you write goes into the cache (unless the cache already holds its hash)."""
        todo("add_sequence")

    def append_token(self, seq_id: int, token: int) -> None:
        """Write the KV of one more token (a decode step). A new block when the last one is full;
        task "fork": a copy of the last block first (gpu.copy) when another sequence shares it
        (copy-on-write). A block that becomes full goes into the prefix cache."""
        todo("append_token")

    def free(self, seq_id: int) -> None:
        """The sequence has finished: drop its references, last block first. A block nobody
        references goes to the back of the free queue; if it is in the prefix cache it stays
        there (a later prompt can still hit it) until the block is allocated again."""
        todo("free")

    def block_table(self, seq_id: int) -> list[int]:
        """The sequence's physical block ids, logical block 0 first (a copy). For a swapped-out
        sequence, its blocks in the cpu pool."""
        todo("block_table")

    def num_tokens(self, seq_id: int) -> int:
        todo("num_tokens")

    def ref_count(self, block: int) -> int:
        """How many block tables (of sequences on the gpu) hold gpu block `block`."""
        todo("ref_count")

    def num_free_blocks(self) -> int:
        """Gpu blocks that nobody references (including those the prefix cache still holds:
        they can be evicted at any time)."""
        todo("num_free_blocks")

    # ------------------------------------------------------------------ task "prefix"
    def is_cached(self, block: int) -> bool:
        """Whether gpu block `block` is in the prefix cache (used or free)."""
        todo("is_cached")

    # ------------------------------------------------------------------ task "fork"
    def fork(self, parent_id: int, child_id: int) -> None:
        """A new sequence `child_id` with the parent's tokens, SHARING all of its blocks (parallel
        sampling, beam search): no block is allocated or copied here."""
        todo("fork")

    # ------------------------------------------------------------------ task "swap"
    def swap_out(self, seq_id: int) -> None:
        """Move the sequence's KV to the cpu pool: one cpu block per gpu block (transfer(...)),
        then drop its gpu references as free() does. NoFreeBlocks when the cpu pool lacks room
        (or there is none)."""
        todo("swap_out")

    def swap_in(self, seq_id: int) -> None:
        """Bring a swapped-out sequence back: fresh gpu blocks, one transfer per block, cpu
        blocks freed; its full blocks go into the prefix cache again (unless their hash is
        there). NoFreeBlocks when the gpu lacks blocks."""
        todo("swap_in")

    def is_swapped(self, seq_id: int) -> bool:
        todo("is_swapped")
