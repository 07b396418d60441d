"""What the PTX parser and the value codecs share: type sizes, the errors, integer literals.

Its own module so that :mod:`.parser` (which encodes initialisers with :mod:`.values`) and
:mod:`.values` (which needs the sizes, the errors and the literal syntax) import it, not each other.
"""

from __future__ import annotations

__all__ = ["TYPE_BITS", "PtxError", "PtxSyntaxError", "PtxUnsupportedError", "parse_int"]

# PTX fundamental types and their sizes in bits.
TYPE_BITS: dict[str, int] = {
    "pred": 1,
    "b8": 8, "u8": 8, "s8": 8,
    "b16": 16, "u16": 16, "s16": 16, "f16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64,
}  # fmt: skip


class PtxError(Exception):
    """Base class of everything the PTX package raises about a program."""


class PtxSyntaxError(PtxError):
    """The text is not PTX this parser understands; the message starts with ``line N:``."""

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}")


class PtxUnsupportedError(PtxError):
    """Valid PTX outside the subset the interpreter executes."""


def parse_int(text: str) -> int:
    t = text.rstrip("U")
    neg = t.startswith("-")
    t = t.lstrip("-")
    if t[:2] in ("0x", "0X"):
        v = int(t[2:], 16)
    elif t[:2] in ("0b", "0B"):
        v = int(t[2:], 2)
    elif len(t) > 1 and t.startswith("0"):
        v = int(t, 8)
    else:
        v = int(t)
    return -v if neg else v
