"""Shortcut submissions: ``solutions/phaseNN/<kata>/shortcuts/<name>/``, and how they scored.

A shortcut is what a learner who wants the points without the skill would hand in: it passes the
public tests of one task while dodging its point. Each holds ``shortcut.toml`` (``task``: the task
it dodges, ``why``: one sentence) and ``shortcut.patch``, a unified diff against the reference
(:mod:`.patches`) that changes learner files or adds new ones; the rest come from the reference
(``--kata-impl=shortcut:<name>``). `kata verify` runs every one and fails when one earns more
than :data:`MAX_SHARE` of its task: a gate must catch it, and when its patch no longer applies.
A shortcut that still holds whole copies of the files it replaces (the format before patches)
loads as it did until ``kata shortcut convert`` turns it into a patch.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import patches
from .layout import SHORTCUTS, TESTS, shortcut_dir
from .loader import SHORTCUT_PATCH, shortcuts_of
from .manifest import Manifest
from .terminal import fmt_points

SHORTCUT_TOML = "shortcut.toml"
MAX_SHARE = 0.5  # a shortcut that earns more than this share of its task fails `kata verify`
MIN_SHORTCUTS = 2  # each kata ships at least this many shortcuts (docs/kata-layout.md) ...
# ... and fewer fails `kata verify`: every kata has them now, and every new kata must ship them.
FEWER_SHORTCUTS_IS_ERROR = True


class ShortcutError(ValueError):
    """A shortcut directory is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Shortcut:
    name: str
    dir: Path
    task: str
    why: str
    files: tuple[str, ...]  # the learner files it replaces or adds (kata-relative)
    patch: Path | None = None  # its shortcut.patch (None: a whole-copy shortcut)

    @property
    def impl(self) -> str:
        return f"shortcut:{self.name}"


@dataclass
class ShortcutScore:
    """What one shortcut earned of the task it dodges, before and after the task's gates."""

    kata: str
    shortcut: str
    task: str
    points: int
    before: float = 0.0
    after: float = 0.0
    gates: list[str] = field(default_factory=list)  # the sentences of the gates that caught it
    problem: str = ""  # the run could not judge it (no results, or errors before any verdict)
    errors: list[str] = field(default_factory=list)  # run errors of a judged run (a crash)
    skipped: str = ""  # its task cannot run on this machine (a tier or capability is missing)

    @property
    def judged(self) -> bool:
        return not (self.problem or self.skipped)

    @property
    def too_much(self) -> bool:
        return self.judged and self.after > self.points * MAX_SHARE


