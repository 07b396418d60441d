"""Helpers for kata tests (public and hidden): the things every kata's tests would otherwise copy.

Tests import from here freely; learner modules must not (it is grader-side code).

    from harness.testing import check_written, fresh_module, hidden_settings, watch_calls, wrote_nothing

    @hidden_settings()
    @given(n=st.integers(1, 3000))
    def test_plan_any_size(schedule, n): ...

    def test_blocks_on_fresh_sizes(kata, kata_rng):       # fixtures of harness.plugin
        for n in kata_rng.integers(1, 1 << 20, size=20): ...

    if wrote_nothing(C):
        raise KataTodo("matmul_tiled wrote nothing yet")

    check_written(C, "matmul_tiled")  # the same, in one line

Fresh inputs, reproducibly: every run has a seed (``--kata-seed=N`` / ``$KATA_SEED``, else a
fresh one; printed in the summary, the reports and a hidden test's failure). Hypothesis tests
under :func:`hidden_settings` draw from it (a seed per test, from the run seed and the test's
name); the ``kata_rng`` (numpy ``Generator``), ``kata_random`` (``random.Random``) and
``kata_seed`` (int) fixtures give a test its own stream; :func:`rng` / :func:`random_for` do
the same where no fixture reaches (module level: a key of your choosing; in a test: the
running test's key).
"""

from __future__ import annotations

import contextlib
import linecache
import os
import random
import sys
from collections.abc import Iterator
from typing import Any

from .seeds import derive, run_seed
from .seeds import random_for as _random_for
from .seeds import rng as _rng


def hidden_settings(max_examples: int = 60, **overrides: Any) -> Any:
    """Hypothesis settings for hidden tests: examples drawn from the run seed (fresh each run,
    reproduced by ``--kata-seed``: the harness gives each test ``hypothesis.seed`` of its own,
    and ``--hypothesis-seed`` the run seed for the rest, state machines included), no example
    database (nothing written into a learner's tree), no shrinking (a wrong answer fails fast
    and the message is the first counterexample), no deadline and no too-slow or data-too-large
    health checks (machines and submissions differ; a grade must not fail on them), and
    function-scoped fixtures allowed (the `kata` fixtures are module-scoped anyway). Every hidden
    test uses this (kata verify checks it): `overrides` for what a kata needs else."""
    from hypothesis import HealthCheck, Phase, settings

    base: dict[str, Any] = dict(
        max_examples=max_examples,
        deadline=None,
        derandomize=False,  # the seed comes from the run seed (harness.plugin), not the source
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )
    base.update(overrides)
    return settings(**base)


def rng(key: str | None = None) -> Any:
    """A ``numpy.random.Generator`` from the run seed and `key` (default: the running test's
    name), e.g. ``rng("shapes")`` for module-level cases that change from run to run."""
    return _rng(key)


def random_for(key: str | None = None) -> random.Random:
    """A ``random.Random`` from the run seed and `key` (default: the running test's name)."""
    return _random_for(key)


def seeded(key: str) -> int:
    """A 64-bit seed from the run seed and `key`."""
    return derive(key)


def raises(expected: Any, sentence: str, match: str | None = None) -> Any:
    """``pytest.raises`` for hidden tests, whose failure teaches: a context manager that fails
    with ``AssertionError("<sentence>: it raised nothing (expected <Error>)")`` when the block
    raises nothing, or an `expected` error whose text does not contain `match` (a regular
    expression). Another exception passes through (the learner's code raised it)::

        with raises(ValueError, "vector_add(n=-1) must refuse a negative size", match="-1"):
            launch.vector_add(-1)
    """
    import contextlib
    import re

    names = " or ".join(
        e.__name__ for e in (expected if isinstance(expected, tuple) else (expected,))
    )

    @contextlib.contextmanager
    def checking() -> Any:
        try:
            yield
        except expected as e:
            if match is not None and not re.search(match, str(e)):
                raise AssertionError(
                    f"{sentence}: it raised {type(e).__name__}({str(e)!r}), which does not "
                    f"say {match!r}"
                ) from None
            return
        raise AssertionError(f"{sentence}: it raised nothing (expected {names})")

    return checking()


def wrote_nothing(out: Any, sentinel: float | None = None) -> bool:
    """True when a kernel left its output exactly as the test filled it: all NaN (the default
    fill) or all `sentinel`. A stub kernel with an empty body is then *not started*, not failing."""
    import numpy as np

    arr = np.asarray(out)
    if sentinel is None:
        return bool(arr.size) and bool(np.all(np.isnan(arr)))
    return bool(np.all(arr == sentinel))


