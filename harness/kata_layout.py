"""The kata layout of docs/kata-layout.md, checked: what `kata verify` says to move where.

Static checks of one kata's files (nothing runs): test file names, tests named after their
task, fixtures defined once (in the public ``tests/conftest.py``), no stray files in ``tests/``,
given code in the kata directory only, the solutions mirror holding only the learner files,
hidden hypothesis tests using ``harness.testing.hidden_settings``, and every check of a hidden
test carrying a message. Each problem is one sentence
naming the file and what to do.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .layout import MUTANTS_TOML, SHORTCUTS, TESTS, file_stem, solution_dir
from .manifest import Manifest

CONFTEST = "conftest.py"
DATA_DIR = "data"  # tests/data/: files the tests read (sources, traces); anything but modules
_IGNORED = {"__pycache__", ".pytest_cache", ".hypothesis"}


# Rules kata verify enforces; a rule listed in NOT_ENFORCED_YET is reported as a note only,
# until every kata on main follows it (then remove it from the set).
RULES = ("file-names", "tests-dir", "test-names", "fixtures-once", "hidden-settings",
         "hidden-messages", "mirror", "shortcut-files")  # fmt: skip
NOT_ENFORCED_YET: set[str] = set()

# hidden-messages can be enforced kata by kata: a kata listed here (one being rewritten, or a new
# one) gets a note, not an error, until its hidden checks all carry messages. Every kata on main
# is clean: keep it empty.
MESSAGES_PENDING: set[str] = set()


def enforced(rule: str, kata_id: str) -> bool:
    """Whether a finding of `rule` in kata `kata_id` fails kata verify (else it is a note)."""
    if rule in NOT_ENFORCED_YET:
        return False
    return not (rule == "hidden-messages" and kata_id in MESSAGES_PENDING)


def check(m: Manifest) -> list[tuple[str, str]]:
    """Every way kata `m` departs from the layout, as (rule, sentence) pairs (empty: it
    follows it)."""
    public = m.dir / TESTS
    mirror = solution_dir(m.dir)
    hidden = mirror / TESTS if mirror is not None else None
    stem = file_stem(m.id)
    found: list[tuple[str, str]] = []
    found += _test_dir(public, stem, "test_", f"katas/.../{m.dir.name}/tests")
    if hidden is not None:
        found += _test_dir(hidden, stem, "test_hidden_", f"solutions/.../{m.dir.name}/tests")
    test_files = _test_files(public) + (_test_files(hidden) if hidden is not None else [])
    found += [("test-names", s) for s in _test_names(m, test_files)]
    found += [("fixtures-once", s) for s in _fixtures_once(public, test_files)]
    if hidden is not None:
        found += [("hidden-settings", f"{_short(p)}: {why}")
                  for p in _test_files(hidden) for why in _settings(p)]  # fmt: skip
        found += [("hidden-messages", s) for p in _test_files(hidden) for s in _messages(p)]
    if mirror is not None:
        found += [("mirror", s) for s in _mirror_files(m, mirror)]
        found += [("shortcut-files", s) for s in _shortcut_files(m, mirror)]
    return found


# --------------------------------------------------------------------------- tests/ directories
def _files(d: Path) -> list[Path]:
    if not d.is_dir():
        return []
    return sorted(p for p in d.rglob("*") if p.is_file() and not _IGNORED & set(p.parts))


def _test_files(d: Path | None) -> list[Path]:
    if d is None or not d.is_dir():
        return []
    return sorted(p for p in d.glob("test_*.py"))


def _test_dir(d: Path, stem: str, prefix: str, shown: str) -> list[tuple[str, str]]:
    """File names in a tests/ directory: test modules named after the kata, conftest.py, and
    anything else (data) under tests/data/."""
    out = []
    expected = f"{prefix}{stem}.py"
    name_ok = re.compile(rf"{re.escape(prefix)}{re.escape(stem)}(_[a-z0-9_]+)?\.py")
    public = prefix == "test_"
    for p in _files(d):
        rel = p.relative_to(d)
        if rel.parts[0] == DATA_DIR:
            if p.suffix == ".py" and p.name.startswith("test_"):
                out.append(("tests-dir", f"{shown}/{rel.as_posix()}: a test module in data/: "
                            "move it up to tests/"))  # fmt: skip
            continue
        if len(rel.parts) > 1:
            out.append(("tests-dir", f"{shown}/{rel.as_posix()}: tests/ has no sub-directories "
                        f"but data/: move it to tests/{DATA_DIR}/{rel.as_posix()}"))  # fmt: skip
        elif p.name == CONFTEST:
            if not public:
                out.append(("tests-dir", f"{shown}/{CONFTEST}: hidden tests use the public "
                            "tests/conftest.py (it is shipped anyway): move its fixtures there"))  # fmt: skip
        elif p.suffix == ".py" and p.name.startswith("test_"):
            if not name_ok.fullmatch(p.name) or (public and p.name.startswith("test_hidden_")):
                out.append(("file-names", f"{shown}/{p.name}: rename to {expected} (or "
                            f"{prefix}{stem}_<part>.py, {prefix}{stem}_gpu.py)"))  # fmt: skip
        else:
            what = "a helper module" if p.suffix == ".py" else "a data file"
            where = (
                f"move it to tests/{CONFTEST} (fixtures, helpers) or, given code, to the kata "
                "directory (listed in `given`)"
                if p.suffix == ".py"
                else f"move it to tests/{DATA_DIR}/{p.name}"
            )
            out.append(("tests-dir", f"{shown}/{p.name}: {what} in tests/: {where}"))
    return out


# --------------------------------------------------------------------------- test names
def _tests_in(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test_"
        ):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names += [
                f"{node.name}.{f.name}"
                for f in node.body
                if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")
            ]
    return names


def _test_names(m: Manifest, files: list[Path]) -> list[str]:
    """Each test is named test_<task id>_* after the task it belongs to (tasks by id)."""
    out = []
    for path in files:
        for name in _tests_in(path):
            func = name.rsplit(".", 1)[-1]
            task = m.task_for(path.name, func)
            if task is None:
                continue  # kata verify's run reports tests of no task
            prefix = f"test_{file_stem(task.id)}_"
            if not func.startswith(prefix) and func != prefix.rstrip("_"):
                out.append(f"{_short(path)}::{name}: belongs to task {task.id}: rename it "
                           f"{prefix}... (tests are named after their task's id)")  # fmt: skip
    return out


# --------------------------------------------------------------------------- fixtures once
def _fixtures(path: Path) -> dict[str, int]:
    """Module-level fixtures of a file: name -> line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
            "fixture" in ast.unparse(d) for d in node.decorator_list
        ):
            out[node.name] = node.lineno
    return out


