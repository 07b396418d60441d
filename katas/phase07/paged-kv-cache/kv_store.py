"""GIVEN (not graded): the KV-cache memory your block manager hands out, and its one exception.

A KVPool is `num_blocks` blocks of `block_size` slots each. In a real engine a slot holds, for
every layer, the key and value vectors of one token (vLLM's cache tensor is
[2, num_blocks, block_size, kv_heads, head_dim] per layer). Here a slot holds one number, the
token id whose KV it is: the tests read every sequence back through your block table and see
whose KV sits where.

The pool also counts the work done on it, which is what the tests grade:

- `writes`: token slots written = tokens whose KV the model computed (a prefix-cache hit is a
  block NOT written: the hit rate is measured here, not taken from your code);
- `copies`: blocks copied inside the pool (copy-on-write);
- `transfers_in`, `transfers_out`: blocks moved into / out of this pool (swapping, over PCIe).

Block ids are plain ints 0 .. num_blocks - 1; the pool does not know which are free: that is
the block manager's job.
"""

from __future__ import annotations

from collections.abc import Sequence

EMPTY = -1  # a slot nobody wrote


class NoFreeBlocks(RuntimeError):
    """There are not enough free blocks for the operation (it changed nothing)."""


class KVPool:
    """`num_blocks` blocks of `block_size` token slots, on one device ("gpu" or "cpu")."""

    def __init__(self, num_blocks: int, block_size: int, name: str = "gpu") -> None:
        if num_blocks < 0 or block_size < 1:
            raise ValueError(
                f"KVPool: need num_blocks >= 0 and block_size >= 1, got {num_blocks}, {block_size}"
            )
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.name = name
        self._slots = [EMPTY] * (num_blocks * block_size)
        self.writes = 0
        self.copies = 0
        self.transfers_in = 0
        self.transfers_out = 0

    def _check(self, block: int, offset: int, n: int) -> int:
        if not 0 <= block < self.num_blocks:
            raise IndexError(
                f"{self.name} pool: block {block} out of range 0..{self.num_blocks - 1}"
            )
        if offset < 0 or n < 0 or offset + n > self.block_size:
            raise IndexError(
                f"{self.name} pool: slots {offset}..{offset + n - 1} of block {block} "
                f"do not fit a block of {self.block_size}"
            )
        return block * self.block_size + offset

    def write(self, block: int, offset: int, tokens: Sequence[int]) -> None:
        """Store the KV of `tokens` in slots offset, offset + 1, ... of `block` (one block)."""
        start = self._check(block, offset, len(tokens))
        self._slots[start : start + len(tokens)] = tokens
        self.writes += len(tokens)

    def read(self, block: int, offset: int = 0, n: int | None = None) -> list[int]:
        """The token ids in slots offset .. offset + n - 1 of `block` (default: to its end)."""
        n = self.block_size - offset if n is None else n
        start = self._check(block, offset, n)
        return self._slots[start : start + n]

    def copy(self, src: int, dst: int, n: int) -> None:
        """Copy the first `n` slots of block `src` into block `dst` (copy-on-write)."""
        a, b = self._check(src, 0, n), self._check(dst, 0, n)
        self._slots[b : b + n] = self._slots[a : a + n]
        self.copies += 1


def transfer(src: KVPool, src_block: int, dst: KVPool, dst_block: int, n: int) -> None:
    """Move the first `n` slots of `src_block` in pool `src` to `dst_block` in pool `dst` (a swap
    over PCIe: GPU -> CPU on swap-out, CPU -> GPU on swap-in). `src` keeps its copy; the block
    manager decides whether `src_block` is free afterwards."""
    if src.block_size != dst.block_size:
        raise ValueError(f"transfer: block sizes differ ({src.block_size} vs {dst.block_size})")
    a, b = src._check(src_block, 0, n), dst._check(dst_block, 0, n)
    dst._slots[b : b + n] = src._slots[a : a + n]
    src.transfers_out += 1
    dst.transfers_in += 1
