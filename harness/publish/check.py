"""``kata publish --check``: no line of reference code or hidden test in the learner tree.

Every line of every file under a published kata's ``solutions/`` mirror is normalised (outer
and repeated whitespace collapsed, a trailing comment dropped) and fingerprinted, the way
nbgrader checksums its solution cells; trivial lines are left out (blank, comments, imports,
lines with fewer than 12 letters and digits). So are lines that a file the learner tree ships
from the instructor tree also has, prose aside (a stub's signatures and docstrings, a fixture
the public tests share, ``@pytest.mark.parametrize(``, a line of the harness's
``templates/new_kata/test_hidden.py.j2``): what is published is published on purpose, and
whether a stub already solves its task is what ``kata verify`` checks. Prose (``*.md``,
``docs/``, ``kata.toml``) does not count: that is where a quote of the reference is a leak.
Every other fingerprint is a secret. Any line of the learner tree that has one is a leak: a
builder bug, a plaintext hidden test where it should not be, or a worked example in a README, a
``kata.toml`` hint or ``docs/`` that quotes the reference.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..hidden.integrity import BUNDLE_PATH
from ..layout import solution_dir
from ..manifest import Manifest
from .trees import learner_path, source_files

MIN_ALNUM = 12
_IMPORT = re.compile(r"^(import\s|from\s+\S+\s+import\s|#\s*include\s|using\s|package\s)")
_COMMENT_ONLY = re.compile(r"^(#|//|/\*|\*|--|;)")
_PY_TRAILING = re.compile(r"\s+#\s[^'\"]*$")  # "x = 1  # note", not a '#' inside a string
_C_TRAILING = re.compile(r"\s+//[^'\"]*$")
_QUOTES_ONLY = re.compile(r'^[rbuf]?("""|\'\'\')$')
_SKIP_FILES = {BUNDLE_PATH}


def normalise(line: str) -> str:
    text = " ".join(line.split())
    text = _PY_TRAILING.sub("", text)
    return _C_TRAILING.sub("", text).strip()


def trivial(norm: str) -> bool:
    if not norm or _COMMENT_ONLY.match(norm) or _IMPORT.match(norm) or _QUOTES_ONLY.match(norm):
        return True
    return sum(c.isalnum() for c in norm) < MIN_ALNUM


def fingerprint(norm: str) -> str:
    return hashlib.sha256(norm.encode()).hexdigest()[:20]


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (UnicodeDecodeError, OSError):
        return []  # binary files hold no lines of source


def _norms(paths: list[Path]) -> set[str]:
    return {normalise(line) for p in paths for line in _lines(p)}


# Files whose lines are prose: a reference quoted there is a leak, never published on purpose.
PROSE_SUFFIXES = {".md", ".rst", ".txt", ".html"}
PROSE_NAMES = {"kata.toml"}


def _prose(rel: str) -> bool:
    path = Path(rel)
    return path.parts[0] == "docs" or path.suffix in PROSE_SUFFIXES or path.name in PROSE_NAMES


def published_code(root: Path) -> set[str]:
    """Normalised lines of the files publish ships from the instructor tree (every kata's),
    prose aside: the harness and its templates, stubs, public tests, workflows."""
    kata_dirs = {d.relative_to(root).as_posix() for d in (root / "katas").glob("*/*") if d.is_dir()}
    paths = [
        root / rel
        for rel in source_files(root)
        if learner_path(rel, kata_dirs, kata_dirs) and not _prose(rel)
    ]
    return _norms(paths)


def secrets(root: Path, manifests: list[Manifest]) -> dict[str, str]:
    """Fingerprint -> where it comes from (``solutions/phase01/simt/simt.py:42``)."""
    out: dict[str, str] = {}
    public = published_code(root)
    for m in manifests:
        mirror = solution_dir(m.dir)
        if mirror is None:
            continue
        for p in sorted(mirror.rglob("*")):
            if not p.is_file() or "__pycache__" in p.parts:
                continue
            origin = p.relative_to(root).as_posix()
            for i, line in enumerate(_lines(p), 1):
                norm = normalise(line)
                if not trivial(norm) and norm not in public:
                    out.setdefault(fingerprint(norm), f"{origin}:{i}")
    return out


@dataclass(frozen=True)
class Leak:
    file: str  # in the learner tree
    line: int
    origin: str  # the solutions/ line it repeats

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: repeats {self.origin}"


def scan(tree: Path, secret: dict[str, str]) -> list[Leak]:
    leaks = []
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree).as_posix()
        if not p.is_file() or rel in _SKIP_FILES or ".git" in p.relative_to(tree).parts:
            continue
        for i, line in enumerate(_lines(p), 1):
            fp = fingerprint(normalise(line))
            if fp in secret:
                leaks.append(Leak(rel, i, secret[fp]))
    return leaks
