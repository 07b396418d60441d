"""`kata.toml`: load and validate a kata manifest.

A bad manifest raises :class:`ManifestError` naming the file and the field, e.g.
``katas/phase01/simt/kata.toml: tasks[2].points: must be a positive integer, got -3``.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .layout import KATAS, SOLUTIONS
from .schedule import WEEKS, phase_weeks, week

MANIFEST_NAME = "kata.toml"
TIERS = ("cpu", "cluster-sim", "gpu")
CAPABILITIES = (
    "cc", "cxx", "nvcc", "ptxas", "cuobjdump", "clang", "valgrind", "cargo",
    "namespaces", "cgroups", "netns", "chromium", "kbuild", "busybox",
    "promtool", "gdb", "strace", "bpftrace", "node",
)  # fmt: skip
# Capabilities a kata may keep in the sandbox child (`[sandbox] keep_capabilities`) in runs
# that hold a secret: only CAP_SYS_ADMIN (namespaces, mount, pivot_root); the others the child
# drops (harness.sandbox.secrets.DROPPED_CAPS) read the key directly and are never granted.
GRANTABLE_CAPABILITIES = ("CAP_SYS_ADMIN",)
# Katas outside the phases: the curriculum's system-design walkthroughs and interview prep. They
# live in katas/<track>/<kata>; `phase` then names the phase whose material they draw on.
TRACKS = ("system-design", "interview-prep")
LANGUAGES = ("python", "c", "cpp", "cuda", "ptx", "rust", "go", "typescript", "text")
_ID = re.compile(r"^[a-z][a-z0-9_-]*$")


class ManifestError(ValueError):
    """A kata manifest is invalid; the message names file and field."""

    def __init__(self, path: Path | str, field_name: str, problem: str) -> None:
        self.path, self.field, self.problem = str(path), field_name, problem
        super().__init__(f"{path}: {field_name}: {problem}")


@dataclass(frozen=True)
class Hint:
    """One hint of a task. With `tests` (test patterns, as a task's) or `functions` (learner
    function names) it belongs to the failures of those tests, or of tests whose failing line
    calls, or whose traceback passes through, one of those functions; without either, to any
    failure of its task."""

    text: str
    tests: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()

    @property
    def general(self) -> bool:
        return not (self.tests or self.functions)

    def targets(self, file_name: str, test_name: str, functions: frozenset[str]) -> bool:
        return any(_match(p, file_name, test_name) for p in self.tests) or bool(
            functions & set(self.functions)
        )


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    points: int
    tests: tuple[str, ...]  # fnmatch patterns on test names ("test_x*") or "file.py::test_x*"
    hints: tuple[str, ...] = ()  # the hints' texts, in order (`kata hint` shows them one by one)
    weights: tuple[tuple[str, float], ...] = ()  # pattern -> weight of matching tests (default 1)
    tier: str | None = None
    capabilities: tuple[str, ...] = ()
    # When a gate test of this task fails, the task earns at most this fraction of its points.
    gate_fraction: float = 0.0
    hint_rules: tuple[Hint, ...] = ()  # the hints with what they belong to (`hints` = their texts)

    def hint_for(
        self, file_name: str, test_name: str, functions: frozenset[str] = frozenset()
    ) -> str:
        """The hint for a failure of the test: the first hint that belongs to it (by test
        pattern or learner function), else the task's first general hint; "" when none."""
        base = test_name.split("[", 1)[0]
        rules = self.hint_rules or tuple(Hint(h) for h in self.hints)
        for rule in rules:
            if rule.targets(file_name, base, functions):
                return rule.text
        return next((r.text for r in rules if r.general), "")

    def matches(self, file_name: str, test_name: str) -> bool:
        return any(_match(p, file_name, test_name) for p in self.tests)

    def weight_of(self, file_name: str, test_name: str) -> float:
        for pattern, weight in self.weights:
            if _match(pattern, file_name, test_name):
                return weight
        return 1.0


