"""The one results model: kata -> task -> tests, with points, status, messages and hints.

Built on the controller from test reports (so it is right under ``-n 2`` and when a worker
crashes), then rendered by the terminal summary and every report writer. Points come from the
manifest's tasks: a task's points are split over its tests by weight (partial credit), never
from a count of passes.
"""

from __future__ import annotations

import json
import math
import re
import time
import tomllib
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import Any

from . import layout
from .atomic import write_json
from .manifest import TRACKS, Manifest, ManifestError, find_kata_dir, load_manifest, where

# Test outcomes, from the learner's point of view.
PASSED, FAILED, NOT_STARTED, SKIPPED, ERROR = "passed", "failed", "not_started", "skipped", "error"
# Statuses: the one vocabulary every format says of a task, a kata and a run (the terminal,
# HTML, Markdown, JSON, JUnit and the graders' free-text fields; the graders' own pass/fail
# fields are mapped from it). A missing tier or capability is a skip, never a failure.
TASK_PASSED = STATUS_PASSED = "passed"
TASK_PASSED_WITH_SKIPS = STATUS_PASSED_WITH_SKIPS = (
    "passed with skips"  # the rest could not run here
)
TASK_FAILING = STATUS_FAILING = "failing"
TASK_IN_PROGRESS = STATUS_IN_PROGRESS = "in progress"  # some pass, the rest not started yet
TASK_NOT_STARTED = STATUS_NOT_STARTED = "not started"
TASK_SKIPPED = STATUS_SKIPPED = "skipped"  # nothing of it can run on this machine (or grader)
TASK_NOT_RUN = STATUS_NOT_RUN = "not run"  # none of its tests was selected in this run
STATUS_ERROR = "error"  # a kata or run with errors (a crash, a broken manifest, a cut-short kata)
STATUSES = (
    STATUS_PASSED, STATUS_PASSED_WITH_SKIPS, STATUS_FAILING, STATUS_IN_PROGRESS,
    STATUS_NOT_STARTED, STATUS_SKIPPED, STATUS_NOT_RUN, STATUS_ERROR,
)  # fmt: skip
PASSING_STATUSES = (STATUS_PASSED, STATUS_PASSED_WITH_SKIPS)  # what a grader's "pass" is


def task_status(outcomes: set[str]) -> str:
    """A task's status from its tests' outcomes (an empty set: none ran)."""
    if not outcomes:
        return STATUS_NOT_RUN
    if outcomes & {FAILED, ERROR}:
        return STATUS_FAILING
    if outcomes == {PASSED}:
        return STATUS_PASSED
    if outcomes == {SKIPPED}:
        return STATUS_SKIPPED
    if outcomes == {PASSED, SKIPPED}:
        return STATUS_PASSED_WITH_SKIPS
    if PASSED in outcomes:
        return STATUS_IN_PROGRESS
    return STATUS_NOT_STARTED


def combined_status(statuses: list[str], error: bool = False) -> str:
    """A kata's status from its tasks', or a run's from its katas'."""
    found = set(statuses)
    if error or STATUS_ERROR in found:
        return STATUS_ERROR
    if STATUS_FAILING in found:
        return STATUS_FAILING
    if found and found <= {STATUS_PASSED}:
        return STATUS_PASSED
    if found and found <= {STATUS_PASSED, STATUS_PASSED_WITH_SKIPS, STATUS_SKIPPED}:
        return STATUS_PASSED_WITH_SKIPS if found & set(PASSING_STATUSES) else STATUS_SKIPPED
    if found & {STATUS_PASSED, STATUS_PASSED_WITH_SKIPS, STATUS_IN_PROGRESS}:
        return STATUS_IN_PROGRESS
    return STATUS_NOT_STARTED


