"""Recursive-descent parser: tokens -> Program (reference solution)."""

from __future__ import annotations

from .semantics import f32
from .syntax import (
    COMPARISONS,
    Binary,
    Call,
    CompileError,
    Expr,
    Input,
    Let,
    Name,
    Num,
    Program,
    Select,
    Token,
    Unary,
)


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def at(self, text: str) -> bool:
        return self.tok.kind in ("op", "keyword") and self.tok.text == text

    def fail(self, expected: str) -> CompileError:
        tok = self.tok
        found = "end of input" if tok.kind == "eof" else repr(tok.text)
        return CompileError(tok.line, tok.col, f"expected {expected}, found {found}")

    def expect(self, text: str) -> Token:
        if not self.at(text):
            raise self.fail(repr(text))
        return self.advance()

    def name(self) -> Token:
        if self.tok.kind != "name":
            raise self.fail("a name")
        return self.advance()

    # program := ("in" input ("," input)* ";")? ("let" NAME "=" expr ";")* expr EOF
    def program(self) -> Program:
        inputs: list[Input] = []
        if self.at("in"):
            self.advance()
            while True:
                n = self.name()
                self.expect(":")
                if self.tok.kind != "name" or self.tok.text not in ("f32", "i32"):
                    raise self.fail("a type (f32 or i32)")
                inputs.append(Input(n.text, self.advance().text, n.line, n.col))
                if not self.at(","):
                    break
                self.advance()
            self.expect(";")
        lets: list[Let] = []
        while self.at("let"):
            self.advance()
            n = self.name()
            self.expect("=")
            value = self.expr()
            self.expect(";")
            lets.append(Let(n.text, value, n.line, n.col))
        result = self.expr()
        if self.tok.kind != "eof":
            raise self.fail("end of input")
        return Program(inputs, lets, result)

    # expr := cond ("?" expr ":" expr)?
    def expr(self) -> Expr:
        cond = self.comparison()
        if self.at("?"):
            q = self.advance()
            then = self.expr()
            self.expect(":")
            other = self.expr()
            return Select(q.line, q.col, cond, then, other)
        return cond

    def comparison(self) -> Expr:
        left = self.sum()
        if self.tok.kind == "op" and self.tok.text in COMPARISONS:
            op = self.advance()
            right = self.sum()
            if self.tok.kind == "op" and self.tok.text in COMPARISONS:
                raise CompileError(
                    self.tok.line, self.tok.col, "comparison operators do not chain: use ( )"
                )
            return Binary(op.line, op.col, op.text, left, right)
        return left

    def sum(self) -> Expr:
        left = self.term()
        while self.at("+") or self.at("-"):
            op = self.advance()
            left = Binary(op.line, op.col, op.text, left, self.term())
        return left

    def term(self) -> Expr:
        left = self.unary()
        while self.at("*") or self.at("/") or self.at("%"):
            op = self.advance()
            left = Binary(op.line, op.col, op.text, left, self.unary())
        return left

    def unary(self) -> Expr:
        if self.at("-"):
            op = self.advance()
            return Unary(op.line, op.col, "-", self.unary())
        return self.primary()

    def primary(self) -> Expr:
        tok = self.tok
        if tok.kind == "int":
            self.advance()
            return Num(tok.line, tok.col, int(tok.text))
        if tok.kind == "float":
            self.advance()
            return Num(tok.line, tok.col, f32(float(tok.text)))
        if tok.kind == "name":
            self.advance()
            if self.at("("):
                self.advance()
                args: list[Expr] = []
                if not self.at(")"):
                    args.append(self.expr())
                    while self.at(","):
                        self.advance()
                        args.append(self.expr())
                self.expect(")")
                return Call(tok.line, tok.col, tok.text, args)
            return Name(tok.line, tok.col, tok.text)
        if self.at("("):
            self.advance()
            inner = self.expr()
            self.expect(")")
            return inner
        raise self.fail("an expression")


def parse(tokens: list[Token]) -> Program:
    """Parse a token list (from lexer.tokenize) into a Program."""
    return _Parser(tokens).program()