@dataclass(frozen=True)
class Manifest:
    path: Path
    id: str
    title: str
    phase: int
    summary: str
    languages: tuple[str, ...]
    files: tuple[str, ...]  # learner-edited files, relative to the kata directory
    tasks: tuple[Task, ...]
    tier: str = "cpu"
    capabilities: tuple[str, ...] = ()
    time_limit: float = 30.0  # seconds per test
    time_budget: float | None = None  # seconds for all the kata's tests (None: the default)
    memory_limit_mb: int = 2048
    tags: tuple[str, ...] = ()
    weeks: tuple[int, ...] = ()  # the curriculum's weeks (harness/schedule.py) this kata belongs to
    budgets: dict[str, Any] = field(default_factory=dict)
    gate_fraction: float = 0.0  # the kata-wide default of the tasks' gate_fraction
    given: tuple[str, ...] = ()  # modules the learner uses but does not edit (kata-relative)
    keep_capabilities: tuple[str, ...] = ()  # [sandbox] keep_capabilities: not dropped in the child
    # [test_seconds]: the reference's seconds per test (by function name), from `kata verify
    # --record`; harness.timekeeper.scaled_limit makes each test's limit from them.
    test_seconds: dict[str, float] = field(default_factory=dict)
    # How many of the kata's shortcut runs `kata verify` makes at once: more than 1 for a kata
    # whose tests mostly wait (timeouts, sleeping threads), so they overlap without competing.
    shortcut_jobs: int = 1
    track: str = ""  # "" for a phase's kata, else one of TRACKS
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def dir(self) -> Path:
        return self.path.parent

    @property
    def points(self) -> int:
        return sum(t.points for t in self.tasks)

    @property
    def where(self) -> str:
        """How people name its place: "phase 07", or "system-design (phase 07)" for a track."""
        return where(self.phase, self.track)

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(f"{self.path}: no task {task_id!r} (tasks: {[t.id for t in self.tasks]})")

    def task_for(self, file_name: str, test_name: str) -> Task | None:
        """The task a test belongs to; `test_name` may carry a parametrize suffix ``[...]``."""
        base = test_name.split("[", 1)[0]
        for t in self.tasks:
            if t.matches(file_name, base):
                return t
        return None


def _match(pattern: str, file_name: str, test_name: str) -> bool:
    if "::" in pattern:
        fpat, tpat = pattern.split("::", 1)
        return fnmatch.fnmatchcase(file_name, fpat) and fnmatch.fnmatchcase(test_name, tpat)
    return fnmatch.fnmatchcase(test_name, pattern)


# --------------------------------------------------------------------------- validation helpers
class _Fields:
    """Typed access to a TOML table that reports errors as `file: field: problem`."""

    def __init__(self, path: Path, table: dict[str, Any], prefix: str = "") -> None:
        self.path, self.table, self.prefix = path, table, prefix

    def name(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def fail(self, key: str, problem: str) -> ManifestError:
        return ManifestError(self.path, self.name(key), problem)

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ..., what: str = ""):
        if key not in self.table:
            if default is ...:
                raise self.fail(key, "is required")
            return default
        value = self.table[key]
        if isinstance(value, bool) and kind is not bool and bool not in _as_tuple(kind):
            raise self.fail(key, f"must be {what or _kind_name(kind)}, got {value!r}")
        if not isinstance(value, kind):
            raise self.fail(key, f"must be {what or _kind_name(kind)}, got {value!r}")
        return value

    def text(self, key: str, default: Any = ...) -> str:
        value = self.get(key, str, default, "a string")
        if isinstance(value, str) and not value.strip():
            raise self.fail(key, "must not be empty")
        return value

    def strings(self, key: str, default: Any = ()) -> tuple[str, ...]:
        value = self.get(key, list, list(default) if default != ... else ..., "a list of strings")
        for i, v in enumerate(value):
            if not isinstance(v, str) or not v:
                raise ManifestError(
                    self.path, f"{self.name(key)}[{i}]", f"must be a string, got {v!r}"
                )
        return tuple(value)

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ...) -> str:
        value = self.text(key, default)
        if value not in choices:
            raise self.fail(key, f"must be one of {', '.join(choices)}; got {value!r}")
        return value

    def choices(self, key: str, choices: tuple[str, ...]) -> tuple[str, ...]:
        values = self.strings(key)
        for i, v in enumerate(values):
            if v not in choices:
                raise ManifestError(
                    self.path,
                    f"{self.name(key)}[{i}]",
                    f"must be one of {', '.join(choices)}; got {v!r}",
                )
        return values

    def unknown(self, known: set[str]) -> None:
        for key in self.table:
            if key not in known:
                raise self.fail(key, f"unknown field (known: {', '.join(sorted(known))})")


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def where(phase: int, track: str = "") -> str:
    return f"{track} (phase {phase:02d})" if track else f"phase {phase:02d}"


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table"}
    return " or ".join(names.get(k, k.__name__) for k in _as_tuple(kind))


