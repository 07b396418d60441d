"""Hang once, fail fast after: which learner code is running, and which code has already hung.

Code that can hang runs inside :func:`running` with a *key* that names its build: an import of a
learner module (the file's hash), a kernel launch (the PTX or library hash and the kernel), a
native function (the library and the function). When that code ends past its limit (an
:class:`Overrun`: the test's alarm, a launch's wall or step limit, a native call's timeout), the key
is recorded; a later :func:`running` with the same key raises :class:`KnownHang` at once, naming the
test that waited the first time, instead of waiting again.

What runs is also written to a page of shared memory made before the sandbox forks: when the
parent kills a child stuck in native code (where no Python alarm can reach), it reads there what
the child was running (:func:`read_slot`).

The registry is active only while a kata test runs (:func:`begin_test`), so the harness's own
tests of the interpreter or the backend see every error they provoke.
"""

from __future__ import annotations

import functools
import hashlib
import json
import mmap
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

SLOT_BYTES = 4096
IMPORT, KERNEL, NATIVE = "import", "kernel", "native"


class Overrun(Exception):
    """Base of every "ran past its limit" error (test alarm, launch wall/step limit, native timeout)."""


@dataclass(frozen=True)
class Hang:
    kind: str  # IMPORT, KERNEL or NATIVE
    key: str  # the build: file or library hash plus the entry point
    label: str  # what a learner recognises: "simt.py", "kernel vector_add", "chase()"
    test: str  # the test that waited the first time (its name, not its node id)
    cause: str  # that test's message, first line

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Hang:
        return cls(**{k: str(data.get(k, "")) for k in ("kind", "key", "label", "test", "cause")})

    def sentence(self) -> str:
        return f"{self.label} hung in {self.test} ({self.cause}); not run again"


class KnownHang(Exception):
    """The code about to run already hung in an earlier test: fail now with that cause."""

    def __init__(self, hang: Hang) -> None:
        super().__init__(hang.sentence())
        self.hang = hang


# --------------------------------------------------------------------------- per-process state
_HUNG: dict[str, Hang] = {}
_NEW: list[Hang] = []  # recorded in this process since the last take_new()
_STACK: list[tuple[str, str, str]] = []
_test = {"name": "", "deadline": 0.0, "active": False}
_last: dict[str, Hang | None] = {"hang": None}  # the last overrun of the running test
try:  # MAP_SHARED and anonymous: a forked child writes, the parent reads
    _SLOT: mmap.mmap | None = mmap.mmap(-1, SLOT_BYTES)
except (OSError, ValueError):  # pragma: no cover - no shared memory: killed children say less
    _SLOT = None


def begin_test(name: str, deadline: float) -> None:
    """A kata test starts in this process; `deadline` is its time.monotonic() end (0: none)."""
    _test.update(name=name, deadline=deadline, active=True)
    _STACK.clear()
    _last["hang"] = None
    _write_slot()


def set_deadline(deadline: float) -> None:
    """Move the running test's deadline (its call's own, shorter limit, and back after it)."""
    if _test["active"]:
        _test["deadline"] = deadline


def end_test() -> None:
    _test.update(name="", deadline=0.0, active=False)
    _STACK.clear()
    _last["hang"] = None
    _write_slot()


def time_left() -> float | None:
    """Seconds the current kata test has left, or None when no limit applies."""
    if not _test["active"] or not _test["deadline"]:
        return None
    return max(0.0, _test["deadline"] - time.monotonic())


def launch_limit(default: float) -> float:
    """A wall limit for one launch or native call: `default`, cut to end a little before the
    test's own limit, so the launch fails with its own message and the test process survives."""
    left = time_left()
    if left is None:
        return default
    return max(0.05, min(default, left - min(1.0, 0.1 * left)))


# --------------------------------------------------------------------------- the registry
def record(hang: Hang) -> None:
    if hang.key and hang.key not in _HUNG:
        _HUNG[hang.key] = hang
        _NEW.append(hang)


def known(key: str) -> Hang | None:
    return _HUNG.get(key)


def take_new() -> list[Hang]:
    out = list(_NEW)
    _NEW.clear()
    return out


def forget_all() -> None:
    """Drop every recorded hang (a new session in the same process: pytester runs)."""
    _HUNG.clear()
    _NEW.clear()


@contextmanager
def running(kind: str, key: str, label: str) -> Iterator[None]:
    """Run learner code `key`; fail at once when it hung before, record it when it overruns."""
    if not _test["active"]:
        yield
        return
    hang = _HUNG.get(key)
    if hang is not None:
        raise KnownHang(hang)
    _STACK.append((kind, key, label))
    _write_slot()
    try:
        yield
    except Overrun as e:
        text = str(e).strip().splitlines()
        hang = Hang(kind, key, label, _test["name"], text[0] if text else type(e).__name__)
        record(hang)
        _last["hang"] = hang  # in the slot too: the report may not reach the parent in time
        _write_slot()
        raise
    finally:
        if _STACK and _STACK[-1][1] == key:
            _STACK.pop()
            _write_slot()


def current() -> tuple[str, str, str] | None:
    return _STACK[-1] if _STACK else None


