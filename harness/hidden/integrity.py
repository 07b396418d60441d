"""The hash manifest of a published learner tree (``grading/integrity.json``) and its check.

Written by ``kata publish``: the SHA-256 of every file it published, with a role:

- ``harness``: decides a grade (the harness, ``kata.toml``, given helper modules, the project
  and workflow files). In grade mode a changed, missing or added harness file is *tampering*;
- ``test``: public tests. Grade mode runs the canonical copies from the bundle, so an edited
  test is only noted ("not used for grading");
- ``doc``: Markdown; never checked.

Files a kata's manifest lists as learner-edited are not in it: they are the learner's work.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..layout import KATAS, RESULTS_DIR, TESTS

MANIFEST_PATH = "grading/integrity.json"
BUNDLE_PATH = "grading/hidden.bundle"
HARNESS, TEST, DOC = "harness", "test", "doc"
# Directories where a file that publish did not write counts as tampering (a new plugin module).
_WATCHED_DIRS = ("harness/",)
_SKIP_PARTS = {"__pycache__", ".pytest_cache", ".hypothesis", RESULTS_DIR, ".git", ".venv"}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def role_of(rel: str) -> str:
    parts = Path(rel).parts
    if rel.endswith(".md"):
        return DOC
    if parts[:1] == (KATAS,) and TESTS in parts:
        return TEST
    return HARNESS


def build_manifest(tree: Path, files: list[str]) -> dict:
    """The manifest of `files` (paths relative to `tree`)."""
    entries = {rel: {"sha256": sha256_file(tree / rel), "role": role_of(rel)} for rel in files}
    return {"format": 1, "files": dict(sorted(entries.items()))}


def manifest_bytes(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()


@dataclass
class IntegrityReport:
    tampered: list[str] = field(default_factory=list)  # sentences, one per file
    ignored: list[str] = field(default_factory=list)  # edited tests (canonical copies used)

    @property
    def ok(self) -> bool:
        return not self.tampered


def check_tree(tree: Path, manifest_data: bytes, where: str = MANIFEST_PATH) -> IntegrityReport:
    """Compare `tree` with its manifest (the bytes of ``grading/integrity.json``)."""
    report = IntegrityReport()
    try:
        files = json.loads(manifest_data)["files"]
        if not isinstance(files, dict):
            raise TypeError("'files' is not an object")
    except (ValueError, KeyError, TypeError) as e:
        report.tampered.append(f"{where}: not a valid hash manifest ({e})")
        return report
    for rel, entry in files.items():
        role = entry.get("role", HARNESS)
        if role == DOC:
            continue
        path = tree / rel
        if not path.is_file():
            if role == HARNESS:
                report.tampered.append(f"{rel}: deleted (it was published)")
            continue
        if sha256_file(path) != entry.get("sha256"):
            if role == HARNESS:
                report.tampered.append(f"{rel}: changed since it was published")
            else:
                report.ignored.append(f"{rel}: edited; the published copy is graded instead")
    for top in _WATCHED_DIRS:
        base = tree / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(tree).as_posix()
            if path.is_file() and not _SKIP_PARTS & set(path.parts) and rel not in files:
                if not path.name.endswith((".pyc", ".pyo")):
                    report.tampered.append(f"{rel}: added (publish did not write it)")
    return report