_TOP = {
    "id", "title", "phase", "summary", "languages", "files", "tasks", "requires",
    "time_limit", "time_budget", "memory_limit_mb", "tags", "budgets", "gate_fraction", "given", "kata",
    "sandbox", "test_seconds", "weeks", "shortcut_jobs", "track",
}  # fmt: skip
_TASK = {
    "id", "title", "points", "tests", "hints", "weights", "tier", "capabilities", "gate_fraction",
}  # fmt: skip


def parse_manifest(path: Path, data: dict[str, Any]) -> Manifest:
    top = _Fields(path, data)
    top.unknown(_TOP)
    kata_id = top.text("id")
    if not _ID.match(kata_id):
        raise top.fail("id", f"must be lower-case letters, digits, '-' or '_'; got {kata_id!r}")
    phase = top.get("phase", int, what="an integer 1..12")
    if not 1 <= phase <= 12:
        raise top.fail("phase", f"must be an integer 1..12, got {phase!r}")
    languages = top.choices("languages", LANGUAGES)
    if not languages:
        raise top.fail("languages", "must name at least one language")
    files = top.strings("files")
    for i, name in enumerate(files):
        if name.startswith("/") or ".." in Path(name).parts:
            raise ManifestError(path, f"files[{i}]", f"must be relative to the kata, got {name!r}")
        if not (path.parent / name).exists():
            raise ManifestError(path, f"files[{i}]", f"{name!r} does not exist in {path.parent}")
    time_limit = top.get("time_limit", (int, float), 30.0, "a number of seconds")
    if time_limit <= 0:
        raise top.fail("time_limit", f"must be a positive number of seconds, got {time_limit!r}")
    time_budget = top.get("time_budget", (int, float), None, "a number of seconds")
    if time_budget is not None and time_budget < time_limit:
        raise top.fail(
            "time_budget",
            f"must be at least time_limit ({time_limit:g} s), got {time_budget!r}",
        )
    memory = top.get("memory_limit_mb", int, 2048, "a positive integer (MiB)")
    if memory <= 0:
        raise top.fail("memory_limit_mb", f"must be a positive integer (MiB), got {memory!r}")

    requires = _Fields(path, top.get("requires", dict, {}, "a table"), "requires.")
    requires.unknown({"tier", "capabilities"})
    tier = requires.choice("tier", TIERS, "cpu")
    caps = requires.choices("capabilities", CAPABILITIES)

    gate_default = _kata_gate_fraction(top)
    given = _given(top, files)

    raw_tasks = top.get("tasks", list, what="an array of tables ([[tasks]])")
    if not raw_tasks:
        raise top.fail("tasks", "must list at least one task ([[tasks]])")
    tasks: list[Task] = []
    for i, raw in enumerate(raw_tasks):
        if not isinstance(raw, dict):
            raise ManifestError(path, f"tasks[{i}]", "must be a table ([[tasks]])")
        tasks.append(_parse_task(_Fields(path, raw, f"tasks[{i}]."), gate_default))
    seen: set[str] = set()
    for i, t in enumerate(tasks):
        if t.id in seen:
            raise ManifestError(path, f"tasks[{i}].id", f"duplicate task id {t.id!r}")
        seen.add(t.id)

    budgets = top.get("budgets", dict, {}, "a table")
    sandbox = _Fields(path, top.get("sandbox", dict, {}, "a table ([sandbox])"), "sandbox.")
    sandbox.unknown({"keep_capabilities"})
    keep = sandbox.choices("keep_capabilities", GRANTABLE_CAPABILITIES)
    test_seconds = _test_seconds(top)
    shortcut_jobs = top.get("shortcut_jobs", int, 1, "an integer 1..4")
    if not 1 <= shortcut_jobs <= 4:
        raise top.fail("shortcut_jobs", f"must be an integer 1..4, got {shortcut_jobs!r}")
    weeks = _weeks(top, phase)
    track = _track(top, path)
    return Manifest(
        path=path, id=kata_id, title=top.text("title"), phase=phase, summary=top.text("summary"),
        languages=languages, files=files, tasks=tuple(tasks), tier=tier, capabilities=caps,
        time_limit=float(time_limit), memory_limit_mb=memory, tags=top.strings("tags"),
        time_budget=None if time_budget is None else float(time_budget),
        budgets=budgets, gate_fraction=gate_default, given=given, keep_capabilities=keep,
        test_seconds=test_seconds, weeks=weeks, raw=data, shortcut_jobs=shortcut_jobs,
        track=track,
    )  # fmt: skip