def _write_slot() -> None:
    if _SLOT is None:
        return
    slot: dict[str, Any] = {}
    if _test["active"] and _test["deadline"]:
        slot["deadline"] = _test["deadline"]  # the parent's kill waits for the child's own limit
    if _STACK:
        slot["running"] = list(_STACK[-1])
    if _last["hang"] is not None:
        slot["hung"] = _last["hang"].to_json()
    data = json.dumps(slot).encode() if slot else b""
    if len(data) > SLOT_BYTES - 4:
        data = b""
    _SLOT[:4] = len(data).to_bytes(4, "little")
    _SLOT[4 : 4 + len(data)] = data


def slot_deadline() -> float | None:
    """The time.monotonic() end of the test a child of this process is running (its own alarm's
    deadline: a loaded machine may start the test later than the parent sent it), or None when
    no test is running there. CLOCK_MONOTONIC is one clock for every process of the machine."""
    if _SLOT is None:
        return None
    n = int.from_bytes(_SLOT[:4], "little")
    if not 0 < n <= SLOT_BYTES - 4:
        return None
    try:
        deadline = json.loads(_SLOT[4 : 4 + n]).get("deadline")
    except (ValueError, AttributeError):
        return None
    return float(deadline) if isinstance(deadline, int | float) else None


def read_slot() -> tuple[tuple[str, str, str] | None, Hang | None]:
    """What a (possibly killed) child of this process was running when it stopped, and what
    overran in its current test (recorded there, but its report may never have come)."""
    if _SLOT is None:
        return None, None
    n = int.from_bytes(_SLOT[:4], "little")
    if not 0 < n <= SLOT_BYTES - 4:
        return None, None
    try:
        d = json.loads(_SLOT[4 : 4 + n])
        run = d.get("running")
        running = (str(run[0]), str(run[1]), str(run[2])) if run else None
        hung = Hang.from_json(d["hung"]) if d.get("hung") else None
        return running, hung
    except (ValueError, KeyError, TypeError, IndexError):
        return None, None


def clear_slot() -> None:
    if _SLOT is not None:
        _SLOT[:4] = b"\0\0\0\0"


def seconds_text(seconds: float) -> str:
    """20 s, 1.5 s, 0.65 s: whole seconds from 10 s up, two figures below."""
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.2g}"


def import_hang_sentence(label: str, seconds: float) -> str:
    return (
        f"{label} did not finish importing in {seconds_text(seconds)} s: "
        "an endless loop at module level?"
    )


# --------------------------------------------------------------------------- Python learner code
CALL = "call"
_PACKAGE_PREFIX = "_kata_p"  # harness.loader's synthetic packages of kata modules


def python_entry(frame: Any, names: set[str]) -> tuple[str, str, str] | None:
    """The outermost frame of learner code (a kata module whose file name is in `names`) in the
    stack ending at `frame`: (module name, qualname, file), the call the test is stuck in."""
    found = None
    while frame is not None:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        qualname = getattr(code, "co_qualname", code.co_name)
        if (
            module.startswith(_PACKAGE_PREFIX)
            and code.co_filename.rsplit("/", 1)[-1] in names
            and "<" not in qualname  # a function, not a module body, lambda or comprehension
        ):
            found = (module, qualname, code.co_filename)
        frame = frame.f_back
    return found


def file_key(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()
    except OSError:
        return path


def record_python_hang(frame: Any, names: set[str], cause: str) -> Hang | None:
    """The test's time ran out inside learner Python code: record the outermost learner
    function on the stack as hung, and fence it in this process so later calls fail at once."""
    if not _test["active"] or _STACK:  # inside an import, a launch or a C call: that hung
        return None
    entry = python_entry(frame, names)
    if entry is None:
        return None
    module, qualname, path = entry
    name = path.rsplit("/", 1)[-1]
    # The module's name holds the kata and implementation: two katas' identical files differ.
    key = f"{CALL}:{module}:{file_key(path)}:{qualname}"
    hang = Hang(CALL, key, f"{qualname}() in {name}", _test["name"], cause)
    record(hang)
    _last["hang"] = hang
    _write_slot()
    mod = sys.modules.get(module)
    if mod is not None:
        fence(mod, qualname, hang)
    return hang


def fence_module(module: Any) -> None:
    """Fence the functions of a freshly imported learner module that hung before."""
    path = getattr(module, "__file__", None)
    if not path:
        return
    prefix = f"{CALL}:{module.__name__}:{file_key(path)}:"
    for key, hang in list(_HUNG.items()):
        if key.startswith(prefix):
            fence(module, key[len(prefix) :], hang)


def fence(module: Any, qualname: str, hang: Hang) -> bool:
    """Replace function `qualname` of `module` by one that raises KnownHang."""
    *path, last = qualname.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return False
    original = getattr(owner, last, None)
    if original is None or getattr(original, "_kata_fenced", False):
        return False

    @functools.wraps(original)
    def fenced(*args: Any, **kwargs: Any) -> Any:
        raise KnownHang(hang)

    fenced._kata_fenced = True  # type: ignore[attr-defined]
    try:
        setattr(owner, last, fenced)
    except (AttributeError, TypeError):
        return False
    return True