def check_written(out: Any, what: str, sentinel: float | None = None) -> None:
    """Raise ``KataTodo("<what> wrote nothing yet")`` when :func:`wrote_nothing` (`out`,
    `sentinel`): the one not-started check for kernels, so a stub shows as *not started*."""
    if wrote_nothing(out, sentinel):
        from harness import KataTodo

        raise KataTodo(f"{what} wrote nothing yet")


# C functions through which Python starts another program (subprocess, os.system, spawn, exec)
_PROCESS_STARTERS = {
    ("_posixsubprocess", "fork_exec"),
    *(("posix", f) for f in ("system", "posix_spawn", "posix_spawnp", "fork", "execv", "execve")),
    *(("nt", f) for f in ("system", "spawnv", "spawnve", "startfile")),
}


class CallLog:
    """What the code run under :func:`watch_calls` called that a solution must not."""

    def __init__(self, targets: tuple[str, ...]) -> None:
        self.targets = targets
        self.calls: list[str] = []  # "module.function" of each forbidden call, first one first

    def __bool__(self) -> bool:
        return bool(self.calls)

    def __str__(self) -> str:
        return ", ".join(dict.fromkeys(self.calls)) or "nothing forbidden"


def watch_calls(*targets: Any, processes: bool = True, allow: tuple[Any, ...] = ()) -> Any:
    """Context manager recording calls into `targets` (modules, or module name prefixes such
    as "harness.cuda.static") and, with `processes`, the start of any other program. A gate uses
    it to catch a submission that calls a given simulator or the grader's oracle (or runs
    ptxas) instead of computing the answer itself::

        with watch_calls(timeline) as log:
            schedule.pipelined_time(1.0, 2.0, 3.0, 4)
        assert not log, f"pipelined_time called {log}: derive the formula"

    A call is recorded by the code it runs (its file or its module's name; a prefix's files
    too, so its code run as a module of another name counts), however the callee was reached: an import, ``sys.modules[...]``, an attribute walk or a reference held from
    earlier are the same call. It is seen in every thread: this one, and threads started while
    the watch is on (``threading.Thread``, an executor's workers; on Python 3.12+ threads
    already running too). `allow` names modules (or name prefixes) whose own calls into the
    targets are fine, e.g. a given toolchain wrapper built on the oracle's package: a call is
    then recorded only when its caller is neither a target nor allowed (nested calls inside
    the targets are the target's business). With `processes`, a child process reaped or still
    alive at the end that was not there at the start is recorded too, however it was started
    (ctypes' or cffi's system(), fork())."""
    import contextlib
    import sys
    import threading
    import types

    files = {t.__file__ for t in targets if isinstance(t, types.ModuleType)}
    prefixes = tuple(t for t in targets if isinstance(t, str))
    # A prefix's files too: its code run as a module of another name is the same code.
    places = tuple(p for t in prefixes for p in _module_places(t))
    allowed_files = {t.__file__ for t in allow if isinstance(t, types.ModuleType)}
    allowed_prefixes = tuple(t for t in allow if isinstance(t, str))
    log = CallLog(tuple(getattr(t, "__name__", t) for t in targets))

    def is_target(frame: Any) -> bool:
        module = frame.f_globals.get("__name__", "") or ""
        file = frame.f_code.co_filename
        return (
            file in files
            or bool(prefixes and module.startswith(prefixes))
            or bool(places and file.startswith(places))
        )

    def is_allowed(frame: Any) -> bool:
        if frame is None:
            return False
        module = frame.f_globals.get("__name__", "") or ""
        return (
            frame.f_code.co_filename in allowed_files
            or bool(allowed_prefixes and module.startswith(allowed_prefixes))
            or is_target(frame)
        )

    active = [True]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if not active[0]:  # a thread started while watching outlived the watch: unhook it
            sys.setprofile(None)
            return
        if event == "call":
            if is_target(frame) and not (allow and is_allowed(frame.f_back)):
                module = frame.f_globals.get("__name__", "")
                log.calls.append(f"{module}.{frame.f_code.co_name}")
        elif event == "c_call" and processes:
            key = (getattr(arg, "__module__", None), getattr(arg, "__name__", None))
            if key in _PROCESS_STARTERS:
                log.calls.append(f"{key[0]}.{key[1]} (another program)")

    @contextlib.contextmanager
    def watching() -> Any:
        before = _children() if processes else None
        previous = sys.getprofile()
        previous_threads = threading.getprofile() if hasattr(threading, "getprofile") else None
        every = getattr(threading, "setprofile_all_threads", None)  # Python 3.12+
        if every is not None:
            every(profile)
        else:
            sys.setprofile(profile)
        threading.setprofile(profile)  # threads started while watching
        try:
            yield log
        finally:
            active[0] = False
            threading.setprofile(previous_threads)  # type: ignore[arg-type]
            if every is not None:
                every(previous)
            else:
                sys.setprofile(previous)
            if before is not None and _children() != before:
                # A program started by a route the profile does not see (ctypes' or cffi's
                # system(), fork()): a child process was reaped or is still there.
                log.calls.append("a child process (another program)")

    return watching()


