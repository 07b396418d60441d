"""`kata verify`: check that every kata holds its promises.

For each kata: the manifest is valid and its id unique; every test belongs to a task and every
task has tests; the reference solution passes every public and hidden test; the stubs are *not
started* on every test they run (never earning points, never failing); every shortcut under
``solutions/<kata>/shortcuts/`` is well-formed and earns at most half of the task it dodges
(:mod:`.shortcuts`). With ``--mutants[=N]``, N sampled mutants of each reference are run and
judged too (:mod:`.mutants`). Tests run in pytest subprocesses, the same way a learner runs
them, with results written to a private directory.

Seeds: the hidden tests draw fresh inputs from a run seed (:mod:`.seeds`). `kata verify` runs
with a fixed one (:data:`VERIFY_SEED`, or ``seed=``), so CI never goes red by luck; with
``fresh_seeds=K`` (``kata verify --seeds=K``) it also runs the reference on K fresh seeds and
reports each one it fails on, with the seed to reproduce it: a reference wrong on rare inputs.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import kata_layout, seeds
from .layout import rel as _rel
from .manifest import Manifest, ManifestError, discover, load_manifest
from .mutants import KataMutation, MutantOptions, mutate_kata
from .results import ERROR, FAILED, NOT_STARTED, PASSED, SKIPPED, RunResult, TestRecord
from .shortcuts import (
    FEWER_SHORTCUTS_IS_ERROR,
    MAX_SHARE,
    Shortcut,
    ShortcutScore,
    shortcuts,
    too_few,
)

VERIFY_SEED = seeds.VERIFY_SEED


@dataclass
class KataVerdict:
    kata: str
    path: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # not failures: e.g. tasks skipped for tier
    shortcuts: list[ShortcutScore] = field(default_factory=list)
    mutation: KataMutation | None = None  # `--mutants`: its sampled mutants, judged

    @property
    def ok(self) -> bool:
        return not self.problems


def run_pytest(
    paths: list[Path], root: Path, impl: str, extra: list[str], workdir: Path
) -> tuple[RunResult | None, str]:
    """Run pytest on `paths` with implementation `impl`; returns its results and its output."""
    report = workdir / f"{impl.replace(':', '-')}.json"
    cmd = [
        sys.executable, "-m", "pytest", *map(str, paths), f"--kata-impl={impl}",
        f"--kata-report=json:{report}", f"--kata-results-dir={workdir / 'results'}",
        "-p", "no:cacheprovider", "-q", "--no-header", "-rN", *extra,
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    if not report.exists():
        return None, output
    return RunResult.load(report), output


def verify(
    paths: list[Path],
    root: Path,
    extra: list[str] | None = None,
    run_shortcuts: bool = True,
    record: bool = False,
    mutants: MutantOptions | None = None,
    seed: int = VERIFY_SEED,
    fresh_seeds: int = 0,
    shortcut_sample: ShortcutSample | None = None,
) -> list[KataVerdict]:
    """`record`: write each passing kata's time_budget and [test_seconds] from the reference's
    run time. `mutants`: then sample and run mutants of each kata whose reference passes
    (`--mutants`). Every run uses run seed `seed`; `fresh_seeds` more runs of the reference each
    draw a fresh one. `shortcut_sample`: run only that many of each kata's shortcuts (a quick
    check; the whole set is what `kata verify` runs)."""
    extra = list(extra or [])
    if not any(a.startswith("--kata-seed") for a in extra):
        extra.append(f"--kata-seed={seed}")
    kata_dirs = sorted({d for p in paths for d in discover(p)})
    verdicts: dict[str, KataVerdict] = {}
    runnable: list[Path] = []
    seen_ids: dict[str, Path] = {}
    for d in kata_dirs:
        rel = _rel(d, root)
        try:
            m = load_manifest(d)
        except ManifestError as e:
            verdicts[rel] = KataVerdict(d.name, rel, [f"invalid manifest: {e}"])
            continue
        v = verdicts[rel] = KataVerdict(m.id, rel)
        if m.id in seen_ids:
            v.problems.append(f"kata id {m.id!r} is also used by {_rel(seen_ids[m.id], root)}")
        seen_ids[m.id] = d
        v.notes += _undeclared_modules(m)
        _judge_layout(m, v)
        runnable.append(d)
    if not runnable:
        return list(verdicts.values())

    by_path = {v.path: v for v in verdicts.values()}
    with tempfile.TemporaryDirectory(prefix="kata-verify-") as tmp:
        solution, sol_out = run_pytest(runnable, root, "solution", extra, Path(tmp))
        learner, learner_out = run_pytest(runnable, root, "learner", extra, Path(tmp))
        if run_shortcuts:
            for d in runnable:
                _judge_shortcuts(
                    load_manifest(d), by_path[_rel(d, root)], root, extra, Path(tmp),
                    shortcut_sample,
                )  # fmt: skip
        fixed = [a for a in extra if not a.startswith("--kata-seed")]
        for _ in range(fresh_seeds):
            other = seeds.fresh()
            run, output = run_pytest(
                runnable, root, "solution", [*fixed, f"--kata-seed={other}"], Path(tmp)
            )
            _judge_fresh_seed(run, output, other, runnable, root, by_path)
    for name, run, output in (("solution", solution, sol_out), ("learner", learner, learner_out)):
        if run is None:
            for d in runnable:
                by_path[_rel(d, root)].problems.append(
                    f"the {name} run produced no results:\n{output[-2000:]}"
                )
            return list(verdicts.values())
        for err in run.errors:
            for d in runnable:
                if _rel(d, root) in err or d.name in err:
                    by_path[_rel(d, root)].problems.append(f"{name} run: {err.splitlines()[0]}")
    _judge_solution(solution, by_path)
    _judge_learner(learner, by_path)
    if record:
        _record_budgets(solution, by_path, kata_dirs)
    if mutants is not None and mutants.count > 0:
        for d in runnable:
            v = by_path[_rel(d, root)]
            if any("reference fails" in p or p.startswith("reference run") for p in v.problems):
                v.notes.append("mutants: not run (the reference does not pass)")
                continue
            v.mutation = mutate_kata(
                load_manifest(d), root, extra=extra, options=mutants, reference=solution
            )
            v.problems += v.mutation.problems
            v.notes += v.mutation.notes
    return list(verdicts.values())


def _record_budgets(run: RunResult, by_path: dict[str, KataVerdict], dirs: list[Path]) -> None:
    from .budget_record import (
        budget_for,
        reference_seconds,
        test_seconds,
        write_budget,
        write_test_seconds,
    )

    manifests = {}
    for d in dirs:
        try:
            manifests[d.name] = load_manifest(d)
        except ManifestError:
            continue
    for k in run.katas:
        v = by_path.get(k.path)
        m = next((m for m in manifests.values() if m.id == k.id), None)
        if v is None or m is None or not v.ok:
            continue  # a failing reference's time says nothing
        seconds = reference_seconds(k)
        line = write_budget(m, budget_for(seconds, m.time_limit), seconds)
        v.notes.append(f"recorded in kata.toml: {line}")
        v.notes.append(f"recorded in kata.toml: {write_test_seconds(m, test_seconds(k))}")


def _judge_solution(run: RunResult, by_path: dict[str, KataVerdict]) -> None:
    for k in run.katas:
        v = by_path.get(k.path)
        if v is None:
            continue
        v.problems += [f"reference run: {_first_line(e)}" for e in k.errors]
        for t in k.tasks:
            if not t.tests:
                v.problems.append(f"task {t.id!r}: no test matches its patterns")
                continue
            for r in t.tests:
                if r.outcome in (FAILED, ERROR, NOT_STARTED):
                    msg = _first_line(r.message) or r.outcome
                    v.problems.append(f"task {t.id!r}: reference fails {r.name}: {msg}")
            if all(r.outcome == SKIPPED for r in t.tests):
                reasons = "; ".join(t.skip_reasons)
                v.notes.append(f"task {t.id!r}: not verified here ({reasons})")


def _judge_fresh_seed(
    run: RunResult | None,
    output: str,
    seed: int,
    dirs: list[Path],
    root: Path,
    by_path: dict[str, KataVerdict],
) -> None:
    """The reference on a fresh seed: every test it fails there is a problem, with the seed."""
    where = f"on fresh seed {seed} (--kata-seed={seed})"
    if run is None:
        for d in dirs:
            by_path[_rel(d, root)].problems.append(f"{where}: no results:\n{output[-2000:]}")
        return
    found: dict[str, KataVerdict] = {p: KataVerdict(v.kata, v.path) for p, v in by_path.items()}
    _judge_solution(run, found)
    for path, v in found.items():
        for problem in v.problems:
            by_path[path].problems.append(f"{where}: {problem}")
        if not v.problems and path in by_path:
            by_path[path].notes.append(f"reference passes {where}")


def _judge_learner(run: RunResult, by_path: dict[str, KataVerdict]) -> None:
    """Every stub is *not started* on every test it runs: never earning points, never failing."""
    for k in run.katas:
        v = by_path.get(k.path)
        if v is None:
            continue
        for t in k.tasks:
            ran = [r for r in t.tests if r.outcome != SKIPPED]
            passing = [r for r in ran if r.outcome == PASSED]
            if ran and len(passing) == len(ran):
                v.problems.append(
                    f"task {t.id!r}: the stub already passes every test of this task "
                    f"({_names(passing)})"
                )
            elif passing:
                v.problems.append(
                    f"task {t.id!r}: the stub earns points: {_names(passing)} "
                    f"{'passes' if len(passing) == 1 else 'pass'} with the stub "
                    "(a stub must be not started on every test)"
                )
            for r in ran:
                if r.outcome in (FAILED, ERROR):
                    v.problems.append(
                        f"task {t.id!r}: the stub fails {r.name} instead of being not started: "
                        f"{_first_line(r.message) or r.outcome}"
                    )


def _names(records: list[TestRecord], most: int = 8) -> str:
    """Test names in full (never cut in the middle), the first `most` of them."""
    names = [r.name for r in records]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _judge_layout(m: Manifest, verdict: KataVerdict) -> None:
    """docs/kata-layout.md, checked statically: each departure says what to move where."""
    for rule, sentence in kata_layout.check(m):
        if not kata_layout.enforced(rule, m.id):
            verdict.notes.append(f"layout ({rule}, not enforced yet): {sentence}")
        else:
            verdict.problems.append(f"layout ({rule}): {sentence}")


def _undeclared_modules(manifest: Manifest) -> list[str]:
    """Python modules of the kata that are neither learner files nor `given`: the oracle fence
    treats them as learner code (they may not import the grader's modules)."""
    if "given" not in manifest.raw:
        return ["no `given` list in kata.toml: only its `files` are fenced as learner code"]
    known = set(manifest.files) | set(manifest.given)
    loose = sorted(
        str(p.relative_to(manifest.dir))
        for p in manifest.dir.rglob("*.py")
        if "tests" not in p.relative_to(manifest.dir).parts and "__pycache__" not in p.parts
        and str(p.relative_to(manifest.dir)) not in known
    )  # fmt: skip
    return [f"{f}: neither a learner file nor given (the fence treats it as learner code)"
            for f in loose]  # fmt: skip


@dataclass(frozen=True)
class ShortcutSample:
    """Run `count` of each kata's shortcuts, drawn with `seed` (the sample is named in a note,
    so a failure is reproduced by running that kata's whole set)."""

    count: int
    seed: int


def _judge_shortcuts(
    manifest: Manifest,
    verdict: KataVerdict,
    root: Path,
    extra: list[str],
    workdir: Path,
    sample: ShortcutSample | None = None,
) -> None:
    found, problems = shortcuts(manifest)
    verdict.problems += problems
    few = too_few(manifest, len(found) + len(problems))
    if few:
        (verdict.problems if FEWER_SHORTCUTS_IS_ERROR else verdict.notes).append(few)
    if sample is not None and len(found) > sample.count:
        import random

        rng = random.Random(f"{sample.seed}:{manifest.id}")
        chosen = sorted(rng.sample(range(len(found)), sample.count))
        verdict.notes.append(
            f"{sample.count} of its {len(found)} shortcuts run (sample seed {sample.seed}: "
            + ", ".join(found[i].name for i in chosen)
            + "); `kata verify` without a sample runs them all"
        )
        found = [found[i] for i in chosen]
    jobs = max(1, min(manifest.shortcut_jobs, len(found)))
    if jobs > 1:  # a kata whose tests mostly wait: its shortcut runs overlap (kata.toml)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(jobs) as pool:
            scores = list(
                pool.map(lambda sc: score_shortcut(manifest, sc, root, extra, workdir), found)
            )
    else:
        scores = [score_shortcut(manifest, sc, root, extra, workdir) for sc in found]
    for sc, score in zip(found, scores, strict=True):
        verdict.shortcuts.append(score)
        if score.problem:
            verdict.problems.append(f"shortcut {sc.name!r}: {score.problem}")
            continue
        if score.errors:
            verdict.notes.append(f"shortcut {sc.name!r}: its run had errors ({score.errors[0]})")
        if score.skipped:
            verdict.notes.append(f"shortcut {sc.name!r}: not judged here ({score.skipped})")
        elif score.too_much:
            verdict.problems.append(
                f"shortcut {sc.name!r} earns {score.after:g} of task {sc.task!r}'s "
                f"{score.points} points (more than {MAX_SHARE:.0%}); no gate catches it: {sc.why}"
            )


def score_shortcut(
    manifest: Manifest, sc: Shortcut, root: Path, extra: list[str], workdir: Path
) -> ShortcutScore:
    """Run the shortcut's task against it; what it earns without and with the gates."""
    points = manifest.task(sc.task).points
    score = ShortcutScore(manifest.id, sc.name, sc.task, points)
    run, output = run_pytest(
        [manifest.dir], root, sc.impl, [*extra, f"--kata-task={sc.task}"], workdir
    )
    if run is None:
        score.problem = f"the run produced no results:\n{output[-2000:]}"
        return score
    kata = next((k for k in run.katas if k.id == manifest.id), None)
    errors = [*run.errors, *(kata.errors if kata else [])]
    task = next((t for t in kata.tasks if t.id == sc.task), None) if kata else None
    # A shortcut that crashes or hangs in some tests (a racy allocator killed by SIGILL) is
    # judged on what it earned: its crashed tests failed. A run where none of its task's tests
    # got to a verdict says nothing about the shortcut, and is a problem of the shortcut itself.
    judged = task is not None and any(r.outcome in (PASSED, FAILED) for r in task.tests)
    if kata is None or (errors and not judged):
        score.problem = "the run failed: " + (errors[0].splitlines()[0] if errors else "no kata")
        return score
    if not task.tests:
        score.problem = "no test of its task ran"
        return score
    score.errors = [e.splitlines()[0] for e in errors]
    if not judged:
        score.errors.append("none of its task's tests reached a verdict: is the shortcut broken?")
    score.before, score.after, score.gates = task.earned_before_gate, task.earned, task.gate_reasons
    skipped_gates = [r for r in task.tests if r.gate and r.outcome == SKIPPED]
    if all(r.outcome == SKIPPED for r in task.tests) or (score.too_much and skipped_gates):
        # The gates that would judge it need what this machine lacks: a note, not a failure.
        score.skipped = "; ".join(task.skip_reasons) or "its tests were skipped"
    return score
