"""Kernel libraries of the cpu backend: the learner's CUDA C compiled as C++ against kata_cuda.h.

Builds go through harness.native's content-addressed cache (a warm rerun compiles nothing; see
`harness.native.compile_count`). A plain build ("cxx") runs launches; a traced build (TRACED)
calls the runtime at every memory access, for traces and the "preempt" schedule.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import atomic
from harness.cuda import source as src
from harness.cuda.cpu.loader import CXX_FLAGS, INCLUDE, runtime
from harness.cuda.errors import CudaCompileError, CudaError
from harness.native.build import BuildError, build_shared_library, default_cache

__all__ = ["PLAIN", "TRACED", "Built", "build_kernels", "traced_toolchain"]

PLAIN = "cxx"  # the compiler key of plain builds

# Traced builds call the runtime before every load and store (tracing, the "preempt" schedule).
# GCC: ThreadSanitizer's instrumentation (__tsan_read4 ...), passed with -Wp so that it reaches
# the compiler proper but the driver does not link libtsan: runtime.cpp defines the callbacks.
# clang (where g++ is missing): sanitizer coverage's trace-loads/trace-stores.
_TRACE_FLAGS_GCC = (
    "-O1",  # keep one load/store per source access: easier to read per line
    "-fno-tree-vectorize",
    "-Wp,-fsanitize=thread",
    "-Wp,--param=tsan-instrument-func-entry-exit=0",
    "-DKATA_TRACE_BUILD=1",
)
_TRACE_FLAGS_CLANG = (
    "-O1",
    "-fno-vectorize",
    "-fno-slp-vectorize",
    "-fsanitize-coverage=edge,trace-loads,trace-stores",
    "-DKATA_TRACE_BUILD=1",
)
TRACED = "traced"  # the compiler key of traced builds (see traced_toolchain)


@dataclass(frozen=True)
class Built:
    """A kernel library: its path and its dlopen handle (through the runtime)."""

    path: Path
    handle: Any


def build_kernels(
    source: str,
    name: str,
    kernels: Sequence[str],
    *,
    extern_c: bool,
    options: Sequence[str],
    include_dirs: Sequence[Path],
    compiler: str,
) -> Built:
    """Build and load the kernels of `source` (file `name`) with `compiler` (PLAIN or TRACED)."""
    glue = _glue(source, name, kernels, extern_c)
    path = _write_generated(glue, Path(name).stem or "kernel")
    flags = [*CXX_FLAGS, *_split_options(options)]
    tool = compiler
    if compiler == TRACED:
        found = traced_toolchain()
        if found is None:
            raise CudaError(
                f"{name}: tracing and the preempt schedule need g++ or clang "
                "(apt-get install -y g++)"
            )
        tool, trace_flags = found
        flags += trace_flags
    headers = [
        p
        for d in include_dirs
        if d.is_dir()
        for p in sorted(d.iterdir())
        if p.suffix in (".cuh", ".h", ".hpp", ".inc")
    ]
    traced = traced_toolchain()
    if traced is not None:  # plain builds too: a source refused for traces is refused outright
        base = [*CXX_FLAGS, *_split_options(options), *traced[1]]
        incs = [f"-I{d}" for d in (INCLUDE, *include_dirs)]
        check_traceable(path, name, traced[0], (*base, *incs), headers)
    try:
        built = build_shared_library(
            [path],
            lang="cpp",
            flags=flags,
            include_dirs=[INCLUDE, *include_dirs],
            headers=headers,
            compiler=tool,
        )
    except BuildError as e:
        raise CudaCompileError(
            f"{name} does not compile (cpu backend, {tool}):\n{e}",
            log=e.log,
            command=e.command,
        ) from None
    check_imports(built.path, name)
    rt = runtime()
    err = rt.ffi.new("char[1024]")
    handle = rt.lib.kata_open(str(built.path).encode(), err, 1024)
    if handle == rt.ffi.NULL:
        raise CudaError(f"{name}: cannot load the built kernels: {rt.ffi.string(err)}")
    return Built(built.path, handle)


# What a traced build cannot see: code the compiler leaves uninstrumented (sanitizer opt-outs,
# inline assembly), library copies (a call to libc's memcpy is not instrumented), and calls
# into the trace callbacks themselves (made-up accesses). Looked for in the preprocessed text of
# the learner's lines, so that a macro cannot assemble them.
_UNTRACEABLE = re.compile(
    r"\b(?:no_sanitize\w*|disable_sanitizer_instrumentation|asm|__asm__|__asm|optimize|"
    r"__tsan_\w+|__sanitizer_\w+|kata_trace\w*|__builtin_mem\w+|mem(?:cpy|move|cmp|chr|set)|"
    r"bcopy|bcmp|str\w*cpy|strlen|std\s*::\s*(?:copy\w*|memcpy|memmove|bit_cast))\b"
)
_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:\\.|[^"\\])*)"(.*)$')


def check_traceable(
    path: Path, name: str, tool: str, flags: Sequence[str], headers: Sequence[Path] = ()
) -> None:
    """Refuse (CudaCompileError) a source that hides memory accesses from traced builds.

    Traces count every load and store the kernel makes and the preempt schedule switches
    threads at them; code the instrumentation skips would make a kernel look as if it did not
    read what it reads. Only the learner's lines are looked at (the header's atomics are
    uninstrumented on purpose and report themselves)."""
    h = hashlib.sha256("\0".join((tool, *flags)).encode())
    for p in headers:
        h.update(p.read_bytes())
    key = h.hexdigest()[:16]
    ok = path.parent / f"traceable-{key}"  # next to the content-addressed source: checked once
    if ok.exists():
        return
    found = _untraceable(str(path), tool, tuple(flags))
    if found:
        file, line, word = found
        raise CudaCompileError(
            f"{name}: `{word}` at {Path(file).name}:{line} hides memory accesses from the cpu "
            "backend's traced builds (memory traces, the preempt schedule), which instrument every "
            "load and store of a kernel; write the accesses as plain C++ (loads, stores, atomicAdd)",
            log="",
            command=[],
        )
    atomic.write_text(ok, "")


@functools.lru_cache(maxsize=256)
def _untraceable(path: str, tool: str, flags: tuple[str, ...]) -> tuple[str, int, str] | None:
    import subprocess

    cmd = [tool, "-E", *flags, path]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    if out.returncode != 0:
        return None  # the build itself reports what does not compile
    include = str(INCLUDE)
    file, line, mine = "", 0, False
    for text in out.stdout.splitlines():
        m = _MARKER.match(text)
        if m:
            line, file = int(m.group(1)), m.group(2)
            # Flag 3: a system header. The harness's headers are trusted; the glue file too.
            mine = not (
                " 3" in m.group(3)
                or file.startswith(("<", include))
                or file in (path, "harness-cuda-launch-glue")
            )
            continue
        if mine:
            hit = _UNTRACEABLE.search(text)
            if hit:
                return file, line, hit.group(0)
        line += 1
    return None


# What a kernel library may import: the runtime (kata_*, the thread indices, the trace
# callbacks), libm, printf, the compiler's own helpers and the memset/memcpy it emits for
# local copies (a learner's own memcpy is refused in the source above). Anything else is
# library code that reads or writes memory where traces cannot see it (read, write, dlsym, ...).
_MATH = re.compile(
    r"(?:a?sinh?|a?cosh?|a?tanh?|atan2|sincos|exp(?:2|10|m1)?|log(?:2|10|1p|b)?|r?sqrt|cbrt|pow|"
    r"fabs|fmod|remainder|remquo|floor|ceil|trunc|l?l?round|l?l?rint|nearbyint|fmin|fmax|fdim|"
    r"fma|hypot|erfc?|erfc?inv|[lt]gamma|ldexp|frexp|modf|copysign|nextafter|scalbl?n|ilogb|nan|"
    r"[jy][01n])[fl]?(?:_finite)?"
)
_HELPER = re.compile(r"__\w+(?:[a-z][id]i[23]|[sdthx]f[23])|_ZSt\d+__throw_\w+")
_IMPORTS_OK = frozenset(
    "__gmon_start__ _ITM_registerTMCloneTable _ITM_deregisterTMCloneTable __cxa_finalize "
    "__cxa_atexit __cxa_guard_acquire __cxa_guard_release __cxa_guard_abort __cxa_pure_virtual "
    "__stack_chk_fail __assert_fail abort threadIdx blockIdx blockDim gridDim printf puts "
    "putchar fflush stdout memset memcpy memmove __dso_handle __tls_get_addr __errno_location "
    "_GLOBAL_OFFSET_TABLE_".split()
)


def check_imports(lib: Path, name: str) -> None:
    """Refuse (CudaCompileError) a kernel library that calls library code outside the list above."""
    others = _foreign_imports(str(lib))
    if others:
        shown = ", ".join(f"`{s}`" for s in others[:5])
        raise CudaCompileError(
            f"{name}: the kernels call {shown}: library code outside {name} that the cpu "
            "backend's traced builds (memory traces, the preempt schedule) cannot see into; "
            "write the accesses as plain C++ (loads, stores, atomicAdd)",
            log="",
            command=[],
        )


@functools.lru_cache(maxsize=512)
def _foreign_imports(lib: str) -> list[str]:
    import subprocess

    from harness.toolchain import find_tool

    nm = find_tool("nm")
    if nm is None:
        return []  # no binutils: the source check above still holds
    out = subprocess.run(
        [str(nm), "-D", "--undefined-only", lib],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    ).stdout
    found = []
    for line in out.splitlines():
        sym = line.split()[-1].split("@")[0] if line.strip() else ""
        if (
            not sym
            or sym in _IMPORTS_OK
            or sym.startswith(("__tsan_", "__sanitizer_cov_", "kata_"))
        ):
            continue
        if not (_MATH.fullmatch(sym) or _HELPER.fullmatch(sym)):
            found.append(sym)
    return found


def _split_options(options: Iterable[str]) -> list[str]:
    # -D/-I/-U mean the same to g++; nvcc-only options (-arch, --use_fast_math) are ignored here.
    opts = list(options)
    out: list[str] = []
    i = 0
    while i < len(opts):
        o = opts[i]
        if o in ("-D", "-I", "-U") and i + 1 < len(opts):
            out += [o, opts[i + 1]]
            i += 2
            continue
        if o.startswith(("-D", "-I", "-U")):
            out.append(o)
        i += 1
    return out


def _glue(source: str, name: str, kernels: Sequence[str], extern_c: bool) -> str:
    """The C++ translation unit: header, the learner's file (line numbers kept), trampolines."""
    body = src.rewrite_for_cpu(source)
    lines = ['#include "kata_cuda.h"']
    if extern_c:
        lines.append('extern "C" {')
    lines.append(f'#line 1 "{name}"')
    lines.append(body)
    if extern_c:
        lines.append("}")
    lines.append('#line 1 "harness-cuda-launch-glue"')
    for k in kernels:
        lines.append(
            f'extern "C" int kata_describe__{k}(int* s, int* k, int cap) '
            f"{{ return kata::describe(&{k}, s, k, cap); }}"
        )
        lines.append(f'extern "C" void kata_invoke__{k}(void** a) {{ kata::invoke(&{k}, a); }}')
        # Not in traced builds: their per-thread bookkeeping (trace ids, preemption) needs the
        # runtime's own thread loop.
        lines.append("#ifndef KATA_TRACE_BUILD")
        lines.append(
            f'extern "C" void kata_threads__{k}(void** a, const unsigned* o, unsigned n) '
            f"{{ kata::run_threads(&{k}, a, o, n); }}"
        )
        lines.append("#endif")
    return "\n".join(lines) + "\n"


def _write_generated(text: str, stem: str) -> Path:
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    d = default_cache().root / "cuda-src" / digest
    path = d / f"{stem}.cpp"
    if not path.exists():
        atomic.write_text(path, text)  # xdist workers may write the same file
    return path


@functools.cache
def traced_toolchain() -> tuple[str, tuple[str, ...]] | None:
    """(tool, flags) of traced builds: GCC where it is (the same instrumentation on every such
    machine, so traces and preempt schedules agree), else clang; None without either."""
    import subprocess

    from harness.toolchain import find_tool

    gxx = find_tool("g++")
    if gxx is not None:
        out = subprocess.run([str(gxx), "--version"], capture_output=True, text=True, check=False)
        if "clang" not in out.stdout.lower():
            return "g++", _TRACE_FLAGS_GCC
    if find_tool("clang") is not None:
        return "clang", _TRACE_FLAGS_CLANG
    return None
