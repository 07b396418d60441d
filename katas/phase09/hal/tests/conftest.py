"""Fixtures of the hal tests: your hal_core.c (libhal.so), your backends, and the given test
backends, built (cached) and run in child processes: a Python child through cffi (halpy.py), or
a C program. Each child gets its own KATA_HAL_PATH, so every test starts from a fresh HAL."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.native.build import build_executable, build_shared_library

DATA = Path(__file__).resolve().parent / "data"
FLAGS = ("-pthread", "-Wno-format-truncation")
NAMES: dict[str, int] = {}  # hal_status names -> values, filled by the `hal` fixture


class HalCrash(AssertionError):  # noqa: N818 - a crash, not an "Error"
    """A child process died of a signal inside the HAL (a crash of C code): the test fails with
    the sentence, and no gate trips (`kata_learner_crash`: an honest mistake, not a dodge)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.kata_learner_crash = message.splitlines()[0]
        self.stderr = ""


class Built:
    """Every library a test needs, built (on first use, cached) from the implementation under
    test and tests/data: a compile error in one file fails only the tests that need it."""

    def __init__(self, kata: Any) -> None:
        self.search_path = list(kata.search_path)
        self.kata_dir = Path(kata.source("hal.h")).parent
        self.sources = {n: Path(kata.source(n)) for n in ("hal_core.c", "hal_cpu.c", "hal_cuda.c")}
        self.broken = _Broken(self.search_path)

    @functools.cached_property
    def core(self) -> Path:
        """libhal.so: your hal_core.c."""
        return _lib([self.sources["hal_core.c"]], self.search_path)

    @functools.cached_property
    def cpu(self) -> Path:
        """libhal_cpu.so: your hal_cpu.c."""
        return _lib([self.sources["hal_cpu.c"]], self.search_path)

    @functools.cached_property
    def cuda(self) -> Path:
        """libhal_cuda.so: your hal_cuda.c, with kata_launch.h of the harness's cpu runtime."""
        from harness.cuda.cpu.loader import HERE

        return _lib([self.sources["hal_cuda.c"]], [*self.search_path, HERE])

    @functools.cached_property
    def probe(self) -> Path:
        return _lib([DATA / "probe_backend.c"], self.search_path)

    @functools.cached_property
    def kernels(self) -> Path:
        return _lib([DATA / "kernels_cpu.c"], self.search_path)

    @functools.cached_property
    def legacy(self) -> Path:
        return _lib([DATA / "legacy_backend.c"], [DATA])


class _Broken(dict):
    """built.broken["nosym" | "major" | "initfail" | "crash"]: tests/data/broken/<name>.c built."""

    def __init__(self, include: list[Path]) -> None:
        super().__init__()
        self.include = include

    def __missing__(self, name: str) -> Path:
        self[name] = _lib([DATA / "broken" / f"{name}.c"], self.include)
        return self[name]

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[name] if (DATA / "broken" / f"{name}.c").exists() else default


def _lib(sources: Iterable[Path], include: Iterable[Path], sanitize: str = "") -> Path:
    return build_shared_library(
        list(sources), flags=FLAGS, include_dirs=list(include), sanitize=sanitize or ()
    ).path


@pytest.fixture(scope="module")
def built(kata: Any) -> Built:
    """libhal.so (your hal_core.c), your backends, the test backends: built on first use."""
    return Built(kata)


@pytest.fixture(scope="module")
def names(kata: Any) -> dict[str, int]:
    """hal_status names -> values (from hal.h)."""
    halpy = kata.module("halpy")
    NAMES.update(halpy.status_names())
    return dict(NAMES)


