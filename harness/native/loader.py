"""Load a built shared library with cffi in ABI mode (`ffi.cdef` + `ffi.dlopen`).

ABI mode needs no Python-extension build step: the declarations come from the kata's header
(simple C declarations, cleaned up here) or are passed in as a string.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import cffi

from harness import hangs
from harness.native.build import BuildResult

__all__ = ["NativeLibrary", "declarations_from_header", "load"]

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_INT_DEFINE = re.compile(
    r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+(\(?-?(?:0x[0-9a-fA-F]+|\d+)[uUlL]*\)?)\s*$"
)
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\(.*?\)\)")
_DROP_WORDS = re.compile(r"\b(extern\s+\"C\"|__restrict__|__restrict|__inline__|__extension__)\b")


def _strip_cplusplus_blocks(lines: list[str]) -> list[str]:
    """Drop `#ifdef __cplusplus` sections and every other preprocessor line.

    Integer `#define`s are kept (cffi understands `#define N 16`); other #if blocks (include
    guards, feature tests) keep their contents.
    """
    out: list[str] = []
    stack: list[bool] = []  # True while inside a __cplusplus-only branch
    for line in lines:
        directive = line.strip()
        if directive.startswith("#"):
            word = directive[1:].strip().split(None, 1)
            name = word[0] if word else ""
            rest = word[1] if len(word) > 1 else ""
            if name in ("if", "ifdef", "ifndef"):
                cpp_only = "__cplusplus" in rest and name != "ifndef" and "!" not in rest
                stack.append(cpp_only)
            elif name in ("else", "elif") and stack:
                stack[-1] = False if stack[-1] else ("__cplusplus" in rest and name == "elif")
            elif name == "endif" and stack:
                stack.pop()
            elif name == "define" and not any(stack):
                m = _INT_DEFINE.match(line)
                if m:
                    out.append(f"#define {m.group(1)} {m.group(2).strip('()').rstrip('uUlL')}")
            continue
        if not any(stack):
            out.append(line)
    return out


def _drop_function_bodies(text: str) -> str:
    """Remove `static inline` helpers and other function definitions: cdef takes declarations."""
    kept: list[str] = []
    keep_from = 0
    stmt_start = 0  # where the current top-level statement began
    depth = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "{" and depth == 0 and text[stmt_start:i].rstrip().endswith(")"):
            level, j = 0, i
            while j < len(text):  # find the matching brace of the body
                level += {"{": 1, "}": -1}.get(text[j], 0)
                if level == 0:
                    break
                j += 1
            kept.append(text[keep_from:stmt_start])
            keep_from = stmt_start = i = j + 1
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == ";" and depth == 0:
            stmt_start = i + 1
        elif ch == "\n" and depth == 0:
            line_start = text.rfind("\n", 0, i) + 1
            if text[line_start:i].lstrip().startswith("#"):  # a kept #define ends a statement
                stmt_start = i + 1
        i += 1
    kept.append(text[keep_from:])
    return "".join(kept)


def declarations_from_header(header: Path | str) -> str:
    """Read simple C declarations for `ffi.cdef` out of a header file."""
    text = Path(header).read_text(encoding="utf-8")
    text = _BLOCK_COMMENT.sub(" ", text)
    text = _LINE_COMMENT.sub("", text)
    text = "\n".join(_strip_cplusplus_blocks(text.splitlines()))
    text = _ATTRIBUTE.sub("", text)
    text = _DROP_WORDS.sub("", text)
    text = re.sub(r"\bstatic\s+inline\b|\binline\s+static\b", "static", text)
    text = _drop_function_bodies(text)
    text = re.sub(r"\bstatic\b\s*", "", text)
    text = re.sub(r"\n\s*\n+", "\n", text)
    return text.strip() + "\n"


class NativeLibrary:
    """A loaded library: attribute access reaches the C functions; `.ffi` makes buffers."""

    def __init__(self, ffi: cffi.FFI, lib: Any, path: Path, declarations: str) -> None:
        self.ffi = ffi
        self.lib = lib
        self.path = path
        self.declarations = declarations
        self._calls: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        # Only called for names not found on the wrapper itself.
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._calls:
            return self._calls[name]
        try:
            value = getattr(self.lib, name)
        except AttributeError:
            raise AttributeError(
                f"{self.path.name} has no symbol {name!r} declared; declared: "
                f"{', '.join(sorted(dir(self.lib))) or '(nothing)'}"
            ) from None
        if not _is_function(self.ffi, value):
            return value
        # The path is content-addressed (the build cache): same path, same code.
        call = _guarded(value, f"native:{self.path}:{name}", f"{name}()")
        self._calls[name] = call
        return call

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *dir(self.lib)})

    def __repr__(self) -> str:
        return f"<NativeLibrary {self.path}>"


def _is_function(ffi: cffi.FFI, value: Any) -> bool:
    try:
        return ffi.typeof(value).kind == "function"
    except (TypeError, cffi.FFIError):
        return False


def _guarded(func: Any, key: str, label: str) -> Any:
    """`func` called inside harness.hangs.running: a call that hung in an earlier kata test
    fails at once, and a test stopped inside it names the function."""

    @functools.wraps(func)
    def call(*args: Any) -> Any:
        # A guarded function passed as an argument (a callback: `lib.f(lib.kernel, ...)`) goes
        # to C as the C function it wraps; cffi accepts only that as a function pointer.
        args = tuple(getattr(a, _NATIVE, a) for a in args)
        with hangs.running(hangs.NATIVE, key, label):
            return func(*args)

    setattr(call, _NATIVE, func)
    return call


_NATIVE = "native_function"  # the C function behind a guarded call


def load(
    declarations: str | None,
    library: Path | str | BuildResult,
    *,
    header: Path | str | None = None,
) -> NativeLibrary:
    """`ffi.cdef(declarations)` (plus those parsed from `header`) and `ffi.dlopen(library)`.

    Sanitized (ASan) libraries only load in a process started with the ASan runtime preloaded:
    use harness.native.run_isolated for those.
    """
    path = library.path if isinstance(library, BuildResult) else Path(library)
    decls = ""
    if header is not None:
        decls += declarations_from_header(header)
    if declarations:
        decls += declarations if declarations.endswith("\n") else declarations + "\n"
    ffi = cffi.FFI()
    if decls.strip():
        try:
            ffi.cdef(decls)
        except cffi.CDefError as exc:
            raise ValueError(f"cannot parse declarations for {path.name}: {exc}\n{decls}") from exc
    lib = ffi.dlopen(str(path))
    return NativeLibrary(ffi, lib, path, decls)