@dataclass
class TestRecord:
    nodeid: str
    name: str  # function name with parametrize id, e.g. "test_add[3]"
    file: str  # test file name, e.g. "test_simt.py"
    kata: str
    task: str | None
    hidden: bool
    outcome: str  # PASSED, FAILED, NOT_STARTED, SKIPPED, ERROR
    message: str = ""  # learner-facing; for hidden tests the assertion message only
    duration: float = 0.0
    weight: float = 1.0
    skip_reason: str = ""
    tier_skip: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)  # budgets: {"ratio": 1.3, ...}
    line: int | None = None
    source: str = ""  # failing source lines (public tests only)
    output: str = ""  # captured stdout/stderr of a failing public test, capped
    gate: str = ""  # a gate test's sentence (@pytest.mark.kata_gate), whatever its outcome
    seq: int = -1  # position in pytest's collection order (test-file order); -1: unknown
    missing: str = ""  # the tier or capability this machine lacks, when that skipped the test
    hint: str = ""  # the task's hint for this failure (the one that belongs to this test)
    raised: str = ""  # it failed on an exception of the learner's code (or sources that do not
    # load), not on the test's check: "ZeroDivisionError in kv_math.py:12" (any failed test)

    @property
    def ok(self) -> bool:
        return self.outcome == PASSED

    @property
    def gate_failed(self) -> bool:
        """A gate that caught its shortcut: its check failed. Not a test that never started or
        was skipped, nor one the learner's code stopped with an exception (an honest mistake,
        not a shortcut: the test earns nothing, the task is not capped)."""
        return bool(self.gate) and self.outcome in (FAILED, ERROR) and not self.raised


@dataclass
class TaskResult:
    id: str
    title: str
    points: int
    hints: list[str]
    tests: list[TestRecord] = field(default_factory=list)
    gate_fraction: float = 0.0  # the most a task with a failed gate earns, as a share of points
    excused: str = ""  # why this grader leaves the task out of the possible points (grade mode)

    @property
    def possible(self) -> int:
        """The points this run can award: none for an excused task."""
        return 0 if self.excused else self.points

    @property
    def unit(self) -> float:
        """The granularity of this task's per-test points: 1/4, or 1/2^k for the smallest k
        (at most 20) that gives every weighted test a non-zero share. Dyadic fractions add up exactly
        in IEEE doubles in any order, so the graders' own sums (JavaScript in GitHub's reporter,
        Gradescope's max_score) equal the terminal total."""
        return 1.0 / _denominator(self.possible, [t.weight for t in self.tests])

    @property
    def shares(self) -> list[float]:
        """Each test's share of the task's points, by weight, in multiples of :attr:`unit`.

        Rounded on the running total, so the shares add up to `points` exactly.
        """
        return _split(self.possible, [t.weight for t in self.tests])

    @property
    def gate_reasons(self) -> list[str]:
        """The sentences of this task's failed gates, each once, in test order."""
        return list(dict.fromkeys(t.gate for t in self.tests if t.gate_failed))

    @property
    def gate_cap(self) -> float:
        """The most this task earns while a gate fails: gate_fraction of its points, rounded
        down to a multiple of :attr:`unit` (so it, too, adds up exactly)."""
        d = _denominator(self.possible, [t.weight for t in self.tests])
        return math.floor(self.possible * self.gate_fraction * d + 1e-9) / d

    @property
    def earned_before_gate(self) -> float:
        """What the passing tests are worth, as if no gate had failed."""
        return sum(s for s, t in zip(self.shares, self.tests, strict=True) if t.ok)

    @property
    def scores(self) -> list[float]:
        """Each test's earned points: its share when it passed, scaled down when a gate failed.

        Under a failed gate the passing tests split min(earned, cap) by their shares, rounded
        on the running total in multiples of :attr:`unit`, so the scores add up to
        :attr:`earned` exactly in every report (and in the graders' own sums).
        """
        raw = [s if t.ok else 0.0 for s, t in zip(self.shares, self.tests, strict=True)]
        d = _denominator(self.possible, [t.weight for t in self.tests])
        total = round(sum(raw) * d)  # exact: the shares are multiples of 1/d
        limit = min(total, round(self.gate_cap * d)) if self.gate_reasons else total
        if limit == total or not total:
            return raw
        out, running, edge = [], 0, 0
        for s in raw:
            running += round(s * d)
            nxt = round(limit * running / total)
            out.append((nxt - edge) / d)
            edge = nxt
        return out

    @property
    def earned(self) -> float:
        return sum(self.scores)  # exact: the scores are dyadic

    @property
    def status(self) -> str:
        if self.excused:
            return TASK_SKIPPED
        return task_status({t.outcome for t in self.tests})

    @property
    def failure_hints(self) -> list[str]:
        """The hints for what failed, each once, in test order; for a task that has no failure
        yet (not started, in progress), its first hint."""
        failed = [t for t in self.tests if t.outcome in (FAILED, ERROR)]
        if failed:  # none when what failed has no hint (a syntax error, a hint for other tests)
            return list(dict.fromkeys(t.hint for t in failed if t.hint))
        if self.status in (TASK_IN_PROGRESS, TASK_NOT_STARTED) and self.hints:
            return [self.hints[0]]
        return []

    @property
    def skip_reasons(self) -> list[str]:
        reasons = {t.skip_reason for t in self.tests if t.outcome == SKIPPED and t.skip_reason}
        return [self.excused] * bool(self.excused) + sorted(reasons)


