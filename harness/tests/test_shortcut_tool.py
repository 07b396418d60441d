"""`kata shortcut`: authors write shortcuts as patches (new, edit, diff, save) and convert the
whole-copy ones; conversion reproduces each copy byte for byte and can run again."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import patches
from harness.cli import main
from harness.manifest import load_manifest
from harness.shortcuts import shortcuts

from .conftest import KataRepo, summary_of
from .test_gates import REFERENCE, SENTENCE, SHORTCUT, STUB, gated_kata

KATA = "katas/phase01/gated"
SC = "solutions/phase01/gated/shortcuts"


def add_copy(repo: KataRepo, name: str, files: dict[str, str]) -> None:
    """A whole-copy shortcut, the format before patches."""
    repo.write(f"{SC}/{name}/shortcut.toml", f'task = "add"\nwhy = "{SENTENCE}"\n')
    for rel, text in files.items():
        (repo.root / SC / name / rel).write_text(text)


def kata(repo: KataRepo, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["shortcut", "--root", str(repo.root), *argv])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_convert_turns_copies_into_a_patch_that_reproduces_them(
    repo: KataRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    gated_kata(repo, stub=STUB)
    add_copy(repo, "five", {"calc.py": SHORTCUT})
    no_newline = REFERENCE.replace("a * b\n", "b * a")  # no newline at the end
    add_copy(repo, "swapped", {"calc.py": no_newline, "helper.py": "X = 1\n"})
    before = repo.pytester.runpytest("katas", "--kata-impl=shortcut:five")  # a copy still runs
    assert any(SENTENCE in line for line in summary_of(before.stdout.str()))
    (repo.root / SC / "five" / "__pycache__").mkdir(exist_ok=True)
    (repo.root / SC / "five" / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"x")
    code, out = kata(repo, capsys, "convert", "--check")
    assert code == 1 and "2 whole-copy shortcuts" in out and "shortcuts/swapped" in out, out
    code, out = kata(repo, capsys, "convert", str(repo.root / "katas"))
    assert code == 0 and "2 converted" in out, out
    code, out = kata(repo, capsys, "convert", "--check")
    assert code == 0 and "0 whole-copy shortcuts" in out, out
    for name, files in (("five", {"calc.py": SHORTCUT}),
                        ("swapped", {"calc.py": no_newline, "helper.py": "X = 1\n"})):  # fmt: skip
        d = repo.root / SC / name
        assert sorted(p.name for p in d.iterdir()) == ["shortcut.patch", "shortcut.toml"]
        applied = patches.apply(
            repo.root / "solutions/phase01/gated", (d / "shortcut.patch").read_text()
        )
        assert applied == {k: v.encode() for k, v in files.items()}
    code, out = kata(repo, capsys, "convert")
    assert code == 0 and "0 converted" in out and "2 already patches" in out, out
    found, problems = shortcuts(load_manifest(repo.root / KATA))
    assert not problems and [s.files for s in found] == [("calc.py",), ("calc.py", "helper.py")]
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:five")
    assert any(SENTENCE in line for line in summary_of(result.stdout.str()))


def test_convert_leaves_a_copy_that_dodges_nothing(
    repo: KataRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    gated_kata(repo, stub=STUB)
    add_copy(repo, "same", {"calc.py": REFERENCE})
    code, out = kata(repo, capsys, "convert")
    assert code == 1 and "NOT converted" in out and "equals the reference" in out, out
    assert (repo.root / SC / "same" / "calc.py").is_file(), "left as it was"


def test_new_edit_diff_save(repo: KataRepo, capsys: pytest.CaptureFixture[str]) -> None:
    gated_kata(repo, stub=STUB)
    code, out = kata(repo, capsys, "new", "gated", "five", "--task", "add", "--why", SENTENCE)
    assert code == 0, out
    scratch = repo.root / ".kata/shortcut-edit/gated/five"
    assert str(scratch) in out and (scratch / "calc.py").read_text() == REFERENCE
    code, out = kata(repo, capsys, "diff", "gated", "five")
    assert code == 2 and "equals the reference" in out
    (scratch / "calc.py").write_text(SHORTCUT)
    code, out = kata(repo, capsys, "diff", "gated", "five")
    assert code == 0 and "-    return a + b\n+    return 5\n" in out, out
    code, out = kata(repo, capsys, "save", "gated", "five")
    assert code == 0 and "shortcuts/five/shortcut.patch" in out
    (sc,), problems = shortcuts(load_manifest(repo.root / KATA))
    assert not problems and sc.task == "add" and sc.why == SENTENCE and sc.files == ("calc.py",)
    (scratch / "calc.py").write_text("garbage")
    code, out = kata(repo, capsys, "edit", "gated", "five")
    assert code == 0 and (scratch / "calc.py").read_text() == SHORTCUT, "reference + its patch"
    code, out = kata(repo, capsys, "new", "gated", "five", "--task", "add", "--why", "w")
    assert code == 2 and "exists" in out
    code, out = kata(repo, capsys, "new", "gated", "six", "--task", "div", "--why", "w")
    assert code == 2 and "--task must be a task of gated" in out


def test_scaffolded_shortcuts_are_patches(tmp_path: Path) -> None:
    from harness.scaffold import scaffold

    (tmp_path / "katas").mkdir()
    scaffold(tmp_path, 9, "demo-kata")
    sc = tmp_path / "solutions/phase09/demo-kata/shortcuts"
    for d in sc.iterdir():
        assert sorted(p.name for p in d.iterdir()) == ["shortcut.patch", "shortcut.toml"], d
