"""harness.native: cached gcc builds, cffi loading, trimmed errors, sanitizers, callgrind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import native
from harness.native import build as build_mod
from harness.native.cache import ArtefactCache
from harness.native.diagnostics import trim_compiler_output, trim_sanitizer_report
from harness.native.fixtures import NativeBuilder
from harness.toolchain import find_tool

pytestmark = pytest.mark.skipif(find_tool("cc") is None, reason="needs a C compiler (gcc)")

REPO = Path(__file__).resolve().parents[2]

VEC_H = """\
#ifndef VEC_H
#define VEC_H
#include <stddef.h>
#include <stdint.h>
#define VEC_MAX 64
#ifdef __cplusplus
extern "C" {
#endif
/* the sum of n values */
int64_t vec_sum(const int32_t *xs, size_t n);
typedef struct { int count; double mean; } stats_t;  // a struct by value
stats_t vec_stats(const int32_t *xs, size_t n);
static inline int twice(int x) { return 2 * x; }
int write_past_end(int n);
#ifdef __cplusplus
}
#endif
#endif
"""

VEC_C = """\
#include "vec.h"
#include <stdlib.h>
int64_t vec_sum(const int32_t *xs, size_t n) {
  int64_t s = 0;
  for (size_t i = 0; i < n; i++) s += xs[i];
  return s;
}
stats_t vec_stats(const int32_t *xs, size_t n) {
  stats_t st = { (int)n, n ? (double)vec_sum(xs, n) / n : 0.0 };
  return st;
}
int write_past_end(int n) {
  int *p = malloc(n * sizeof *p);
  p[n] = twice(n);  /* one past the end */
  int r = p[0];
  free(p);
  return r;
}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("KATA_BUILD_CACHE", str(d))
    return d


@pytest.fixture
def kata_dir(tmp_path) -> Path:
    d = tmp_path / "kata"
    d.mkdir()
    (d / "vec.h").write_text(VEC_H)
    (d / "vec.c").write_text(VEC_C)
    return d


def _log_lines(cache_dir: Path) -> list[str]:
    return ArtefactCache(cache_dir).logged_builds()


# --------------------------------------------------------------------------- cache behaviour
def test_cold_build_compiles_once_and_warm_rebuild_compiles_nothing(cache_dir, kata_dir):
    before = native.compile_count()
    cold = native.build_shared_library([kata_dir / "vec.c"])
    assert cold.compiled and cold.path.is_file()
    assert native.compile_count() == before + 1
    assert len(_log_lines(cache_dir)) == 1

    warm = native.build_shared_library([kata_dir / "vec.c"])
    assert not warm.compiled
    assert warm.path == cold.path and warm.key == cold.key
    assert native.compile_count() == before + 1  # in-process counter unchanged
    assert len(_log_lines(cache_dir)) == 1  # and no process compiled anything


def test_key_covers_headers_flags_and_sanitizers(cache_dir, kata_dir):
    base = native.build_shared_library([kata_dir / "vec.c"])
    flagged = native.build_shared_library([kata_dir / "vec.c"], flags=["-DEXTRA=1"])
    assert flagged.key != base.key and flagged.compiled
    # vec.h was never named, but it sits beside vec.c, so editing it must rebuild.
    (kata_dir / "vec.h").write_text(VEC_H.replace("VEC_MAX 64", "VEC_MAX 65"))
    edited = native.build_shared_library([kata_dir / "vec.c"])
    assert edited.key != base.key and edited.compiled
    assert len(_log_lines(cache_dir)) == 3


