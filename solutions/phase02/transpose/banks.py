"""Shared-memory bank conflicts of one warp-wide access (reference).

Shared memory is 32 banks, each 4 bytes wide: the 4-byte word at byte address a lives in bank
(a // 4) % 32. In one cycle each bank serves one word; threads that read the *same* word get it
by broadcast, threads that need *different* words of one bank wait for each other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

BANKS = 32
BANK_BYTES = 4


def conflict_degree(addresses: Iterable[int | None]) -> int:
    """Shared-memory transactions (wavefronts) one warp-wide 4-byte access needs: the most
    distinct words any single bank must deliver. 1 means conflict-free, 32 fully serialised.
    `addresses` are byte addresses, one per lane; None for an inactive lane. 0 if none is active.
    ValueError for a negative address or one that is not 4-byte aligned.
    """
    words: dict[int, set[int]] = defaultdict(set)
    for a in addresses:
        if a is None:
            continue
        if a < 0 or a % BANK_BYTES:
            raise ValueError(f"address {a} is not a non-negative multiple of {BANK_BYTES}")
        word = a // BANK_BYTES
        words[word % BANKS].add(word)
    return max((len(w) for w in words.values()), default=0)


def column_read_degree(row_floats: int, column: int = 0) -> int:
    """conflict_degree of 32 lanes reading column `column` of a float tile[32][row_floats]:
    lane i reads tile[i][column], at byte 4 * (i * row_floats + column). ValueError unless row_floats >= 1 and
    0 <= column < row_floats."""
    if row_floats < 1 or not 0 <= column < row_floats:
        raise ValueError(
            f"need row_floats >= 1 and 0 <= column < row_floats, got {row_floats}, {column}"
        )
    return conflict_degree(4 * (lane * row_floats + column) for lane in range(32))
