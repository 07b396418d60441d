"""Global-memory sectors of one warp-wide access (reference).

DRAM and L2 move data in 32-byte sectors (an L1 cache line is 4 of them, 128 bytes). A warp's
load or store instruction is one request; the memory system fetches every sector that any
active lane touches, once. Coalescing efficiency = bytes the lanes asked for / bytes fetched.
"""

from __future__ import annotations

from collections.abc import Iterable

SECTOR_BYTES = 32


def sectors(addresses: Iterable[int | None], size: int = 4) -> int:
    """Distinct 32-byte sectors touched by one warp-wide access of `size` bytes per lane.
    `addresses` are byte addresses, one per lane, None for an inactive lane; an access that
    straddles a sector boundary touches both sectors."""
    if size not in (1, 2, 4, 8, 16):
        raise ValueError(f"size must be 1, 2, 4, 8 or 16 bytes, got {size}")
    touched: set[int] = set()
    for a in addresses:
        if a is None:
            continue
        if a < 0:
            raise ValueError(f"negative address {a}")
        touched.update(range(a // SECTOR_BYTES, (a + size - 1) // SECTOR_BYTES + 1))
    return len(touched)


def efficiency(addresses: Iterable[int | None], size: int = 4) -> float:
    """Useful bytes / fetched bytes for one warp-wide access: 1.0 when 32 lanes read 32
    consecutive floats, 0.125 when each lane's float is in a sector of its own. Lanes that
    read the same bytes count once as useful. 1.0 when no lane is active."""
    addrs = [a for a in addresses if a is not None]
    fetched = sectors(addrs, size) * SECTOR_BYTES
    if fetched == 0:
        return 1.0
    useful = len({b for a in addrs for b in range(a, a + size)})
    return useful / fetched
