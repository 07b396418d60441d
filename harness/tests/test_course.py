"""The course around the katas (curriculum: every phase is a chapter): every phase folder and
every track folder under katas/ has its README with the chapter's sections, and its table of
katas links every kata the folder holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.manifest import TRACKS

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = (
    "## Concepts, from first principles",
    "## The katas",
    "## Production numbers people ask about",
    "## What changes at real scale",
)
FOLDERS = sorted(
    p
    for p in (ROOT / "katas").iterdir()
    if p.is_dir() and (re.fullmatch(r"phase\d\d", p.name) or p.name in TRACKS)
)


def test_the_course_has_its_folders() -> None:
    names = {p.name for p in FOLDERS}
    missing = {f"phase{n:02d}" for n in range(1, 13)} - names
    assert not missing, f"katas/ has no folder for {sorted(missing)}"


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_every_chapter_has_its_readme(folder: Path) -> None:
    readme = folder / "README.md"
    assert readme.is_file(), f"{readme.relative_to(ROOT)} is missing: every phase and track has one"
    text = readme.read_text(encoding="utf-8")
    missing = [s for s in SECTIONS if s not in text]
    assert not missing, f"{readme.relative_to(ROOT)} lacks the sections {missing}"
    table = text.split("## The katas", 1)[1].split("\n## ", 1)[0]
    katas = sorted(p.name for p in folder.iterdir() if (p / "kata.toml").is_file())
    assert katas, f"{folder.relative_to(ROOT)} holds no kata"
    unlinked = [k for k in katas if f"]({k}/" not in table]
    assert not unlinked, (
        f"{readme.relative_to(ROOT)}'s 'The katas' table does not link {unlinked} "
        f"(a row with [{unlinked[0]}]({unlinked[0]}/README.md))"
    )


def test_readme_commands_name_real_katas_and_tasks() -> None:
    """`pytest katas/<...> --kata-task=T` in any README runs a kata that exists and a task it has
    (a renamed task left a README pointing at nothing)."""
    from harness.manifest import discover, load_manifest

    tasks = {
        k.relative_to(ROOT).as_posix(): {t.id for t in load_manifest(k).tasks}
        for k in discover(ROOT)
    }
    wrong = []
    for readme in [ROOT / "README.md", *sorted((ROOT / "katas").glob("**/README.md"))]:
        text = readme.read_text(encoding="utf-8")
        for m in re.finditer(r"pytest (katas/[\w/.-]+?)/? [^\n`]*?--kata-task[= ]([\w-]+)", text):
            ids = tasks.get(m[1])
            if ids is None or m[2] not in ids:
                wrong.append(f"{readme.relative_to(ROOT)}: {m[0]!r}")
    assert not wrong, "README commands name no such kata or task:\n  " + "\n  ".join(wrong)