def _track(top: _Fields, path: Path) -> str:
    """`track = "system-design"`: the kata lives in katas/system-design/, and only there."""
    track = top.choice("track", TRACKS) if "track" in top.table else ""
    folder = path.parent.parent.name
    if folder in TRACKS and track != folder:
        raise top.fail("track", f"a kata in katas/{folder}/ must say track = {folder!r}")
    if track and folder != track:
        raise top.fail("track", f"a {track} kata lives in katas/{track}/<kata>, not in {folder}/")
    return track


def _weeks(top: _Fields, phase: int) -> tuple[int, ...]:
    """`weeks = [3, 4]`: weeks of the course's schedule that the kata's phase owns."""
    raw = top.get("weeks", list, [], "a list of week numbers")
    allowed = phase_weeks(phase)
    for i, w in enumerate(raw):
        if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= WEEKS:
            raise ManifestError(top.path, f"weeks[{i}]", f"must be a week 1..{WEEKS}, got {w!r}")
        if w not in allowed:
            raise ManifestError(
                top.path,
                f"weeks[{i}]",
                f"week {w} belongs to phase {week(w).phase} in the schedule, not phase {phase} "
                f"(phase {phase} has weeks {', '.join(map(str, allowed)) or 'none'})",
            )
    return tuple(sorted(set(raw)))


def _test_seconds(top: _Fields) -> dict[str, float]:
    """`[test_seconds]`: test function name = the reference's seconds (a positive number)."""
    table = top.get("test_seconds", dict, {}, "a table of test name = seconds")
    out = {}
    for name, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise top.fail(
                f"test_seconds.{name}", f"must be a positive number of seconds, got {value!r}"
            )
        if not _TEST_NAME.match(name):
            raise top.fail(f"test_seconds.{name}", "must be a test function's name (test_...)")
        out[name] = float(value)
    return out


_TEST_NAME = re.compile(r"^test\w*$")


def _gate_fraction(f: _Fields, default: float) -> float:
    value = f.get("gate_fraction", (int, float), default, "a number from 0 to 1")
    if not 0 <= value < 1:
        raise f.fail(
            "gate_fraction",
            f"must be a number from 0 up to (not including) 1, got {value!r} "
            "(1 would let a failed gate cost nothing)",
        )
    return float(value)


def _kata_gate_fraction(top: _Fields) -> float:
    """The kata-wide default: top-level `gate_fraction`, or `[kata] gate_fraction` (one of them)."""
    table = _Fields(top.path, top.get("kata", dict, {}, "a table ([kata])"), "kata.")
    table.unknown({"gate_fraction"})
    if "gate_fraction" in table.table and "gate_fraction" in top.table:
        raise top.fail("gate_fraction", "is also set as kata.gate_fraction; keep one of them")
    return _gate_fraction(table if "gate_fraction" in table.table else top, 0.0)


def _given(top: _Fields, files: tuple[str, ...]) -> tuple[str, ...]:
    """`given`: the kata's modules a learner uses but does not edit; they live in the kata dir."""
    given = top.strings("given")
    for i, name in enumerate(given):
        where = f"given[{i}]"
        if name.startswith("/") or ".." in Path(name).parts:
            raise ManifestError(top.path, where, f"must be relative to the kata, got {name!r}")
        if name in files:
            raise ManifestError(
                top.path, where, f"{name!r} is a learner file (in files), not given code"
            )
        if not (top.path.parent / name).is_file():
            raise ManifestError(top.path, where, f"{name!r} does not exist in {top.path.parent}")
    return given


