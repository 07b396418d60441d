"""What one rank of a job holds (given; you read and use it, you do not edit it).

A `Comm` is this process's view of the job: its rank, the job's size, and one connected TCP
socket to every other rank (a full mesh over loopback, built by cluster.py before your code
runs). Every socket already has a timeout of `comm.timeout` seconds (``sock.settimeout``): a
``recv`` or ``send`` that makes no progress for that long raises ``socket.timeout``
(``TimeoutError``).

The wire format every rank speaks (wire.py writes it, the tests' own peers speak it too):

    frame  = header payload
    header = struct.pack("<II", kind, len(payload))     8 bytes, little-endian
    kind   = DATA (0): payload is array bytes; ABORT (1): payload is struct.pack("<I", rank)
             followed by a UTF-8 reason, and says "I give up: I was waiting on rank `rank`"
             (the README's "Faults": the failed rank is at the end of the chain of waits)

The tests count the bytes that cross each socket in the kernel (TCP_INFO, at the receiving end)
and compare them with what the algorithm sends: headers included, nothing else.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

DATA = 0
ABORT = 1
HEADER = struct.Struct("<II")  # kind, payload length
OPS = ("sum", "max")
DTYPES = ("float32", "float16", "int32")


class RankFailure(Exception):
    """A collective gave up because rank `rank` failed (died, stalled, or aborted the job).

    Raise it from your collective with the rank that failed, never the rank that noticed:
    ``raise RankFailure(3, "no data from rank 3 for 2.0 s")``."""

    def __init__(self, rank: int, reason: str = "") -> None:
        super().__init__(f"rank {rank} failed: {reason}" if reason else f"rank {rank} failed")
        self.rank = int(rank)
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[int, str]]:
        return (RankFailure, (self.rank, self.reason))


@dataclass
class Comm:
    """One rank's communicator: `rank` in 0..size-1, `peers[k]` the socket to rank k."""

    rank: int
    size: int
    peers: dict[int, socket.socket] = field(repr=False)
    timeout: float = 10.0

    def peer(self, k: int) -> socket.socket:
        """The socket to rank `k` (any k != rank; k is taken modulo size)."""
        k %= self.size
        if k == self.rank:
            raise ValueError(f"rank {self.rank} has no socket to itself")
        return self.peers[k]

    @property
    def left(self) -> int:
        """The rank this one receives from in the ring: rank - 1 (mod size)."""
        return (self.rank - 1) % self.size

    @property
    def right(self) -> int:
        """The rank this one sends to in the ring: rank + 1 (mod size)."""
        return (self.rank + 1) % self.size


__all__ = ["ABORT", "Comm", "DATA", "DTYPES", "HEADER", "OPS", "RankFailure"]
