"""Build the two published trees from an instructor repository.

- **learner**: everything a learner's repository holds: katas with stubs and public tests, the
  harness, the learner workflows, ``grading/hidden.bundle`` (every kata's public and hidden
  tests, encrypted) and ``grading/integrity.json`` (the hash manifest). No ``solutions/``, no
  plaintext hidden test, none of the developer-only files (the harness's own tests, benchmarks,
  the project CI).
- **solutions**: the same, with each kata's reference files in place of its stubs and the
  hidden tests in the clear under ``solutions/<phase>/<kata>/tests/``.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..hidden.bundle import KataTests, write_bundle
from ..hidden.canonical import read_py_tree
from ..hidden.integrity import BUNDLE_PATH, MANIFEST_PATH, build_manifest, manifest_bytes
from ..hidden.keys import Key
from ..layout import RESULTS_DIR, solution_dir
from ..manifest import Manifest, discover, load_manifest

# Instructor-only paths (relative to the repository root), never published.
DEVELOPER_ONLY = (
    "solutions/",
    "harness/tests/",
    "harness/benchmarks/",
    ".ci/",
    ".github/workflows/ci.yml",
    "grading/",
)
_NEVER = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", RESULTS_DIR, "build",
          "dist", ".ruff_cache", ".whl", "node_modules"}  # fmt: skip


class PublishError(Exception):
    """The instructor tree cannot be published as it is; the message names the file."""


@dataclass
class Published:
    learner: Path
    solutions: Path
    katas: list[Manifest]
    learner_files: list[str] = field(default_factory=list)
    hidden_tests: int = 0


def source_files(root: Path) -> list[str]:
    """The repository's files as git sees them (tracked, plus untracked not ignored); every file
    outside caches and environments when `root` is not a git checkout."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root, capture_output=True, check=True, timeout=60,
        ).stdout.decode()  # fmt: skip
        files = [f for f in out.split("\0") if f and (root / f).is_file()]
        if files:
            return sorted(set(files))
    except (OSError, subprocess.SubprocessError):
        pass
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not _NEVER & set(p.relative_to(root).parts)
    )


def select_katas(root: Path, ids: list[str]) -> list[Manifest]:
    manifests = [load_manifest(d) for d in discover(root)]
    if ids:
        unknown = sorted(set(ids) - {m.id for m in manifests})
        if unknown:
            known = ", ".join(m.id for m in manifests) or "none"
            raise PublishError(f"no kata {', '.join(unknown)} (katas: {known})")
        manifests = [m for m in manifests if m.id in ids]
    if not manifests:
        raise PublishError(f"no katas under {root / 'katas'}")
    return manifests


def kata_tests(root: Path, m: Manifest) -> KataTests:
    """A kata's public and hidden tests, checked for what the in-memory loader can run."""
    rel = m.dir.relative_to(root).as_posix()
    mirror = solution_dir(m.dir)
    public = read_py_tree(m.dir / "tests")
    hidden = read_py_tree(mirror / "tests") if mirror is not None else {}
    if mirror is not None:
        for p in sorted(mirror.rglob("*")):
            if not p.is_file() or "__pycache__" in p.parts:
                continue
            where = p.relative_to(root).as_posix()
            in_tests = "tests" in p.relative_to(mirror).parts
            if in_tests and p.suffix != ".py":
                raise PublishError(
                    f"{where}: hidden test directories may hold Python modules only (they are "
                    "run from memory, with no files around them): embed the data in a module"
                )
            if not in_tests and p.name.startswith("test_") and p.suffix == ".py":
                raise PublishError(f"{where}: hidden tests belong in {mirror.name}/tests/")
    for files, base in ((public, m.dir / "tests"), (hidden, mirror and mirror / "tests")):
        for name, text in files.items():
            if Path(name).name == "conftest.py":
                _check_conftest(text, f"{Path(base).relative_to(root).as_posix()}/{name}")
    return KataTests(rel, m.id, public, hidden)