def backend_dir(root: Path, backends: Mapping[str, tuple[Path, Mapping[str, Any] | None]]) -> Path:
    """A directory of backends: {"libhal_x.so": (library, probe config or None)}; each file is
    a copy (dlopen loads one file once: copies of the probe backend are separate backends)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, (lib, conf) in backends.items():
        shutil.copyfile(lib, root / name)
        if conf is not None:
            text = "".join(f"{k}={v}\n" for k, v in conf.items())
            (root / f"{name}.conf").write_text(text)
    return root


@pytest.fixture
def backends(tmp_path: Path) -> Any:
    """backends({"libhal_x.so": (library, probe config or None)}, sub="b") -> a directory."""
    return lambda spec, sub="b": backend_dir(tmp_path / sub, spec)


class HalRunner:
    """run(script, path) -> the script's `out` dict, from a fresh Python child with cffi."""

    def __init__(self, built: Built, tmp: Path) -> None:
        self.built = built
        self.tmp = tmp
        self.count = 0
        self.last_pid = 0  # the last child's pid (the test backends log it)

    def env(
        self, path: str | Iterable[Path], extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KATA_HAL")}
        env["KATA_HAL_PATH"] = path if isinstance(path, str) else ":".join(str(p) for p in path)
        env.update(extra or {})
        return env

    def __call__(
        self,
        script: str,
        path: str | Iterable[Path],
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        core: Path | None = None,
    ) -> dict[str, Any]:
        self.count += 1
        sp = self.tmp / f"script{self.count}.py"
        op = self.tmp / f"out{self.count}.json"
        sp.write_text(script)
        lib = core or self.built.core
        cmd = [
            sys.executable,
            str(DATA / "child.py"),
            str(self.built.kata_dir),
            str(lib),
            str(sp),
            str(op),
        ]
        with subprocess.Popen(
            cmd, env=self.env(path, env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as p:
            self.last_pid = p.pid
            try:
                stdout, stderr = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                stdout, stderr = p.communicate()
                raise AssertionError(
                    f"the HAL test program did not finish within {timeout} s:\n{stderr[-2000:]}"
                ) from None
        proc = subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr)
        return read_child(proc, op, "the HAL test program")


def read_child(proc: subprocess.CompletedProcess[str], out_path: Path, what: str) -> dict[str, Any]:
    """The child's `out`; KataTodo for a stub; HalCrash (a sentence) when it died of a signal."""
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        err = HalCrash(f"{what} died of {name} inside the HAL (a crash in the C code)\n{tail}")
        err.stderr = proc.stderr
        raise err
    if not out_path.exists():
        raise AssertionError(
            f"{what} exited with status {proc.returncode} and no result:\n{proc.stderr[-2000:]}"
        )
    out = json.loads(out_path.read_text())
    if "__todo__" in out:
        from harness import todo

        todo(f"{out['__todo__']} answered HAL_ERROR_TODO")
    if "__error__" in out:
        raise AssertionError(f"{what} raised:\n{out['__error__']}")
    return out


@pytest.fixture
def hal(built: Built, names: dict[str, int], tmp_path: Path) -> HalRunner:
    """hal(script, path) runs `script` in a fresh Python child with `hal` (halpy.Hal over your
    libhal.so) and `out` (a dict, returned as JSON); KATA_HAL_PATH=path."""
    return HalRunner(built, tmp_path)


def _unlimited_address_space() -> None:  # ASan maps terabytes of shadow memory
    import resource

    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


@pytest.fixture
def c_program(built: Built, tmp_path: Path) -> Any:
    """c_program(source, path, *args, sanitize="") -> CompletedProcess of a C program of
    tests/data linked with your hal_core.c."""

    def run(source: str, path: Iterable[Path], *args: str, sanitize: str = "",
            wrapper: Iterable[str] = (), timeout: float = 60.0) -> subprocess.CompletedProcess[str]:  # fmt: skip
        exe = build_executable(
            [DATA / source, built.sources["hal_core.c"]],
            flags=FLAGS, link_flags=("-pthread", "-ldl"), include_dirs=built.search_path,
            sanitize=sanitize or (),
        ).path  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KATA_HAL", "LD_PRELOAD"))}
        env["KATA_HAL_PATH"] = ":".join(str(p) for p in path)
        env["ASAN_OPTIONS"] = "detect_leaks=1:halt_on_error=1:exitcode=86"
        env["TSAN_OPTIONS"] = "halt_on_error=1:exitcode=66:report_signal_unsafe=0"
        return subprocess.run(
            [*wrapper, str(exe), *args], env=env, capture_output=True, text=True,
            timeout=timeout, check=False, preexec_fn=_unlimited_address_space if sanitize else None,
        )  # fmt: skip

    return run


@pytest.fixture(scope="module")
def cuda_vendor() -> dict[str, Path]:
    """The harness's cpu CUDA runtime library ("runtime": what KATA_CUDA_RUNTIME names) and
    tests/data/vector_add.cu built by its toolchain into a kernel library ("kernels")."""
    from harness.cuda.cpu.building import PLAIN, build_kernels
    from harness.cuda.cpu.loader import runtime

    source = (DATA / "vector_add.cu").read_text()
    lib = build_kernels(
        source, "vector_add.cu", ["vector_add", "saxpy", "read_past_end"], extern_c=True,
        options=(), include_dirs=(), compiler=PLAIN,
    )  # fmt: skip
    return {"runtime": runtime().path, "kernels": lib.path}


@pytest.fixture(scope="module")
def hal_data() -> Path:
    """tests/data: the given test backends, kernels and programs."""
    return DATA
