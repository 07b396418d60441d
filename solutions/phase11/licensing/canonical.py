"""YOUR FILE. Task "canonical": one byte string per payload, and only that one.

A signature covers bytes, not meaning. So that a license re-serialised by any tool verifies
identically, and so that two encodings of one payload are never both accepted, every payload
has exactly one encoding (README "Canonical JSON"), a subset of RFC 8785 (JCS):
objects with their keys sorted by UTF-16 code units, no whitespace, strings as UTF-8 with only
the escapes JSON requires, integers only (no floats, |n| <= 2**53 - 1), strings in Unicode NFC.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

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


def _utf16_order(key: str) -> bytes:
    # RFC 8785 3.2.3: keys compare as UTF-16 code units (what JavaScript's sort does), which
    # differs from code points for characters above U+FFFF against U+E000..U+FFFF.
    return key.encode("utf-16-be")


def _string(s: str) -> str:
    if unicodedata.normalize("NFC", s) != s:
        raise ValueError(f"string {s!r} is not in Unicode NFC")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"string {s!r} holds a lone surrogate") from None
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _encode(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif type(value) is int:
        if abs(value) > MAX_INT:
            raise ValueError(f"integer {value} is beyond +-(2**53 - 1)")
        out.append(str(value))
    elif type(value) is str:
        out.append(_string(value))
    elif type(value) in (list, tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    elif type(value) is dict:
        if not all(type(k) is str for k in value):
            raise ValueError("object keys must be strings")
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16_order)):
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    else:
        raise ValueError(f"{type(value).__name__} {value!r} has no canonical encoding")


def encode(value: Any) -> bytes:
    """The canonical bytes of `value` (dict, list, str, int, bool, None, nested); ValueError for
    a float, an integer beyond +-(2**53 - 1), a non-NFC string, a non-string key, any other type."""
    out: list[str] = []
    _encode(value, out)
    return "".join(out).encode("utf-8")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _no_float(text: str) -> Any:
    raise ValueError(f"number {text} is not an integer")


def decode(data: bytes) -> Any:
    """The value whose canonical encoding is exactly `data`; ValueError for anything else: not
    UTF-8, not JSON, a duplicate key, a float (1.0, 1e3, NaN), or JSON that is not the canonical
    encoding of what it parses to (whitespace, key order, escapes, -0, non-NFC strings)."""
    if type(data) is not bytes:
        raise ValueError(f"decode takes bytes, got {type(data).__name__}")
    text = data.decode("utf-8")  # strict: a UnicodeDecodeError is a ValueError
    value = json.loads(
        text, object_pairs_hook=_no_duplicates, parse_float=_no_float, parse_constant=_no_float
    )
    if encode(value) != data:
        raise ValueError("not the canonical encoding of its value")
    return value