def _parse_task(f: _Fields, gate_default: float = 0.0) -> Task:
    f.unknown(_TASK)
    task_id = f.text("id")
    if not _ID.match(task_id):
        raise f.fail("id", f"must be lower-case letters, digits, '-' or '_'; got {task_id!r}")
    points = f.get("points", int, what="a positive integer")
    if points <= 0:
        raise f.fail("points", f"must be a positive integer, got {points!r}")
    tests = f.strings("tests", ...)
    if not tests:
        raise f.fail("tests", "must list at least one test pattern")
    weights_raw = f.get("weights", dict, {}, "a table of pattern = weight")
    weights = []
    for pattern, w in weights_raw.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w <= 0:
            raise f.fail(f"weights.{pattern}", f"must be a positive number, got {w!r}")
        weights.append((pattern, float(w)))
    tier = f.choice("tier", TIERS, None) if "tier" in f.table else None
    hints = _hints(f)
    return Task(
        id=task_id, title=f.text("title"), points=points, tests=tests,
        hints=tuple(h.text for h in hints), weights=tuple(weights), tier=tier,
        capabilities=f.choices("capabilities", CAPABILITIES),
        gate_fraction=_gate_fraction(f, gate_default), hint_rules=hints,
    )  # fmt: skip


_HINT = {"text", "tests", "functions"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _hints(f: _Fields) -> tuple[Hint, ...]:
    """`hints`: strings (for any failure of the task) or tables ``{ text = "...", tests =
    ["test_x*"], functions = ["param_count"] }`` (also written ``[[tasks.hints]]``)."""
    raw = f.get("hints", list, [], "a list of strings or tables { text, tests, functions }")
    out = []
    for i, item in enumerate(raw):
        where = f"{f.name('hints')}[{i}]"
        if isinstance(item, str):
            if not item.strip():
                raise ManifestError(f.path, where, "must not be empty")
            out.append(Hint(item))
            continue
        if not isinstance(item, dict):
            raise ManifestError(
                f.path,
                where,
                f"must be a string or a table {{ text, tests, functions }}, got {item!r}",
            )
        h = _Fields(f.path, item, f"{where}.")
        h.unknown(_HINT)
        text, tests, functions = h.text("text"), h.strings("tests"), h.strings("functions")
        for j, name in enumerate(functions):
            if not _IDENT.match(name):
                raise ManifestError(
                    f.path, f"{where}.functions[{j}]", f"must be a function name, got {name!r}"
                )
        if not (tests or functions):
            raise h.fail(
                "tests",
                "or functions must name what the hint is for (or write the hint as a plain string)",
            )
        out.append(Hint(text, tests, functions))
    return tuple(out)


def load_manifest(path: Path | str) -> Manifest:
    """Load `kata.toml` (or the kata directory holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    return _load_cached(path.resolve(), path.stat().st_mtime_ns if path.exists() else 0)


@lru_cache(maxsize=256)
def _load_cached(path: Path, _mtime: int) -> Manifest:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(path, "(file)", "not found") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(path, "(syntax)", f"invalid TOML: {e}") from None
    return parse_manifest(path, data)


def find_kata_dir(path: Path) -> Path | None:
    """The kata directory (holding kata.toml) at or above `path`; solutions/ paths map to katas/."""
    path = path.resolve()
    for d in (path, *path.parents):
        if (d / MANIFEST_NAME).is_file():
            return d
        if d.name == SOLUTIONS and (d.parent / KATAS).is_dir():
            return find_kata_dir(d.parent / KATAS / path.relative_to(d))
    return None


def discover(root: Path) -> list[Path]:
    """All kata directories under `root` (a repo root, `katas/`, a phase or a kata), sorted."""
    root = Path(root)
    base = root / "katas" if (root / "katas").is_dir() else root
    if (base / MANIFEST_NAME).is_file():
        return [base]
    return sorted(p.parent for p in base.rglob(MANIFEST_NAME) if ".venv" not in p.parts)
