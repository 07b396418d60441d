"""YOUR FILE. Task "canonical": one byte string per payload, and only that one.

A signature covers bytes, not meaning. So that a license re-serialised by any tool verifies
identically, and so that two encodings of one payload are never both accepted, every payload
has exactly one encoding (README "Canonical JSON"), a subset of RFC 8785 (JCS):
objects with their keys sorted by UTF-16 code units, no whitespace, strings as UTF-8 with only
the escapes JSON requires, integers only (no floats, |n| <= 2**53 - 1), strings in Unicode NFC.
"""

from __future__ import annotations

import json  # noqa: F401  (you will need them)
import unicodedata  # noqa: F401
from typing import Any

from harness import todo

MAX_INT = 2**53 - 1  # I-JSON (RFC 7493): beyond it, other parsers round
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def encode(value: Any) -> bytes:
    """The canonical bytes of `value` (dict, list, str, int, bool, None, nested); ValueError for
    a float, an integer beyond +-(2**53 - 1), a non-NFC string, a non-string key, any other type."""
    todo("encode")


def decode(data: bytes) -> Any:
    """The value whose canonical encoding is exactly `data`; ValueError for anything else: not
    UTF-8, not JSON, a duplicate key, a float (1.0, 1e3, NaN), or JSON that is not the canonical
    encoding of what it parses to (whitespace, key order, escapes, -0, non-NFC strings)."""
    todo("decode")