def _fixtures_once(public: Path, files: list[Path]) -> list[str]:
    """A fixture of tests/conftest.py is not defined again in a test file (public or hidden),
    and a fixture two test files define alike belongs in tests/conftest.py."""
    conftest = public / CONFTEST
    shared = _fixtures(conftest) if conftest.is_file() else {}
    out = []
    seen: dict[str, Path] = {}
    for path in files:
        for name, line in _fixtures(path).items():
            if name in shared:
                out.append(f"{_short(path)}:{line}: fixture {name} is already in tests/"
                           f"{CONFTEST}: delete this copy")  # fmt: skip
            elif name in seen:
                out.append(f"{_short(path)}:{line}: fixture {name} is also defined in "
                           f"{_short(seen[name])}: define it once, in tests/{CONFTEST}")  # fmt: skip
            else:
                seen[name] = path
    return out


def _settings(path: Path) -> list[str]:
    """Hidden hypothesis tests use harness.testing.hidden_settings(), not their own settings."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "hypothesis":
            if any(a.name == "settings" for a in node.names):
                return [
                    "imports hypothesis.settings: use harness.testing.hidden_settings(N) "
                    "(seeded by the run seed, no database, no shrinking)"
                ]
    return []


_NUMPY_ASSERTS = {"assert_allclose", "assert_array_equal", "assert_array_almost_equal",
                  "assert_equal", "assert_almost_equal", "assert_array_less"}  # fmt: skip


def _messages(path: Path) -> list[str]:
    """Every check in a hidden test says what failed: the learner sees its message only (never
    the test's source). An `assert` carries a message; `numpy.testing.assert_*` an `err_msg=`;
    `pytest.raises` (whose failure, "DID NOT RAISE", names no function) is
    `harness.testing.raises(Error, "what must raise")`. A kata's own checking helper is the
    helper's to word (it is not looked into here)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.msg is None:
            out.append(f"{_short(path)}:{node.lineno}: an assert without a message: say which "
                       "function and property failed, on what input "
                       '(assert got == want, f"f({x}) is wrong: expected {want}, got {got}")')  # fmt: skip
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, owner = node.func.attr, node.func.value
            if name in _NUMPY_ASSERTS and not any(k.arg == "err_msg" for k in node.keywords):
                out.append(f"{_short(path)}:{node.lineno}: {name} without err_msg=: say which "
                           "function and property failed, on what input")  # fmt: skip
            elif name == "raises" and isinstance(owner, ast.Name) and owner.id == "pytest":
                out.append(f"{_short(path)}:{node.lineno}: pytest.raises fails with \"DID NOT "
                           'RAISE\" only: use harness.testing.raises(Error, "what must raise")')  # fmt: skip
    return sorted(out, key=lambda s: int(s.split(":")[1]))


# --------------------------------------------------------------------------- the mirror
def _mirror_files(m: Manifest, mirror: Path) -> list[str]:
    """solutions/<kata>/ holds the learner files (the reference), tests/, shortcuts/ and
    mutants.toml (its equivalent mutants, harness.mutants) only: given code lives in the kata
    directory, once."""
    out = []
    learner = set(m.files)
    for p in _files(mirror):
        rel = p.relative_to(mirror)
        if rel.parts[0] in (TESTS, SHORTCUTS) or rel.as_posix() in (*learner, MUTANTS_TOML):
            continue
        if (m.dir / rel).is_file():
            out.append(f"solutions/.../{m.dir.name}/{rel.as_posix()}: a copy of given code: "
                       f"delete it (katas/.../{m.dir.name}/{rel.as_posix()} is the one copy)")  # fmt: skip
        else:
            out.append(f"solutions/.../{m.dir.name}/{rel.as_posix()}: not a learner file "
                       f"(files in kata.toml): move it to katas/.../{m.dir.name}/ and list it "
                       "in `given`")  # fmt: skip
    return out


def _shortcut_files(m: Manifest, mirror: Path) -> list[str]:
    """A shortcut directory holds shortcut.toml and shortcut.patch (a diff against the
    reference), never copies of learner files (harness.shortcuts checks what the patch changes)."""
    out = []
    for sc in sorted(p for p in (mirror / SHORTCUTS).glob("*") if p.is_dir()):
        stray = [p for p in _files(sc) if p.name not in ("shortcut.toml", "shortcut.patch")]
        if stray:
            rel = stray[0].relative_to(mirror).as_posix()
            out.append(f"solutions/.../{m.dir.name}/{rel}: a shortcut is shortcut.toml and "
                       "shortcut.patch, a diff against the reference: run `kata shortcut "
                       f"convert katas/.../{m.dir.name}` (it turns copies into the patch)")  # fmt: skip
    return out


def _short(path: Path) -> str:
    """`katas/.../<kata>/tests/x.py` or `solutions/.../<kata>/tests/x.py` for a test file."""
    parts = path.parts
    for top in ("katas", "solutions"):
        if top in parts:
            i = len(parts) - 1 - parts[::-1].index(top)
            return "/".join((top, "...", *parts[i + 2 :]))
    return str(path)


__all__ = ["MESSAGES_PENDING", "NOT_ENFORCED_YET", "RULES", "check", "enforced"]