def _module_places(name: str) -> list[str]:
    """The files of module or package `name`: its directory (with a trailing /) or its file."""
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [os.path.join(str(d), "") for d in spec.submodule_search_locations]
    return [spec.origin] if spec.origin else []


def _children() -> tuple[int, frozenset[str]]:
    """Page faults of the reaped child processes, and the pids of the living ones (Linux)."""
    import os

    faults = 0
    try:
        import resource

        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        faults = r.ru_minflt + r.ru_majflt
    except ImportError:  # Windows
        pass
    living: set[str] = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                living.update(f.read().split())
    except OSError:
        pass
    return faults, frozenset(living)


def fresh_module(module: Any) -> Any:
    """Run `module`'s file again as a new module in the same package, and return it. Under
    :func:`watch_calls` this also sees what the module does at import time (a table computed by
    running ptxas when the module loads), which calling its functions alone would miss."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(f"{module.__name__}__fresh", module.__file__)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module.__file__} again")
    fresh = importlib.util.module_from_spec(spec)
    fresh.__package__ = module.__package__  # its relative imports find the same siblings
    sys.modules[spec.name] = fresh  # dataclasses look their module up while it loads
    spec.loader.exec_module(fresh)
    return fresh


# ------------------------------------------------------------------------------ no peeking
# Learner code shares the tests' interpreter: it could read an answer out of the hidden test
# instead of working it out (a constant in the test's code, a local of the checking frame; red
# team rt26). An audit hook, installed at the first use and recording only inside no_peeking(),
# notes the frame and code reads that learner code makes, directly or through inspect,
# traceback, dis or ctypes. An honest answer makes none.
_PEEKS = frozenset(
    {
        "sys._getframe",
        "sys._current_frames",
        "sys.setprofile",
        "sys.settrace",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "object.__getattr__",  # a frame's or generator's f_code/gi_frame/tb_frame/__code__
        "ctypes.dlsym",  # ctypes.pythonapi.PyEval_GetFrame: a frame without sys._getframe
    }
)
_READERS = tuple(
    f"{os.sep}{m}.py" for m in ("inspect", "traceback", "dis", f"ctypes{os.sep}__init__")
)
_peeking: dict[str, Any] = {"dir": None, "log": None, "busy": False, "hooked": False}


def _peek_hook(event: str, args: tuple[Any, ...]) -> None:
    # Nothing here may import (an import hook may read frames: audited, so recursion).
    if _peeking["log"] is None or event not in _PEEKS or _peeking["busy"]:
        return
    _peeking["busy"] = True  # the sys._getframe below is audited too
    try:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.endswith(_READERS):
            frame = frame.f_back
        file = frame.f_code.co_filename if frame is not None else ""
        if file.startswith(_peeking["dir"]) and f"{os.sep}tests{os.sep}" not in file:
            _peeking["log"].append(f".{args[1]}" if event == "object.__getattr__" else event)
    finally:
        _peeking["busy"] = False


@contextlib.contextmanager
def no_peeking(learner: Any, test_file: str) -> Iterator[list[str]]:
    """While the block runs learner code, record the frame and code-object reads made by code
    in the learner module's folder (its tests/ excluded); yields that list, which is empty for
    an honest answer: assert on it after the block, naming the function. Also drops `test_file`
    (pass ``__file__``) from linecache first, where pytest leaves a failed test's source::

        with no_peeking(answers, __file__) as peeks:
            got = answers.ridge_point()
        assert not peeks, f"ridge_point: read frames or code objects while answering ({peeks})"
    """
    if not _peeking["hooked"]:
        sys.addaudithook(_peek_hook)  # permanent, as audit hooks are; idle outside this block
        _peeking["hooked"] = True
    name = os.path.basename(test_file)
    for key in [k for k in linecache.cache if os.path.basename(k) == name]:
        linecache.cache.pop(key, None)
    _peeking["dir"] = os.path.dirname(learner.__file__) + os.sep
    _peeking["log"] = log = []
    try:
        yield log
    finally:
        _peeking["log"] = None


__all__ = [
    "CallLog",
    "check_written",
    "fresh_module",
    "hidden_settings",
    "no_peeking",
    "raises",
    "random_for",
    "rng",
    "run_seed",
    "seeded",
    "watch_calls",
    "wrote_nothing",
]