@dataclass
class KataResult:
    id: str
    title: str
    phase: int
    path: str  # kata directory, relative to the root
    tasks: list[TaskResult]
    errors: list[str] = field(default_factory=list)  # collection errors, unassigned tests
    warnings: list[str] = field(default_factory=list)  # e.g. a task that matches no test
    notes: list[str] = field(default_factory=list)  # the learner's: a syntax error, said once
    track: str = ""  # "system-design", "interview-prep"; "" for a phase's kata

    @property
    def points(self) -> int:
        return sum(t.possible for t in self.tasks)

    @property
    def where(self) -> str:
        return where(self.phase, self.track)

    @property
    def earned(self) -> float:
        return sum(t.earned for t in self.tasks)

    @property
    def next_task(self) -> TaskResult | None:
        """The first task, in manifest order, that the learner can still make progress on."""
        for t in self.tasks:
            if t.status in (TASK_FAILING, TASK_IN_PROGRESS, TASK_NOT_STARTED):
                return t
        return None

    @property
    def status(self) -> str:
        """One of :data:`STATUSES`, from its tasks' (a task left out by the grader aside)."""
        graded = [t.status for t in self.tasks if not t.excused]
        return combined_status(graded or [STATUS_SKIPPED], error=bool(self.errors))


@dataclass
class RunResult:
    katas: list[KataResult]
    impl: str = "learner"
    tiers: list[str] = field(default_factory=list)
    started: float = 0.0
    duration: float = 0.0
    errors: list[str] = field(default_factory=list)  # run-level errors (outside any kata)
    exit_status: int | None = None
    notes: list[str] = field(default_factory=list)  # what the reports must say (excused tasks)
    seed: int | None = None  # the run seed the hidden tests drew their inputs from (--kata-seed)

    @property
    def points(self) -> int:
        return sum(k.points for k in self.katas)

    @property
    def earned(self) -> float:
        return sum(k.earned for k in self.katas)

    @property
    def status(self) -> str:
        """One of :data:`STATUSES`, from its katas'; a run that found no kata is an error."""
        katas = [k.status for k in self.katas]
        return combined_status(katas, error=bool(self.errors) or not self.katas)

    def kata(self, kata_id: str) -> KataResult:
        for k in self.katas:
            if k.id == kata_id:
                return k
        raise KeyError(kata_id)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["points"], d["earned"], d["status"] = self.points, self.earned, self.status
        for kd, k in zip(d["katas"], self.katas, strict=True):
            kd["points"], kd["earned"], kd["status"] = k.points, k.earned, k.status
            for td, t in zip(kd["tasks"], k.tasks, strict=True):
                td["earned"], td["status"] = t.earned, t.status
                td["earned_before_gate"], td["gate_reasons"] = t.earned_before_gate, t.gate_reasons
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        katas = []
        for kd in d["katas"]:
            tasks = [
                TaskResult(
                    t["id"],
                    t["title"],
                    t["points"],
                    list(t["hints"]),
                    [TestRecord(**r) for r in t["tests"]],
                    t.get("gate_fraction", 0.0),
                    t.get("excused", ""),
                )
                for t in kd["tasks"]
            ]
            katas.append(
                KataResult(
                    kd["id"],
                    kd["title"],
                    kd["phase"],
                    kd["path"],
                    tasks,
                    kd["errors"],
                    list(kd.get("warnings", [])),
                    list(kd.get("notes", [])),
                    kd.get("track", ""),
                )
            )
        return cls(
            katas,
            d.get("impl", "learner"),
            d.get("tiers", []),
            d.get("started", 0.0),
            d.get("duration", 0.0),
            d.get("errors", []),
            d.get("exit_status"),
            list(d.get("notes", [])),
            d.get("seed"),
        )

    def save(self, path: Path) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: Path) -> RunResult:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))


# --------------------------------------------------------------------------- building the model
@lru_cache(maxsize=1024)
def kata_of_file(path: Path) -> Path | None:
    return find_kata_dir(path)


