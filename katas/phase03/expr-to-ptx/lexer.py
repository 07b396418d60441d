"""Lexer: source text -> tokens (task "lexer"). README.md, "Tokens", has the rules."""

from __future__ import annotations

from harness import todo

from .syntax import KEYWORDS, OPERATORS, CompileError, Token  # noqa: F401


def tokenize(source: str) -> list[Token]:
    """All tokens of `source` with 1-based line and column, ending with one ``eof`` token.

    Kinds: "int" (``42``), "float" (``1.5``, ``2e3``, ``1.5e-3``), "name", "keyword" (in, let),
    "op" (any of OPERATORS; longest match first) and "eof". Skip spaces, tabs, newlines and
    ``#`` comments. Raise CompileError(line, col, ...) for an unexpected character, a malformed
    number (``1.``, ``2e``) or an integer literal above 2**31 - 1.
    """
    todo("lexer.tokenize")