def load_shortcut(manifest: Manifest, name: str) -> Shortcut:
    """The shortcut `name` of a kata, validated against its manifest; ShortcutError otherwise."""
    where = shortcut_dir(manifest.dir, name)
    toml = where / SHORTCUT_TOML

    def fail(field_name: str, problem: str) -> ShortcutError:
        return ShortcutError(f"{toml}: {field_name}: {problem}")

    if not toml.is_file():
        raise fail("(file)", "not found: every shortcut says which task it dodges and why")
    try:
        data = tomllib.loads(toml.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise fail("(syntax)", f"invalid TOML: {e}") from None
    unknown = sorted(set(data) - {"task", "why"})
    if unknown:
        raise fail(unknown[0], "unknown field (known: task, why)")
    task, why = data.get("task"), data.get("why")
    tasks = [t.id for t in manifest.tasks]
    if not isinstance(task, str) or task not in tasks:
        got = "missing" if task is None else repr(task)
        raise fail("task", f"must name a task of {manifest.id} ({', '.join(tasks)}); got {got}")
    if not isinstance(why, str) or not why.strip():
        got = "missing" if why is None else repr(why)
        raise fail("why", f"must be one sentence saying why the shortcut is wrong; got {got}")
    held = sorted(
        p.relative_to(where).as_posix()
        for p in where.rglob("*")
        if p.is_file() and p.name != SHORTCUT_TOML and "__pycache__" not in p.parts
    )
    if SHORTCUT_PATCH in held:
        stray = [f for f in held if f != SHORTCUT_PATCH]
        if stray:
            raise ShortcutError(
                f"{where / stray[0]}: a shortcut holds {SHORTCUT_TOML} and {SHORTCUT_PATCH} only "
                "(the patch says what it changes)"
            )
        files = _patched_files(manifest, where / SHORTCUT_PATCH)
        return Shortcut(name, where, task, " ".join(why.split()), files, where / SHORTCUT_PATCH)
    files = tuple(held)
    for f in files:
        if f not in manifest.files:
            raise ShortcutError(
                f"{where / f}: a shortcut holds only learner files it replaces "
                f"({', '.join(manifest.files)}); {f} is not one"
            )
    if not files:
        raise ShortcutError(f"{where}: replaces no learner file, so it is the reference itself")
    return Shortcut(name, where, task, " ".join(why.split()), files)


def _patched_files(manifest: Manifest, patch: Path) -> tuple[str, ...]:
    """The files `patch` changes or adds, checked: it applies to the reference, changes learner
    files only, and adds files neither the kata nor the reference has (never a test)."""
    reference = patch.parent.parent.parent  # solutions/phaseNN/<kata>
    try:
        text = patch.read_text(encoding="utf-8")
        parsed = patches.parse(text)
        patches.apply(reference, text)
    except (OSError, UnicodeDecodeError, patches.PatchError) as e:
        raise ShortcutError(f"{patch}: {e}") from None
    for fp in parsed:
        if fp.path.split("/", 1)[0] in (TESTS, SHORTCUTS):
            raise ShortcutError(f"{patch}: {fp.path}: a shortcut changes learner code, not tests")
        if fp.new and (manifest.dir / fp.path).exists():
            raise ShortcutError(
                f"{patch}: {fp.path}: the kata has it (given code): a shortcut changes learner "
                f"files only ({', '.join(manifest.files)}) or adds new ones"
            )
        if not fp.new and fp.path not in manifest.files:
            raise ShortcutError(
                f"{patch}: {fp.path}: not a learner file: a shortcut changes learner files only "
                f"({', '.join(manifest.files)}) or adds new ones"
            )
    return tuple(fp.path for fp in parsed)


def shortcuts(manifest: Manifest) -> tuple[list[Shortcut], list[str]]:
    """Every shortcut of a kata, and the problems of those that are malformed."""
    found, problems = [], []
    for name in shortcuts_of(manifest.dir):
        try:
            found.append(load_shortcut(manifest, name))
        except ShortcutError as e:
            problems.append(f"shortcut {name!r}: {e}")
    return found, problems


def too_few(manifest: Manifest, count: int) -> str:
    """The sentence when a kata ships fewer than MIN_SHORTCUTS shortcuts ("" when enough)."""
    if count >= MIN_SHORTCUTS:
        return ""
    where = shortcut_dir(manifest.dir, "<name>")
    return (
        f"{count} shortcut(s); every kata ships at least {MIN_SHORTCUTS} under {where.parent} "
        "(see docs/kata-layout.md)"
    )


def table(scores: list[ShortcutScore]) -> list[str]:
    """`kata  shortcut  task  points before gates → after gates`, one line per shortcut."""
    head = ("kata", "shortcut", "task", "points (without gates → with gates)")
    rows = []
    for s in scores:
        pts = (
            f"{fmt_points(s.before)} → {fmt_points(s.after)} of {s.points}"
            if s.judged
            else f"not judged: {(s.problem or s.skipped).splitlines()[0]}"
        )
        if s.too_much:
            pts += f"  MORE THAN {MAX_SHARE:.0%}"
        rows.append((s.kata, s.shortcut, s.task, pts))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3]
        for r in [head, *rows]
    ]
