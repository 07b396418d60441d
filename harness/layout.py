"""The tree's geography: where katas, their solutions mirrors, tests and results live.

One place answers "where is X" for every other module (docs/kata-layout.md describes the tree)::

    katas/phaseNN/<kata>/            what a learner sees; tests/ holds the public tests
    solutions/phaseNN/<kata>/        the mirror: reference files, tests/ (hidden), shortcuts/<name>/,
                                     mutants.toml (equivalent mutants, `kata verify --mutants`)
    .kata/                           results of runs (progress, last run, budgets), unless
                                     --kata-results-dir says otherwise

Pure path arithmetic: nothing here imports pytest or reads a manifest.
"""

from __future__ import annotations

from pathlib import Path

KATAS = "katas"
SOLUTIONS = "solutions"
TESTS = "tests"
SHORTCUTS = "shortcuts"
MUTANTS_TOML = "mutants.toml"  # solutions/phaseNN/<kata>/mutants.toml: its equivalent mutants
RESULTS_DIR = ".kata"  # default of --kata-results-dir, relative to the repository root


def find_root(start: Path | None = None) -> Path | None:
    """The repository root: the nearest directory at or above `start` with a katas/ folder."""
    start = (start or Path.cwd()).resolve()
    return next((d for d in (start, *start.parents) if (d / KATAS).is_dir()), None)


def results_dir(root: Path, option: str | Path | None = None) -> Path:
    """Where results are kept: `option` (--kata-results-dir) if given, else <root>/.kata."""
    return Path(option) if option else Path(root) / RESULTS_DIR


def mirror_of(kata_dir: Path) -> Path | None:
    """`solutions/phaseNN/<kata>` for `katas/phaseNN/<kata>`, whether or not it exists (None when
    `kata_dir` is not under a katas/ folder)."""
    for parent in kata_dir.parents:
        if parent.name == KATAS:
            return parent.parent / SOLUTIONS / kata_dir.relative_to(parent)
    return None


def solution_dir(kata_dir: Path) -> Path | None:
    """The mirror of `kata_dir` under the repository's solutions/ tree, if there is one."""
    mirror = mirror_of(kata_dir)
    return mirror if mirror is not None and mirror.is_dir() else None


def hidden_tests_dir(kata_dir: Path) -> Path | None:
    """Where a kata's hidden tests live (or would live): <mirror>/tests."""
    mirror = mirror_of(kata_dir)
    return mirror / TESTS if mirror is not None else None


def shortcut_dir(kata_dir: Path, name: str) -> Path:
    """Where shortcut `name` of a kata lives (whether or not it exists)."""
    base = mirror_of(kata_dir) or kata_dir / SOLUTIONS
    return base / SHORTCUTS / name


def kata_of_mirror_path(path: Path) -> Path | None:
    """For a path under solutions/ (a hidden test, a reference file), the same path under katas/
    (None when `path` is not under a solutions/ folder that has a katas/ sibling)."""
    for d in (path, *path.parents):
        if d.name == SOLUTIONS and (d.parent / KATAS).is_dir():
            return d.parent / KATAS / path.relative_to(d)
    return None


def in_mirror(path: Path, kata_dir: Path) -> bool:
    """Whether `path` lies inside the solutions/ mirror of `kata_dir`."""
    mirror = mirror_of(kata_dir)
    return mirror is not None and mirror in path.parents


def is_hidden_path(rel: str | Path) -> bool:
    """Whether a root-relative path (or a node id) is under solutions/: a hidden test's."""
    return Path(str(rel).split("::", 1)[0]).parts[:1] == (SOLUTIONS,)


def rel(path: Path, root: Path) -> str:
    """`path` relative to `root` in POSIX form, or `path` as given when it is outside `root`."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


def file_stem(kata_id: str) -> str:
    """The kata id as it appears in test file names: `memory-hierarchy` -> `memory_hierarchy`."""
    return kata_id.replace("-", "_")


__all__ = [
    "KATAS",
    "RESULTS_DIR",
    "SHORTCUTS",
    "SOLUTIONS",
    "TESTS",
    "file_stem",
    "find_root",
    "hidden_tests_dir",
    "in_mirror",
    "is_hidden_path",
    "kata_of_mirror_path",
    "mirror_of",
    "rel",
    "results_dir",
    "shortcut_dir",
    "solution_dir",
]