def test_cache_dir_defaults_to_the_repo(monkeypatch, tmp_path):
    monkeypatch.delenv("KATA_BUILD_CACHE", raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    from harness.native.cache import cache_root

    assert cache_root() == tmp_path / ".kata" / "build-cache"


_CONCURRENT = """
import json, sys
from harness.native import build_shared_library
r = build_shared_library([sys.argv[1]])
print(json.dumps({"compiled": r.compiled, "path": str(r.path)}))
"""


def test_two_processes_building_the_same_key_compile_once(cache_dir, kata_dir, tmp_path):
    # A compiler that takes half a second guarantees the two builds overlap.
    slow_cc = tmp_path / "slow-cc"
    slow_cc.write_text(f'#!/bin/sh\nsleep 0.5\nexec {find_tool("cc")} "$@"\n')
    slow_cc.chmod(0o755)
    env = {
        **os.environ,
        "KATA_BUILD_CACHE": str(cache_dir),
        "KATA_TOOL_CC": str(slow_cc),
        "PYTHONPATH": str(REPO),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CONCURRENT, str(kata_dir / "vec.c")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["compiled"] for r in results) == [False, True]
    assert results[0]["path"] == results[1]["path"]
    assert len(_log_lines(cache_dir)) == 1
    assert not any((cache_dir / "tmp").iterdir())  # no half-built entries left behind


# --------------------------------------------------------------------------- errors
def test_compile_errors_are_trimmed_learner_feedback(cache_dir, tmp_path):
    kata = tmp_path / "alloc-kata"
    kata.mkdir()
    body = "\n".join(f"int f{i}(void) {{ return undefined_{i}; }}" for i in range(40))
    (kata / "broken.c").write_text("#include <stddef.h>\n" + body + "\n")
    with pytest.raises(native.BuildError) as info:
        native.build_shared_library([kata / "broken.c"])
    message = str(info.value)
    lines = message.splitlines()
    assert len(lines) <= 26
    assert lines[0].startswith("broken.c: In function")
    assert "broken.c:2:" in message and "undefined_0" in message
    assert any(line.strip().startswith("|") and "^" in line for line in lines)  # the caret
    assert lines[-1].startswith("... ") and lines[-1].endswith("more errors")
    assert str(tmp_path) not in message  # paths relative to the kata
    assert "undefined_39" in info.value.log  # the full log is kept

    # The failure is cached: the next test using the same broken file costs no compile.
    before = native.compile_count()
    with pytest.raises(native.BuildError):
        native.build_shared_library([kata / "broken.c"])
    assert native.compile_count() == before


def test_werror_turns_warnings_into_errors(cache_dir, tmp_path):
    (tmp_path / "w.c").write_text("int f(void) { int unused; return 1; }\n")
    ok = native.build_shared_library([tmp_path / "w.c"])
    assert "unused variable" in ok.warnings
    with pytest.raises(native.BuildError, match="unused variable"):
        native.build_shared_library([tmp_path / "w.c"], werror=True)


def test_trimming_nvcc_and_linker_output():
    nvcc = textwrap.dedent("""\
        kernel.cu(2): error: identifier "x" is undefined
            a[0] = x;
                   ^

        kernel.cu(3): error: expected an expression
            int y = ;
                    ^

        2 errors detected in the compilation of "kernel.cu".
    """)
    trimmed = trim_compiler_output(nvcc, max_errors=1)
    assert trimmed.splitlines()[0] == 'kernel.cu(2): error: identifier "x" is undefined'
    assert trimmed.endswith("... 1 more error")
    ld = (
        "/usr/bin/ld: /tmp/ccAbC123.o: in function `f':\n"
        "b.c:(.text+0x5): undefined reference to `g'\n"
        "collect2: error: ld returned 1 exit status\n"
    )
    assert trim_compiler_output(ld) == "b.c:(.text+0x5): undefined reference to `g'"


# --------------------------------------------------------------------------- loading
def test_load_from_header(cache_dir, kata_dir):
    result = native.build_shared_library([kata_dir / "vec.c"])
    lib = native.load(None, result, header=kata_dir / "vec.h")
    xs = lib.ffi.new("int32_t[]", [3, 4, 5])
    assert lib.vec_sum(xs, 3) == 12
    stats = lib.vec_stats(xs, 3)
    assert (stats.count, stats.mean) == (3, 4.0)
    assert lib.VEC_MAX == 64
    with pytest.raises(AttributeError, match="no symbol 'nope'"):
        _ = lib.nope


def test_declarations_from_header_keeps_only_c_declarations(tmp_path):
    (tmp_path / "vec.h").write_text(VEC_H)
    decls = native.declarations_from_header(tmp_path / "vec.h")
    assert "extern" not in decls and "#include" not in decls and "twice" not in decls
    assert "#define VEC_MAX 64" in decls
    assert "int64_t vec_sum(const int32_t *xs, size_t n);" in decls
    assert "typedef struct { int count; double mean; } stats_t;" in decls


def test_load_with_explicit_declarations_and_cpp(cache_dir, tmp_path):
    (tmp_path / "acc.cpp").write_text(
        '#include <vector>\n#include <numeric>\nextern "C" long total(int n) {\n'
        "  std::vector<long> v(n);\n  std::iota(v.begin(), v.end(), 1L);\n"
        "  return std::accumulate(v.begin(), v.end(), 0L);\n}\n"
    )
    result = native.build_shared_library([tmp_path / "acc.cpp"], lang="cpp")
    assert "c++" in Path(result.command[0]).name or "g++" in result.command[0]
    lib = native.load("long total(int n);", result)
    assert lib.total(100) == 5050


def test_a_loaded_function_passes_as_a_callback(cache_dir, tmp_path):
    # Loaded functions are wrapped (harness.hangs); passed to C they must still be C functions.
    (tmp_path / "cb.c").write_text(
        "int twice(int x) { return 2 * x; }\nint apply(int (*f)(int), int x) { return f(x) + 1; }\n"
    )
    result = native.build_shared_library([tmp_path / "cb.c"])
    lib = native.load("int twice(int x);\nint apply(int (*f)(int), int x);", result)
    assert lib.twice(3) == 6
    assert lib.apply(lib.twice, 3) == 7


# --------------------------------------------------------------------------- isolation
def _call_write_past_end(result, header):
    lib = native.load(None, result, header=header)
    return lib.write_past_end(4)


def _sum_in_child(result, header, values):
    lib = native.load(None, result, header=header)
    return lib.vec_sum(lib.ffi.new("int32_t[]", values), len(values))


def _segfault():
    import ctypes

    ctypes.string_at(0)


def _raise_value_error():
    raise ValueError("wrong answer")


def test_run_isolated_returns_results_and_reraises(cache_dir, kata_dir):
    result = native.build_shared_library([kata_dir / "vec.c"])
    assert native.run_isolated(_sum_in_child, result, kata_dir / "vec.h", [1, 2, 3]) == 6
    with pytest.raises(ValueError, match="wrong answer") as info:
        native.run_isolated(_raise_value_error)
    assert "isolated child" in info.value.__notes__[0]


def test_a_segfault_fails_the_call_not_the_process():
    with pytest.raises(native.NativeCrash) as info:
        native.run_isolated(_segfault)
    assert info.value.signal == "SIGSEGV"
    assert "crashed (SIGSEGV)" in str(info.value)


def test_address_sanitizer_catches_a_heap_overflow(cache_dir, kata_dir):
    result = native.build_shared_library([kata_dir / "vec.c"], sanitize=("address", "undefined"))
    assert result.sanitize == ("address", "undefined")
    assert "-fsanitize=address,undefined" in result.command
    with pytest.raises(native.NativeCrash) as info:
        native.run_isolated(
            _call_write_past_end, result, kata_dir / "vec.h", sanitize=result.sanitize,
            root=kata_dir,
        )  # fmt: skip
    message = str(info.value)
    assert "heap-buffer-overflow" in message
    assert "in write_past_end vec.c:" in message  # the learner's line, relative to the kata
    assert "_PyEval" not in message  # interpreter frames trimmed away
    assert len(message.splitlines()) <= 26


def test_sanitizer_report_trimming_falls_back_to_the_tail():
    assert trim_sanitizer_report("a\nb\n") == "a\nb"


# --------------------------------------------------------------------------- callgrind
DRIVER_C = """\
#include <stdlib.h>
__attribute__((noinline)) long kata_run(long n) {
  volatile long s = 0;
  for (long i = 0; i < n; i++) s += i;
  return s;
}
int main(int argc, char **argv) { return kata_run(atol(argv[1])) < 0; }
"""


@pytest.mark.skipif(find_tool("valgrind") is None, reason="needs valgrind")
def test_callgrind_counts_are_deterministic_and_scale(cache_dir, tmp_path):
    (tmp_path / "driver.c").write_text(DRIVER_C)
    exe = native.build_executable([tmp_path / "driver.c"])
    assert exe.kind == "executable" and os.access(exe.path, os.X_OK)
    small = native.instruction_count(exe, "1000", function="kata_run")
    again = native.instruction_count(exe, "1000", function="kata_run")
    large = native.instruction_count(exe, "11000", function="kata_run")
    whole = native.instruction_count(exe, "1000")
    assert small == again  # repeatable to the instruction
    per_iteration = (large - small) / 10000
    assert 3 <= per_iteration <= 12
    assert whole > small  # start-up and libc count when not toggled


# --------------------------------------------------------------------------- the fixture
def test_native_builder_resolves_through_the_kata(cache_dir, tmp_path):
    kata = tmp_path / "katas" / "vec"
    solution = tmp_path / "solutions" / "vec"
    kata.mkdir(parents=True)
    solution.mkdir(parents=True)
    (kata / "vec.h").write_text(VEC_H)
    (kata / "vec.c").write_text('#include "vec.h"\n')  # the learner's empty stub
    (solution / "vec.c").write_text(VEC_C)  # the reference includes the kata's header

    def source(name: str) -> Path:  # what KataContext.source does for impl=solution
        for d in (solution, kata):
            if (d / name).exists():
                return d / name
        raise FileNotFoundError(name)

    builder = NativeBuilder(source, [solution, kata])
    lib = builder("vec.c", header="vec.h")
    assert lib.vec_sum(lib.ffi.new("int32_t[]", [5, 5]), 2) == 10
    assert builder.build("vec.c").path == builder.build("vec.c").path


NATIVE_KATA_TEST = """
import pytest

def test_sum(native):
    lib = native("vec.c", header="vec.h")
    assert lib.vec_sum(lib.ffi.new("int32_t[]", [1, 2]), 2) == 3

def test_broken(native):
    native("broken.c")

def _overflow(result, header):
    from harness.native import load
    return load(None, result, header=header).write_past_end(2)

def test_asan_needs_run(native):
    with pytest.raises(pytest.fail.Exception, match="native.run"):
        native("vec.c", header="vec.h", sanitize="address")

def test_asan_in_child(native):
    from harness.native import NativeCrash
    result = native.build("vec.c", sanitize="address")
    with pytest.raises(NativeCrash, match="heap-buffer-overflow"):
        native.run(_overflow, result, native.path("vec.h"))
"""


def test_native_fixture_in_a_pytest_run(pytester, cache_dir):
    kata = pytester.path / "vec"
    (kata / "tests").mkdir(parents=True)
    (kata / "vec.h").write_text(VEC_H)
    (kata / "vec.c").write_text(VEC_C)
    (kata / "broken.c").write_text("int f(void) { return 1 }\n")
    (kata / "tests" / "test_vec.py").write_text(NATIVE_KATA_TEST)
    res = pytester.runpytest_subprocess(
        "-p", "no:gpu_katas", "-p", "harness.native.fixtures", "--import-mode=importlib",
        "-p", "no:cacheprovider", str(kata / "tests"),
    )  # fmt: skip
    res.assert_outcomes(passed=3, failed=1)
    out = res.stdout.str()
    assert "compilation failed:" in out and "broken.c:1:" in out
    assert "expected ';'" in out
    assert "Traceback" not in out  # a compile error is feedback, not a harness crash


def test_build_module_counts_across_caches(tmp_path, kata_dir):
    before = build_mod.compile_count()
    native.build_shared_library([kata_dir / "vec.c"], cache=ArtefactCache(tmp_path / "a"))
    native.build_shared_library([kata_dir / "vec.c"], cache=ArtefactCache(tmp_path / "b"))
    assert build_mod.compile_count() == before + 2


C_MANIFEST = """\
id = "vec"
title = "Vector sums in C"
phase = 1
summary = "sums"
languages = ["c"]
files = ["vec.c"]
time_limit = 30

[[tasks]]
id = "sum"
title = "Sum"
points = 10
tests = ["test_sum*"]
"""

C_KATA_TEST = """
def test_sum(native):
    lib = native("vec.c", header="vec.h")
    assert lib.vec_sum(lib.ffi.new("int32_t[]", [1, 2, 3]), 3) == 6
"""


def test_native_fixture_with_the_kata_plugin(repo, cache_dir):
    """Through the real plugin: `native` resolves files with the `kata` fixture, so
    --kata-impl=solution builds the reference (which includes the kata's header)."""
    kata = "katas/phase01/vec"
    repo.write(f"{kata}/kata.toml", C_MANIFEST)
    repo.write(f"{kata}/vec.h", VEC_H)
    repo.write(f"{kata}/vec.c", '#include "vec.h"\nint64_t vec_sum(const int32_t *xs, size_t n)'
               " { (void)xs; (void)n; return 0; }\n")  # fmt: skip
    repo.write(f"{kata}/tests/test_vec.py", C_KATA_TEST)
    repo.write("solutions/phase01/vec/vec.c", VEC_C)
    learner = repo.pytester.runpytest_subprocess("katas")
    learner.assert_outcomes(failed=1)
    solution = repo.pytester.runpytest_subprocess("katas", "--kata-impl=solution")
    solution.assert_outcomes(passed=1)


def test_thread_sanitizer_is_known_and_not_mixed_with_address() -> None:
    assert build_mod._normalise_sanitize("thread") == ("thread",)
    with pytest.raises(ValueError, match="thread"):
        build_mod._normalise_sanitize("thread,address")
