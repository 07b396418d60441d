"""Lexer: source text -> tokens with 1-based line and column (reference solution)."""

from __future__ import annotations

import re

from .syntax import KEYWORDS, OPERATORS, CompileError, Token

_NUMBER = re.compile(r"\d+(\.\d*)?([eE][+-]?\d*)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WELL_FORMED = re.compile(r"\d+(\.\d+)?([eE][+-]?\d+)?")


def tokenize(source: str) -> list[Token]:
    """All tokens of `source`, ending with one ``eof`` token at the end position."""
    tokens: list[Token] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(source):
        c = source[pos]
        col = pos - line_start + 1
        if c == "\n":
            line, line_start, pos = line + 1, pos + 1, pos + 1
            continue
        if c in " \t\r":
            pos += 1
            continue
        if c == "#":
            end = source.find("\n", pos)
            pos = len(source) if end < 0 else end
            continue
        if c.isdigit():
            text = _NUMBER.match(source, pos).group(0)
            if not _WELL_FORMED.fullmatch(text):
                raise CompileError(line, col, f"malformed number {text!r}")
            if "." in text or "e" in text.lower():
                tokens.append(Token("float", text, line, col))
            else:
                if int(text) > 2**31 - 1:
                    raise CompileError(line, col, f"integer literal {text} is out of range for i32")
                tokens.append(Token("int", text, line, col))
            pos += len(text)
            continue
        m = _NAME.match(source, pos)
        if m:
            kind = "keyword" if m.group(0) in KEYWORDS else "name"
            tokens.append(Token(kind, m.group(0), line, col))
            pos = m.end()
            continue
        for op in OPERATORS:
            if source.startswith(op, pos):
                tokens.append(Token("op", op, line, col))
                pos += len(op)
                break
        else:
            raise CompileError(line, col, f"unexpected character {c!r}")
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens
