"""YOUR FILE. Shared-memory bank conflicts of one warp-wide access (task "banks").

Shared memory is 32 banks, each 4 bytes wide: the 4-byte word at byte address a lives in bank
(a // 4) % 32. In one cycle each bank serves one word; threads that read the *same* word get it
by broadcast, threads that need *different* words of one bank wait for each other.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness import todo

BANKS = 32
BANK_BYTES = 4


def conflict_degree(addresses: Iterable[int | None]) -> int:
    """Shared-memory transactions (wavefronts) one warp-wide 4-byte access needs: the most
    distinct words any single bank must deliver. 1 means conflict-free, 32 fully serialised.
    `addresses` are byte addresses, one per lane; None for an inactive lane. 0 if none is active.
    ValueError for a negative address or one that is not 4-byte aligned.
    """
    todo("conflict_degree: group the active lanes' words by bank, count distinct words")


def column_read_degree(row_floats: int, column: int = 0) -> int:
    """conflict_degree of 32 lanes reading column `column` of a float tile[32][row_floats]:
    lane i reads tile[i][column], at byte 4 * (i * row_floats + column). ValueError unless row_floats >= 1 and
    0 <= column < row_floats."""
    todo("column_read_degree: the 32 addresses of a column read, through conflict_degree")
