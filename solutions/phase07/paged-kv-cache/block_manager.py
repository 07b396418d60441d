"""A paged KV-cache block manager in the style of vLLM (reference).

One free queue of every block nobody references, in eviction order (vLLM v1's
free_block_queue); the prefix cache maps a block's chain hash to the block holding it; a block
stays in the cache while it sits in the free queue, until it is allocated again (evicted).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from .kv_store import KVPool, NoFreeBlocks, transfer

ROOT = 0x5EED  # the parent of block 0's hash


def block_hashes(tokens: Sequence[int], block_size: int, parent: Hashable = ROOT) -> list[int]:
    """One hash per FULL block; block i's hash covers block i's tokens and, through the parent
    hash, every token before it."""
    out = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash((parent, tuple(tokens[start : start + block_size])))
        out.append(parent)
    return out


class _Seq:
    __slots__ = ("tokens", "table", "hashes", "swapped")

    def __init__(self, tokens: list[int], table: list[int], hashes: list[int]) -> None:
        self.tokens = tokens
        self.table = table
        self.hashes = hashes  # of the full blocks, in order
        self.swapped = False


class BlockManager:
    def __init__(self, gpu: KVPool, cpu: KVPool | None = None, *, prefix_caching: bool = True):
        self.gpu = gpu
        self.cpu = cpu
        self.block_size = gpu.block_size
        self.prefix_caching = prefix_caching
        self._ref = [0] * gpu.num_blocks
        # dict as an ordered set: O(1) append, pop-oldest and removal from the middle
        self._free: dict[int, None] = dict.fromkeys(range(gpu.num_blocks))
        self._cache: dict[int, int] = {}  # chain hash -> block
        self._hash_of: dict[int, int] = {}  # block -> its hash, for blocks in the cache
        self._cpu_free = list(range(cpu.num_blocks - 1, -1, -1)) if cpu else []
        self._seqs: dict[int, _Seq] = {}

    # ------------------------------------------------------------------ queries
    def _get(self, seq_id: int) -> _Seq:
        s = self._seqs.get(seq_id)
        if s is None:
            raise ValueError(f"unknown sequence {seq_id!r}")
        return s

    def block_table(self, seq_id: int) -> list[int]:
        return list(self._get(seq_id).table)

    def num_tokens(self, seq_id: int) -> int:
        return len(self._get(seq_id).tokens)

    def ref_count(self, block: int) -> int:
        return self._ref[block]

    def num_free_blocks(self) -> int:
        return len(self._free)

    def is_cached(self, block: int) -> bool:
        return block in self._hash_of

    def is_swapped(self, seq_id: int) -> bool:
        return self._get(seq_id).swapped

    # ------------------------------------------------------------------ blocks
    def _allocate(self) -> int:
        """The least recently freed block; dropped from the prefix cache if it was in it."""
        block = next(iter(self._free))
        del self._free[block]
        h = self._hash_of.pop(block, None)
        if h is not None:
            del self._cache[h]
        self._ref[block] = 1
        return block

    def _release(self, block: int) -> None:
        self._ref[block] -= 1
        if self._ref[block] == 0:
            self._free[block] = None

    def _register(self, block: int, h: int) -> None:
        if self.prefix_caching and h not in self._cache:
            self._cache[h] = block
            self._hash_of[block] = h

    def _write(self, table: list[int], tokens: Sequence[int], start: int) -> None:
        bs = self.block_size
        pos = start
        while pos < len(tokens):
            off = pos % bs
            n = min(bs - off, len(tokens) - pos)
            self.gpu.write(table[pos // bs], off, tokens[pos : pos + n])
            pos += n

    def add_sequence(self, seq_id: int, prompt: Sequence[int]) -> int:
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id!r} already exists")
        if len(prompt) == 0:
            raise ValueError(f"sequence {seq_id!r}: empty prompt")
        bs = self.block_size
        tokens = list(prompt)
        hashes = block_hashes(tokens, bs)
        hits: list[int] = []
        if self.prefix_caching:
            # The last prompt token is always computed (its logits give the first output).
            for i, h in enumerate(hashes[: (len(tokens) - 1) // bs]):
                block = self._cache.get(h)
                # Python's hash collides (hash(2**61 - 1) == hash(0)): a hit compares the
                # block's tokens, and the earlier blocks were compared before it.
                if block is None or self.gpu.read(block) != tokens[i * bs : (i + 1) * bs]:
                    break
                hits.append(block)
        needed = -(-len(tokens) // bs) - len(hits)
        hits_in_free = sum(1 for b in hits if self._ref[b] == 0)
        if needed > len(self._free) - hits_in_free:
            raise NoFreeBlocks(
                f"sequence {seq_id!r} needs {needed} new blocks, "
                f"{len(self._free) - hits_in_free} free"
            )
        for block in hits:
            if self._ref[block] == 0:
                del self._free[block]
            self._ref[block] += 1
        table = hits + [self._allocate() for _ in range(needed)]
        self._write(table, tokens, len(hits) * bs)
        for i in range(len(hits), len(hashes)):
            self._register(table[i], hashes[i])
        self._seqs[seq_id] = _Seq(tokens, table, hashes)
        return len(hits) * bs

    def append_token(self, seq_id: int, token: int) -> None:
        s = self._get(seq_id)
        if s.swapped:
            raise ValueError(f"sequence {seq_id!r} is swapped out")
        bs = self.block_size
        off = len(s.tokens) % bs
        if off == 0:
            if not self._free:
                raise NoFreeBlocks(f"sequence {seq_id!r} needs a new block, none free")
            s.table.append(self._allocate())
        elif self._ref[s.table[-1]] > 1:  # shared with a fork: copy before writing
            if not self._free:
                raise NoFreeBlocks(f"sequence {seq_id!r} needs a block to copy on write")
            old = s.table[-1]
            new = self._allocate()
            self.gpu.copy(old, new, off)
            self._ref[old] -= 1  # still >= 1: another sequence holds it
            s.table[-1] = new
        self.gpu.write(s.table[-1], off, (token,))
        s.tokens.append(token)
        if off + 1 == bs:
            parent = s.hashes[-1] if s.hashes else ROOT
            h = hash((parent, tuple(s.tokens[-bs:])))
            s.hashes.append(h)
            self._register(s.table[-1], h)

    def free(self, seq_id: int) -> None:
        s = self._get(seq_id)
        del self._seqs[seq_id]
        if s.swapped:
            self._cpu_free.extend(reversed(s.table))
            return
        for block in reversed(s.table):  # the tail is evicted first, the prefix last
            self._release(block)

    # ------------------------------------------------------------------ forks
    def fork(self, parent_id: int, child_id: int) -> None:
        p = self._get(parent_id)
        if p.swapped:
            raise ValueError(f"sequence {parent_id!r} is swapped out")
        if child_id in self._seqs:
            raise ValueError(f"sequence {child_id!r} already exists")
        for block in p.table:
            self._ref[block] += 1
        self._seqs[child_id] = _Seq(list(p.tokens), list(p.table), list(p.hashes))

    # ------------------------------------------------------------------ swapping
    def _filled(self, s: _Seq, i: int) -> int:
        return min(self.block_size, len(s.tokens) - i * self.block_size)

    def swap_out(self, seq_id: int) -> None:
        s = self._get(seq_id)
        if s.swapped:
            raise ValueError(f"sequence {seq_id!r} is already swapped out")
        if self.cpu is None or len(s.table) > len(self._cpu_free):
            free = len(self._cpu_free)
            raise NoFreeBlocks(f"sequence {seq_id!r} needs {len(s.table)} cpu blocks, {free} free")
        cpu_table = []
        for i, block in enumerate(s.table):
            c = self._cpu_free.pop()
            transfer(self.gpu, block, self.cpu, c, self._filled(s, i))
            cpu_table.append(c)
        for block in reversed(s.table):
            self._release(block)
        s.table = cpu_table
        s.swapped = True

    def swap_in(self, seq_id: int) -> None:
        s = self._get(seq_id)
        if not s.swapped:
            raise ValueError(f"sequence {seq_id!r} is not swapped out")
        if len(s.table) > len(self._free):
            raise NoFreeBlocks(
                f"sequence {seq_id!r} needs {len(s.table)} blocks, {len(self._free)} free"
            )
        gpu_table = []
        for i, c in enumerate(s.table):
            block = self._allocate()
            transfer(self.cpu, c, self.gpu, block, self._filled(s, i))  # type: ignore[arg-type]
            gpu_table.append(block)
        self._cpu_free.extend(reversed(s.table))
        for i, h in enumerate(s.hashes):
            self._register(gpu_table[i], h)
        s.table = gpu_table
        s.swapped = False
