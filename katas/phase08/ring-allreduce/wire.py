"""Task "framing": messages over a TCP byte stream.

TCP delivers a stream of bytes, not messages: one ``send`` of 1 MB can arrive as forty
``recv`` results of any sizes, and a ``send`` on a socket with a timeout may take only part of
what it was given. A frame (comm.py's wire format) is an 8-byte header -- kind and payload
length, little-endian u32 each -- then the payload.
"""

from __future__ import annotations

import socket

from harness import todo

from .comm import DATA, HEADER  # noqa: F401  (you will need them)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes from `sock` (n >= 0), however the stream cuts them. EOFError if the
    peer closes first (saying how many of the n bytes came)."""
    todo("recv_exact")


def send_frame(sock: socket.socket, payload: bytes, kind: int = DATA) -> None:
    """Send one frame: the header (kind, len(payload)) then the payload, all of it."""
    todo("send_frame")


def recv_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One whole frame: (kind, payload). EOFError if the peer closes before it is complete."""
    todo("recv_frame")
