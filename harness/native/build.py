"""Compile learner C/C++ into a content-addressed cache.

The key hashes everything that changes the artefact: source and header contents, flags, compiler
path and `--version`. A warm rerun therefore runs no compiler, and failures are cached too, so a
broken file costs one compile per edit rather than one per test that uses it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.native import includes
from harness.native.cache import ArtefactCache, hash_parts
from harness.native.diagnostics import relativise, trim_compiler_output
from harness.toolchain import require_tool, tool_version_text

__all__ = [
    "BuildError",
    "BuildResult",
    "build_executable",
    "build_shared_library",
    "compile_count",
    "default_cache",
]

FORMAT_VERSION = "native-build-1"  # bump when the cache layout or base flags change
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".inc", ".inl")
SANITIZERS = frozenset({"address", "undefined", "leak", "thread"})
_OPT_FLAGS = ("-O2", "-g")
_SANITIZE_OPT_FLAGS = ("-O1", "-g", "-fno-omit-frame-pointer")  # readable sanitizer stacks
_COMMON_FLAGS = ("-Wall", "-fdiagnostics-color=never")
_COMPILE_TIMEOUT_S = 180

Lang = Literal["c", "cpp"]


class BuildError(Exception):
    """The compiler rejected the code. `str(err)` is trimmed learner feedback; `log` is all of it."""

    def __init__(self, message: str, *, log: str, command: Sequence[str]) -> None:
        super().__init__(message)
        self.log = log
        self.command = tuple(command)


@dataclass(frozen=True)
class BuildResult:
    path: Path  # the shared library or executable inside the cache (treat as read-only)
    key: str
    compiled: bool  # True when this call ran the compiler, False when served from the cache
    command: tuple[str, ...]
    warnings: str  # compiler stderr of the successful build, paths relative to the kata
    sanitize: tuple[str, ...] = ()
    kind: str = "shared"

    @property
    def library(self) -> Path:
        return self.path


_default_cache: ArtefactCache | None = None
_compiles = 0


def default_cache() -> ArtefactCache:
    """The process-wide cache; re-created when $KATA_BUILD_CACHE changes (tests set it)."""
    global _default_cache
    want = ArtefactCache()
    if _default_cache is None or _default_cache.root != want.root:
        _default_cache = want
    return _default_cache


def compile_count() -> int:
    """Compiler runs in this process, over every cache (for "a warm rerun compiled nothing")."""
    return _compiles


def _normalise_sanitize(sanitize: Iterable[str] | str | None) -> tuple[str, ...]:
    if not sanitize:
        return ()
    items = sanitize.split(",") if isinstance(sanitize, str) else list(sanitize)
    names = tuple(sorted({s.strip() for s in items if s.strip()}))
    unknown = set(names) - SANITIZERS
    if unknown:
        raise ValueError(f"unknown sanitizer(s) {sorted(unknown)}; known: {sorted(SANITIZERS)}")
    if "thread" in names and {"address", "leak"} & set(names):
        raise ValueError("sanitize=thread cannot be combined with address or leak (gcc refuses)")
    return names


def _discover_headers(sources: Sequence[Path], include_dirs: Sequence[Path]) -> list[Path]:
    # Headers beside the sources and in include dirs are part of the key even when the caller did
    # not list them: editing allocator.h must invalidate allocator.c's build.
    dirs = {s.parent for s in sources} | set(include_dirs)
    found: set[Path] = set()
    for d in dirs:
        if d.is_dir():
            found.update(p for p in d.iterdir() if p.suffix in HEADER_SUFFIXES and p.is_file())
    return sorted(found)


def _common_root(paths: Sequence[Path]) -> Path:
    return Path(os.path.commonpath([str(p.parent) for p in paths]))


def _build(
    sources: Sequence[Path | str],
    *,
    kind: str,
    headers: Iterable[Path | str],
    lang: Lang,
    flags: Sequence[str],
    link_flags: Sequence[str],
    sanitize: Iterable[str] | str | None,
    werror: bool,
    include_dirs: Iterable[Path | str],
    root: Path | str | None,
    compiler: str | None,
    cache: ArtefactCache | None,
) -> BuildResult:
    if lang not in ("c", "cpp"):
        raise ValueError(f"lang must be 'c' or 'cpp', not {lang!r}")
    srcs = [Path(s).resolve() for s in sources]
    if not srcs:
        raise ValueError("no sources to build")
    for s in srcs:
        if not s.is_file():
            raise FileNotFoundError(f"source file not found: {s}")
    incs = [Path(d).resolve() for d in include_dirs]
    san = _normalise_sanitize(sanitize)
    tool = compiler or ("cc" if lang == "c" else "cxx")
    cc = require_tool(tool)
    cwd = Path(root).resolve() if root is not None else _common_root(srcs)
    out_name = "lib.so" if kind == "shared" else "a.out"

    opt = _SANITIZE_OPT_FLAGS if san else _OPT_FLAGS
    cmd_flags: list[str] = [*opt, *_COMMON_FLAGS]
    if kind == "shared":
        cmd_flags += ["-shared", "-fPIC"]
    if san:
        cmd_flags.append("-fsanitize=" + ",".join(san))
        if "undefined" in san:
            cmd_flags.append("-fno-sanitize-recover=undefined")  # stop at the first UB
    if werror:
        cmd_flags.append("-Werror")
    for d in incs:
        cmd_flags += ["-I", str(d)]
    cmd_flags += list(flags)
    tail_flags = [*link_flags, "-lm"]
    rel_srcs = [os.path.relpath(s, cwd) for s in srcs]

    hdrs = sorted({Path(h).resolve() for h in headers} | set(_discover_headers(srcs, incs)))
    refused = includes.refusal([*srcs, *hdrs])
    if refused:  # a path out of the kata would compile the reference as the submission
        raise BuildError(refused, log=refused, command=())
    parts: list[bytes | str] = [FORMAT_VERSION, kind, lang, str(cc), tool_version_text(tool)]
    parts += ["flags", *cmd_flags, "tail", *tail_flags]
    for s, rel in zip(srcs, rel_srcs, strict=True):
        parts += ["src", rel, s.read_bytes()]
    for h in hdrs:
        parts += ["hdr", os.path.relpath(h, cwd), h.read_bytes()]
    store = cache if cache is not None else default_cache()
    key = hash_parts(parts)

    command: list[str] = []

    def produce(tmp: Path) -> None:
        global _compiles
        out = tmp / out_name
        command[:] = [str(cc), *cmd_flags, *rel_srcs, "-o", str(out), *tail_flags]
        env = {**os.environ, "LC_ALL": "C"}  # plain ASCII quotes in diagnostics
        _compiles += 1
        proc = subprocess.run(
            command,
            cwd=cwd,
            capture_output=True,
            text=True,
            env=env,
            timeout=_COMPILE_TIMEOUT_S,
            check=False,
        )
        log = relativise(proc.stdout + proc.stderr, cwd).replace(str(tmp) + "/", "")
        meta = {"ok": proc.returncode == 0, "returncode": proc.returncode, "cwd": str(cwd)}
        meta["command"] = [c.replace(str(tmp), "<out>") for c in command]
        (tmp / "build.log").write_text(log, encoding="utf-8")
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    label = f"{kind} {' '.join(rel_srcs)}"
    entry = store.get_or_create(key, produce, label=label)
    meta = json.loads((entry.path / "meta.json").read_text(encoding="utf-8"))
    log = (entry.path / "build.log").read_text(encoding="utf-8")
    recorded = tuple(meta["command"])
    if not meta["ok"]:
        message = trim_compiler_output(log) or f"compiler exited with {meta['returncode']}"
        raise BuildError(message, log=log, command=recorded)
    return BuildResult(
        path=entry.path / out_name,
        key=key,
        compiled=entry.created,
        command=recorded,
        warnings=log.strip(),
        sanitize=san,
        kind=kind,
    )


def build_shared_library(
    sources: Sequence[Path | str],
    *,
    headers: Iterable[Path | str] = (),
    lang: Lang = "c",
    flags: Sequence[str] = (),
    sanitize: Iterable[str] | str | None = (),
    werror: bool = False,
    include_dirs: Iterable[Path | str] = (),
    root: Path | str | None = None,
    compiler: str | None = None,
    cache: ArtefactCache | None = None,
) -> BuildResult:
    """Compile `sources` with gcc (lang="c") or g++ (lang="cpp") into a cached shared library.

    Base flags: `-O2 -g -Wall -shared -fPIC` (sanitized builds use `-O1 -fno-omit-frame-pointer`),
    linked with `-lm`. `root` is the directory diagnostics are shown relative to (default: the
    sources' common directory). `compiler` names another tool from harness.toolchain ("clang").
    Raises BuildError with trimmed diagnostics when compilation fails.
    """
    return _build(
        sources,
        kind="shared",
        headers=headers,
        lang=lang,
        flags=flags,
        link_flags=(),
        sanitize=sanitize,
        werror=werror,
        include_dirs=include_dirs,
        root=root,
        compiler=compiler,
        cache=cache,
    )


def build_executable(
    sources: Sequence[Path | str],
    *,
    headers: Iterable[Path | str] = (),
    lang: Lang = "c",
    flags: Sequence[str] = (),
    link_flags: Sequence[str] = (),
    sanitize: Iterable[str] | str | None = (),
    werror: bool = False,
    include_dirs: Iterable[Path | str] = (),
    root: Path | str | None = None,
    compiler: str | None = None,
    cache: ArtefactCache | None = None,
) -> BuildResult:
    """Like build_shared_library, but links a program (a C driver for callgrind or a crash test)."""
    return _build(
        sources,
        kind="executable",
        headers=headers,
        lang=lang,
        flags=flags,
        link_flags=link_flags,
        sanitize=sanitize,
        werror=werror,
        include_dirs=include_dirs,
        root=root,
        compiler=compiler,
        cache=cache,
    )
