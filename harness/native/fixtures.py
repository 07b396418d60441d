"""The `native` pytest fixture: build a kata's C/C++ files and load them with cffi.

Registered by harness.plugin (`pytest_plugins = ["harness.native.fixtures"]`). In a kata test:

    def test_alloc(native):
        lib = native("allocator.c", header="allocator.h")
        p = lib.kata_alloc(16)

File names resolve through the `kata` fixture, so the same test builds the learner's stub or the
reference solution. `--kata-sanitize=address,undefined` adds sanitizers to every build.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.native.build import BuildError, BuildResult, build_executable, build_shared_library
from harness.native.callgrind import instruction_count
from harness.native.isolate import run_isolated
from harness.native.loader import NativeLibrary, load

__all__ = ["NativeBuilder", "native"]

_CPP_SUFFIXES = {".cc", ".cpp", ".cxx", ".c++", ".C"}


def _asan_in_process() -> bool:
    # An ASan library loads only if the runtime is already mapped (LD_PRELOAD at start-up).
    try:
        return "libasan" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


class NativeBuilder:
    """What the `native` fixture returns. Calling it builds and loads; see the methods for more."""

    def __init__(
        self,
        resolve: Callable[[str], Path],
        search_path: Sequence[Path],
        default_sanitize: tuple[str, ...] = (),
    ) -> None:
        self._resolve = resolve
        self.search_path = list(search_path)
        self.default_sanitize = default_sanitize

    def path(self, name: str | os.PathLike[str]) -> Path:
        """The file `name` of the current implementation (learner stub or reference solution)."""
        p = Path(name)
        return p if p.is_absolute() else self._resolve(str(name))

    def _sanitize(self, sanitize: Iterable[str] | str | None) -> tuple[str, ...]:
        if sanitize is None:
            return self.default_sanitize
        if isinstance(sanitize, str):
            return tuple(s for s in sanitize.split(",") if s)
        return tuple(sanitize)

    def _args(
        self,
        sources: Sequence[str | os.PathLike[str]],
        header: str | os.PathLike[str] | None,
        lang: str | None,
        include_dirs: Iterable[str | os.PathLike[str]],
        headers: Iterable[str | os.PathLike[str]],
    ) -> dict[str, Any]:
        if not sources:
            raise TypeError("native() needs at least one source file name")
        srcs = [self.path(s) for s in sources]
        hdrs = [self.path(h) for h in headers]
        if header is not None:
            hdrs.append(self.path(header))
        if lang is None:
            lang = "cpp" if any(s.suffix in _CPP_SUFFIXES for s in srcs) else "c"
        # Kata dir and solution mirror both: a solution's allocator.c includes the kata's header.
        incs = [*(self.path(d) for d in include_dirs), *self.search_path]
        return {"headers": hdrs, "lang": lang, "include_dirs": incs, "root": srcs[0].parent}

    def build(
        self,
        *sources: str | os.PathLike[str],
        header: str | os.PathLike[str] | None = None,
        headers: Iterable[str | os.PathLike[str]] = (),
        lang: str | None = None,
        flags: Sequence[str] = (),
        sanitize: Iterable[str] | str | None = None,
        werror: bool = False,
        include_dirs: Iterable[str | os.PathLike[str]] = (),
    ) -> BuildResult:
        """Compile into a cached shared library; a compile error fails the test with the
        compiler's first errors. `sanitize=None` means the `--kata-sanitize` default."""
        __tracebackhide__ = True
        kw = self._args(sources, header, lang, include_dirs, headers)
        try:
            return build_shared_library(
                [self.path(s) for s in sources],
                flags=flags,
                sanitize=self._sanitize(sanitize),
                werror=werror,
                **kw,
            )
        except BuildError as err:
            pytest.fail(f"compilation failed:\n{err}", pytrace=False)

    def executable(
        self,
        *sources: str | os.PathLike[str],
        header: str | os.PathLike[str] | None = None,
        headers: Iterable[str | os.PathLike[str]] = (),
        lang: str | None = None,
        flags: Sequence[str] = (),
        link_flags: Sequence[str] = (),
        sanitize: Iterable[str] | str | None = None,
        werror: bool = False,
        include_dirs: Iterable[str | os.PathLike[str]] = (),
    ) -> BuildResult:
        """Compile and link a program (a C driver) into the cache."""
        __tracebackhide__ = True
        kw = self._args(sources, header, lang, include_dirs, headers)
        try:
            return build_executable(
                [self.path(s) for s in sources],
                flags=flags,
                link_flags=link_flags,
                sanitize=self._sanitize(sanitize),
                werror=werror,
                **kw,
            )
        except BuildError as err:
            pytest.fail(f"compilation failed:\n{err}", pytrace=False)

    def __call__(
        self,
        *sources: str | os.PathLike[str],
        header: str | os.PathLike[str] | None = None,
        declarations: str | None = None,
        headers: Iterable[str | os.PathLike[str]] = (),
        lang: str | None = None,
        flags: Sequence[str] = (),
        sanitize: Iterable[str] | str | None = None,
        werror: bool = False,
        include_dirs: Iterable[str | os.PathLike[str]] = (),
    ) -> NativeLibrary:
        """Build `sources` and load them in this process: C functions are attributes of the
        result, `.ffi` makes buffers (`lib.ffi.new("int[]", 8)`).

        Declarations come from `header` and/or the `declarations` string. With AddressSanitizer
        requested, loading in-process needs the ASan runtime preloaded; use `native.run()`.
        """
        __tracebackhide__ = True
        result = self.build(
            *sources,
            header=header,
            headers=headers,
            lang=lang,
            flags=flags,
            sanitize=sanitize,
            werror=werror,
            include_dirs=include_dirs,
        )
        if "address" in result.sanitize and not _asan_in_process():
            pytest.fail(
                "AddressSanitizer builds cannot be loaded into this pytest process (the ASan "
                "runtime was not preloaded). Call the code through native.run(func, ...), or "
                "start pytest with harness.native.sanitizer_env(['address']).",
                pytrace=False,
            )
        return load(declarations, result, header=self.path(header) if header else None)

    def run(
        self, func: Callable[..., Any], *args: Any, timeout: float = 60.0, **kwargs: Any
    ) -> Any:
        """`run_isolated(func, *args)` with the sanitizers of any BuildResult among the args:
        a crash fails only this call (NativeCrash), and ASan builds work."""
        sanitize: set[str] = set(self.default_sanitize)
        for a in (*args, *kwargs.values()):
            if isinstance(a, BuildResult):
                sanitize.update(a.sanitize)
        root = self.search_path[0] if self.search_path else None
        return run_isolated(
            func, *args, sanitize=sorted(sanitize), timeout=timeout, root=root, **kwargs
        )

    def instructions(self, program: BuildResult, *args: str, function: str | None = None) -> int:
        """Callgrind instruction count (deterministic) of a program from `native.executable`."""
        return instruction_count(program, *args, function=function)


def _resolver(request: pytest.FixtureRequest) -> tuple[Callable[[str], Path], list[Path]]:
    try:
        kata = request.getfixturevalue("kata")
    except pytest.FixtureLookupError:
        kata = None
    if kata is not None:
        return kata.source, list(getattr(kata, "search_path", [getattr(kata, "dir", Path.cwd())]))
    # No harness plugin (a plain pytest run of harness tests): tests/ sits inside the kata.
    base = Path(request.path).parent.parent

    def resolve(name: str) -> Path:
        for d in (base, Path(request.path).parent):
            if (d / name).exists():
                return d / name
        raise FileNotFoundError(f"{name} not found in {base}")

    return resolve, [base]


@pytest.fixture
def native(request: pytest.FixtureRequest) -> NativeBuilder:
    """Build and load the kata's C/C++ sources: `native("allocator.c", header="allocator.h")`."""
    resolve, search_path = _resolver(request)
    option = request.config.getoption("kata_sanitize", default=None)
    default = tuple(s for s in (option or "").split(",") if s)
    return NativeBuilder(resolve, search_path, default)