def _check_conftest(text: str, where: str) -> None:
    tree = ast.parse(text, filename=where)
    hooks = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
             and n.name.startswith("pytest_")]  # fmt: skip
    if hooks:
        raise PublishError(
            f"{where}: defines {', '.join(hooks)}: kata conftest files may hold fixtures and "
            "helpers only (grade mode loads them in memory, without hooks)"
        )


def learner_path(rel: str, kata_dirs: set[str], all_kata_dirs: set[str]) -> bool:
    """Whether the file `rel` of the instructor tree ships in the learner tree, when the katas
    `kata_dirs` of `all_kata_dirs` are published."""
    if any(rel == p.rstrip("/") or rel.startswith(p) for p in DEVELOPER_ONLY):
        return False
    if _NEVER & set(Path(rel).parts):
        return False
    for d in all_kata_dirs - kata_dirs:  # katas not selected stay out
        if rel.startswith(d + "/"):
            return False
    return True


_TESTPATHS = re.compile(r"^testpaths\s*=.*$", re.M)


def _learner_text(rel: str, data: bytes) -> bytes:
    """The few rewrites a learner tree needs: plain `pytest` runs the katas there."""
    if rel == "pyproject.toml":
        text = data.decode()
        text = _TESTPATHS.sub('testpaths = ["katas"]', text, count=1)
        return text.encode()
    return data


def build(root: Path, out: Path, key: Key, ids: list[str] | None = None) -> Published:
    """Write `out`/learner and `out`/solutions (both replaced) for the katas `ids` (all: None)."""
    root = root.resolve()
    manifests = select_katas(root, list(ids or []))
    # Every katas/<phase>/<kata>/ counts, manifest or not: unselected ones stay out.
    all_dirs = {d.relative_to(root).as_posix() for d in discover(root)}
    all_dirs |= {d.relative_to(root).as_posix() for d in (root / "katas").glob("*/*") if d.is_dir()}
    dirs = {m.dir.relative_to(root).as_posix() for m in manifests}
    tests = [kata_tests(root, m) for m in manifests]
    learner, solutions = out / "learner", out / "solutions"
    for tree in (learner, solutions):
        if tree.exists():
            shutil.rmtree(tree)
        tree.mkdir(parents=True)
    learner_edited = {
        f"{m.dir.relative_to(root).as_posix()}/{f}" for m in manifests for f in m.files
    }
    published: list[str] = []
    for rel in source_files(root):
        if not learner_path(rel, dirs, all_dirs):
            continue
        dest = learner / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(_learner_text(rel, (root / rel).read_bytes()))
        shutil.copymode(root / rel, dest)
        published.append(rel)
    manifest = build_manifest(learner, [r for r in published if r not in learner_edited])
    data = manifest_bytes(manifest)
    (learner / MANIFEST_PATH).parent.mkdir(parents=True, exist_ok=True)
    (learner / MANIFEST_PATH).write_bytes(data)
    write_bundle(learner / BUNDLE_PATH, tests, key, hashlib.sha256(data).hexdigest())
    shutil.copytree(learner, solutions, dirs_exist_ok=True)
    for m in manifests:
        _lay_solutions(root, m, solutions)
    hidden = sum(t.hidden_tests for t in tests)
    return Published(
        learner, solutions, manifests, [*published, MANIFEST_PATH, BUNDLE_PATH], hidden
    )


def _lay_solutions(root: Path, m: Manifest, solutions: Path) -> None:
    mirror = solution_dir(m.dir)
    if mirror is None:
        return
    kata_rel = m.dir.relative_to(root)
    mirror_rel = mirror.relative_to(root)
    for p in sorted(mirror.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts:
            continue
        rel = p.relative_to(mirror)
        # Hidden tests stay in the mirror (collected from there); references replace the stubs.
        dest = solutions / (mirror_rel if rel.parts[0] == "tests" else kata_rel) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest)