def split_nodeid(nodeid: str) -> tuple[str, str]:
    """("katas/phase01/simt/tests/test_simt.py", "test_add[3]") from a node id."""
    file_part, _, rest = nodeid.partition("::")
    return file_part, rest.rsplit("::", 1)[-1]


class ResultBuilder:
    """Collects test reports into a RunResult. Lives on the controller only."""

    def __init__(self, root: Path, impl: str, tiers: list[str], seed: int | None = None) -> None:
        self.root, self.impl, self.tiers, self.seed = root, impl, tiers, seed
        self.started = time.time()
        self.records: dict[str, TestRecord] = {}
        self.katas: dict[Path, Manifest] = {}
        self.kata_errors: dict[Path, list[str]] = {}
        self.bad_manifests: dict[Path, str] = {}  # kata dir -> why its manifest does not load
        self.kata_notes: dict[Path, list[str]] = {}
        self.errors: list[str] = []
        self.warnings: list[str] = []  # "kata <id>: ..." sentences, each once
        self.order: dict[str, int] = {}  # node id -> position in collection order

    def set_order(self, nodeids: list[str]) -> None:
        """Record the collection order (test-file order); ids seen before keep their place."""
        for nodeid in nodeids:
            self.order.setdefault(nodeid, len(self.order))

    def manifest_for(self, file_part: str) -> Manifest | None:
        kata_dir = kata_of_file((self.root / file_part).resolve())
        if kata_dir is None:
            return None
        if kata_dir in self.bad_manifests:
            return None  # said once already
        if kata_dir not in self.katas:
            try:
                self.katas[kata_dir] = load_manifest(kata_dir)
            except ManifestError as e:
                self.bad_manifests[kata_dir] = str(e)
                self.errors.append(str(e))
                return None
        return self.katas[kata_dir]

    def add_collect_error(self, nodeid: str, message: str) -> None:
        path = (self.root / nodeid.split("::")[0]).resolve()
        kata_dir = kata_of_file(path) if nodeid else None
        if kata_dir is not None and self.manifest_for(nodeid.split("::")[0]) is not None:
            self.kata_errors.setdefault(kata_dir, []).append(message)
        elif kata_dir is None or self.bad_manifests.get(kata_dir, "\0") not in message:
            self.errors.append(message)  # (a broken manifest's own collection error is said)

    def add_note(self, nodeid: str, message: str) -> None:
        """A learner-facing note on the kata (not an error: the grade stands as it is)."""
        kata_dir = kata_of_file((self.root / nodeid.split("::")[0]).resolve())
        if kata_dir is not None and self.manifest_for(nodeid.split("::")[0]) is not None:
            notes = self.kata_notes.setdefault(kata_dir, [])
            if message not in notes:
                notes.append(message)

    def add(self, record: TestRecord) -> None:
        previous = self.records.get(record.nodeid)
        # setup/call/teardown each report; the worst outcome wins, durations add up.
        if previous is not None:
            record.duration += previous.duration
            if _rank(previous.outcome) > _rank(record.outcome):
                previous.duration = record.duration
                return
        self.records[record.nodeid] = record

    def add_warning(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def has_outcome(self, outcome: str) -> bool:
        return any(r.outcome == outcome for r in self.records.values())

    def new_record(self, nodeid: str, **fields: Any) -> TestRecord | None:
        """A record for `nodeid` with kata, task and weight filled in from its manifest."""
        file_part, name = split_nodeid(nodeid)
        manifest = self.manifest_for(file_part)
        if manifest is None:
            return None
        file_name = Path(file_part).name
        task = manifest.task_for(file_name, name)
        weight = task.weight_of(file_name, name.split("[", 1)[0]) if task else 1.0
        hidden = fields.pop("hidden", False) or layout.is_hidden_path(file_part)
        return TestRecord(
            nodeid=nodeid,
            name=name,
            file=file_name,
            kata=manifest.id,
            task=task.id if task else None,
            hidden=hidden,
            weight=weight,
            **fields,
        )

    def build(self, exit_status: int | None = None) -> RunResult:
        by_kata: dict[str, list[TestRecord]] = {}
        unknown = len(self.order)  # tests that were never in a collection list go last
        for r in self.records.values():
            r.seq = self.order.get(r.nodeid, unknown)
            by_kata.setdefault(r.kata, []).append(r)
        katas = []
        for kata_dir, m in sorted(self.katas.items(), key=lambda kv: (kv[1].phase, kv[1].id)):
            records = by_kata.get(m.id, [])
            errors = list(self.kata_errors.get(kata_dir, []))
            tasks = []
            for t in m.tasks:
                tests = sorted(
                    (r for r in records if r.task == t.id), key=lambda r: (r.seq, r.nodeid)
                )
                tasks.append(
                    TaskResult(t.id, t.title, t.points, list(t.hints), tests, t.gate_fraction)
                )
            for r in records:
                if r.task is None:
                    errors.append(f"{r.nodeid}: belongs to no task in {m.path.name}")
            rel = layout.rel(kata_dir, self.root)
            mine = [w for w in self.warnings if w.startswith(f"kata {m.id}: ")]
            notes = list(self.kata_notes.get(kata_dir, []))
            katas.append(
                KataResult(m.id, m.title, m.phase, rel, tasks, errors, mine, notes, m.track)
            )
        for kata_dir in sorted(self.bad_manifests):
            broken = _broken_kata(kata_dir, self.root)
            if broken.tasks:  # points to keep in the denominator
                katas.append(broken)
        return RunResult(
            katas,
            self.impl,
            self.tiers,
            self.started,
            round(time.time() - self.started, 3),
            self.errors,
            exit_status,
            seed=self.seed,
        )


_MAX_DENOMINATOR = 1 << 20  # sums of such shares stay exact below 2**32 points


def _split_in(points: int, weights: list[float], denominator: int) -> list[int]:
    """Shares of `points` in units of 1/denominator, rounded on the running total."""
    running = list(accumulate(weights))  # plain left-to-right sums: the last one is the total
    total, units = running[-1], points * denominator
    out, edge = [], 0
    for i, r in enumerate(running):
        nxt = units if i == len(running) - 1 else round(units * r / total)
        out.append(nxt - edge)
        edge = nxt
    return out


def _denominator(points: int, weights: list[float]) -> int:
    if not sum(weights) or not points:
        return 4
    d = 4  # quarter points at most: displays keep two decimals unless a test needs finer
    while d < _MAX_DENOMINATOR:
        units = _split_in(points, weights, d)
        if all(u > 0 for u, w in zip(units, weights, strict=True) if w > 0):
            break
        d *= 2
    return d


def _split(points: int, weights: list[float]) -> list[float]:
    if not sum(weights) or not points:
        return [0.0] * len(weights)
    d = _denominator(points, weights)
    return [u / d for u in _split_in(points, weights, d)]


def _broken_kata(kata_dir: Path, root: Path) -> KataResult:
    """A kata whose manifest does not load, with the points its tasks would carry (read as far
    as the file allows), all unearned: a broken kata.toml never shrinks the possible points."""
    text = ""
    try:
        text = (kata_dir / "kata.toml").read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, ValueError):
        data = {}
    raw = data.get("tasks") if isinstance(data.get("tasks"), list) else None
    tasks: list[TaskResult] = []
    if raw is not None:
        for i, t in enumerate(raw):
            if isinstance(t, dict) and isinstance(t.get("points"), int) and t["points"] > 0:
                tid = str(t.get("id", f"task{i + 1}"))
                tasks.append(TaskResult(tid, str(t.get("title", tid)), t["points"], []))
    else:  # not even TOML: the [[tasks]] blocks' points = N lines
        for i, block in enumerate(re.split(r"^\s*\[\[tasks\]\]", text, flags=re.M)[1:]):
            m = re.search(r"^\s*points\s*=\s*(\d+)", block, re.M)
            tid = re.search(r'^\s*id\s*=\s*"([^"]+)"', block, re.M)
            if m and int(m.group(1)) > 0:
                name = tid.group(1) if tid else f"task{i + 1}"
                tasks.append(TaskResult(name, name, int(m.group(1)), []))
    phase = next((int(p[5:]) for p in kata_dir.parts if re.fullmatch(r"phase\d+", p)), 0)
    rel = layout.rel(kata_dir, root)
    kid = str(data.get("id") or kata_dir.name)
    why = "its kata.toml does not load (the run's errors say why): its points count, unearned"
    track = kata_dir.parent.name if kata_dir.parent.name in TRACKS else ""
    return KataResult(kid, str(data.get("title") or kid), phase, rel, tasks, [why], track=track)


def _rank(outcome: str) -> int:
    return {PASSED: 0, SKIPPED: 1, NOT_STARTED: 2, FAILED: 3, ERROR: 4}[outcome]
