"""What every grader does: lay a submission over a scratch copy of the course, run the katas,
and make sure a results file exists even when the run itself fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..layout import RESULTS_DIR, results_dir
from ..manifest import Manifest, ManifestError, discover, load_manifest

# Never copied into the scratch course: caches, environments, previous results.
_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", ".pytest_cache", RESULTS_DIR, "*.pyc"
)


class GraderError(Exception):
    """The submission or the course cannot be graded; the message is shown to the learner."""


@dataclass
class Placed:
    """What was taken from the submission, per kata id."""

    files: dict[str, list[str]] = field(default_factory=dict)


def scratch_course(course: Path, work: Path) -> Path:
    """A copy of the course without reference solutions: only hidden *tests* stay in
    solutions/, so learner code running in the grader finds no reference code next to it."""
    dest = work / "course"
    shutil.copytree(course, dest, ignore=_IGNORE, symlinks=False)
    solutions = dest / "solutions"
    if solutions.is_dir():
        for path in sorted(solutions.rglob("*"), reverse=True):
            if path.is_file() and "tests" not in path.relative_to(solutions).parts:
                path.unlink()
    return dest


def _manifests(course: Path) -> list[Manifest]:
    out = []
    for kata_dir in discover(course):
        try:
            out.append(load_manifest(kata_dir))
        except ManifestError:
            # A broken manifest is graded as an error by the run itself (collection error).
            continue
    return out


def place_submission(course: Path, submission: Path, katas: list[str]) -> Placed:
    """Copy the learner's files into the scratch course.

    A submission is either a learner repository (``katas/phase01/simt/simt.py``) or loose files
    (``simt.py``), matched by name to the learner-edited files of the selected katas. Only files
    a manifest lists in ``files`` are taken, so a submission cannot replace tests.
    """
    placed = Placed()
    manifests = [m for m in _manifests(course) if not katas or m.id in katas]
    unknown = set(katas) - {m.id for m in _manifests(course)}
    if unknown:
        raise GraderError(f"unknown kata(s) {', '.join(sorted(unknown))} in this course")
    by_name: dict[str, list[tuple[Manifest, str]]] = {}
    for m in manifests:
        for rel in m.files:
            by_name.setdefault(Path(rel).name, []).append((m, rel))
    for m in manifests:
        rel_dir = m.dir.relative_to(course)
        for rel in m.files:
            candidates = [submission / rel_dir / rel, submission / m.id / rel]
            if len(by_name[Path(rel).name]) == 1:
                candidates.append(submission / Path(rel).name)
            src = next((c for c in candidates if c.is_file()), None)
            if src is None:
                continue
            dest = m.dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            placed.files.setdefault(m.id, []).append(rel)
    return placed


def run_katas(
    course: Path,
    targets: list[str],
    report_args: list[str],
    workers: str = "2",
    extra: list[str] | None = None,
    timeout: float = 1800,
) -> subprocess.CompletedProcess[str]:
    """One pytest run over `targets` in the scratch course, under xdist when it is installed."""
    args = [sys.executable, "-m", "pytest", *targets, "-p", "no:cacheprovider", "-q"]
    args.append(
        "--kata-grade"
    )  # the canonical tests (course or bundle) count, never a submission's
    args += ["--kata-results-dir", str(results_dir(course)), *report_args, *(extra or [])]
    if not _plugin_installed():
        args += ["-p", "harness.plugin"]  # the course copy's harness, found from the cwd
    try:
        import xdist  # noqa: F401

        if workers not in ("0", ""):
            args += ["-n", workers]
    except ImportError:
        pass
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("GITHUB_STEP_SUMMARY", None)  # graders keep their own summaries
    return subprocess.run(
        args, cwd=course, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _plugin_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "harness.plugin" for ep in entry_points(group="pytest11"))


def targets_for(course: Path, katas: list[str], placed: Placed) -> list[str]:
    """The kata directories to run: those asked for, else those the submission touched."""
    wanted = katas or sorted(placed.files)
    if not wanted:
        raise GraderError(
            "the submission holds none of the katas' files "
            f"(expected e.g. {_expected(course)}); nothing to grade"
        )
    dirs = {m.id: m.dir for m in _manifests(course)}
    return [str(dirs[k].relative_to(course)) for k in wanted]


def _expected(course: Path) -> str:
    names = [f"{m.dir.relative_to(course)}/{f}" for m in _manifests(course) for f in m.files]
    return ", ".join(names[:3]) or "no kata files in the course"


def grade(
    course: Path,
    submission: Path,
    results: Path,
    fmt: str,
    katas: list[str],
    fallback: Callable[[str], dict],
    extra: list[str] | None = None,
    workers: str = "2",
) -> int:
    """Grade `submission`; the results file in format `fmt` is written whatever happens."""
    results.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kata-grade-") as tmp:
        try:
            work = scratch_course(course, Path(tmp))
            placed = place_submission(work, submission, katas)
            targets = targets_for(work, katas, placed)
            proc = run_katas(work, targets, [f"--kata-report={fmt}:{results}"], workers, extra)
            sys.stdout.write(proc.stdout[-20000:])
            sys.stderr.write(proc.stderr[-5000:])
            if not results.is_file():
                tail = (proc.stdout + proc.stderr).strip()[-1500:]
                raise GraderError(
                    f"the test run ended (exit {proc.returncode}) without results:\n{tail}"
                )
        except GraderError as e:
            results.write_text(json.dumps(fallback(str(e)), indent=1), encoding="utf-8")
        except (OSError, subprocess.TimeoutExpired) as e:
            results.write_text(
                json.dumps(fallback(f"grader failure: {e}"), indent=1), encoding="utf-8"
            )
    return 0  # graders want exit 0 once a results file is there
