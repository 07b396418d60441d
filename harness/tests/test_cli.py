"""The `kata` command, run as learners and instructors run it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import CLEAR, main

from .conftest import KataRepo


def kata(repo: KataRepo, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--root", str(repo.root), *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_list_shows_katas_points_and_tiers(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    code, out = kata(repo, "list", capsys=capsys)
    assert code == 0
    assert "demo" in out and "20" in out and "this machine: tiers cpu" in out


def test_progress_before_and_after_a_run(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    code, out = kata(repo, "progress", capsys=capsys)
    assert code == 0 and "no results yet" in out
    repo.pytester.runpytest("katas")
    code, out = kata(repo, "progress", capsys=capsys)
    assert code == 0
    assert "not started" in out and "total: 0/20 points" in out and "next: add" in out


def test_hint_reveals_one_more_each_time_and_remembers(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    _, first = kata(repo, "hint", "demo", "add", capsys=capsys)
    assert "hint 1/2: use +" in first and "hint 2/2" not in first
    _, second = kata(repo, "hint", "demo", "add", capsys=capsys)
    assert "hint 2/2: return a + b" in second and "last hint" in second
    shown = json.loads((repo.root / ".kata" / "hints.json").read_text())
    assert shown == {"demo/add": 2}
    kata(repo, "hint", "demo", "add", "--reset", capsys=capsys)
    _, again = kata(repo, "hint", "demo", "add", capsys=capsys)
    assert "hint 2/2" not in again


def test_hint_defaults_to_the_next_task_of_the_last_run(repo: KataRepo, capsys) -> None:
    repo.add_demo(stub="def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a + b\n")
    repo.pytester.runpytest("katas")
    _, out = kata(repo, "hint", "demo", capsys=capsys)
    assert "demo · mul" in out and "use *" in out


def test_unknown_kata_and_task_are_usage_errors(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    code, out = kata(repo, "hint", "nope", capsys=capsys)
    assert code == 2 and "there is no kata called nope; the katas are: demo" in out
    code, out = kata(repo, "hint", "demo", "nope", capsys=capsys)
    assert code == 2 and "kata demo has no task called nope" in out


def test_no_repository_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["--root", str(tmp_path), "list"]) == 2
    assert "no katas/ directory" in capsys.readouterr().err


def test_new_scaffold_passes_verify(repo: KataRepo, capsys) -> None:
    (repo.root / "katas").mkdir()
    code, out = kata(repo, "new", "4", "ring-buffer", capsys=capsys)
    assert code == 0 and "katas/phase04/ring-buffer/kata.toml" in out
    assert (repo.root / "solutions/phase04/ring-buffer/tests/test_hidden_ring_buffer.py").exists()
    code, out = kata(repo, "new", "4", "ring-buffer", capsys=capsys)
    assert code == 2 and "already exists" in out
    code, out = kata(repo, "verify", capsys=capsys)
    assert code == 0, out
    assert "✓ ring-buffer" in out
    # the scaffold's two shortcuts are run and held to nothing by its hidden gate
    assert "positives-only  basics  6.75 → 0 of 10" in out, out
    assert "public-answers  basics  6.75 → 0 of 10" in out, out


def test_verify_names_kata_and_task_of_a_broken_reference(repo: KataRepo, capsys) -> None:
    repo.add_demo(
        solution="def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b + 1\n"
    )
    code, out = kata(repo, "verify", capsys=capsys)
    assert code == 1
    assert "✗ demo" in out and "task 'mul': reference fails test_mul" in out


def test_verify_catches_a_stub_that_already_passes(repo: KataRepo, capsys) -> None:
    repo.add_demo(
        stub="from harness import todo\ndef add(a, b):\n    return a + b\n\ndef mul(a, b):\n    todo()\n"
    )
    code, out = kata(repo, "verify", capsys=capsys)
    assert code == 1
    assert "task 'add': the stub already passes every test of this task" in out


def test_verify_reports_invalid_manifest_and_unassigned_tests(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    repo.write("katas/phase01/demo/tests/test_orphan.py", "def test_orphan():\n    pass\n")
    code, out = kata(repo, "verify", capsys=capsys)
    assert code == 1 and "test_orphan: belongs to no task" in out
    repo.add_demo("broken", phase_dir="phase02", manifest='id = "broken"\n')
    code, out = kata(repo, "verify", capsys=capsys)
    assert code == 1 and "invalid manifest" in out and "phase: is required" in out


def test_console_script_is_installed() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "verify" in out.stdout


def test_watch_reruns_after_a_save(repo: KataRepo) -> None:
    """rustlings' watch: the screen cleared, a header with the saved file and the time, the
    summary last (after pytest's own lines)."""
    repo.add_demo()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "--root", str(repo.root), "watch", "demo",
         "--interval", "0.1", "--max-runs", "2", "--clear", "--", "-p", "no:xdist"],
        cwd=repo.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    out = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith("total:") and sum(x.startswith("total:") for x in out) == 1:
            stub = repo.root / "katas/phase01/demo/calc.py"  # the learner saves a fix
            stub.write_text(stub.read_text().replace('todo("add(a, b)")', "return a + b"))
    text = "".join(out)
    assert proc.wait(timeout=120) == 0, text
    runs = text.split(CLEAR)
    assert len(runs) == 3 and not runs[0], "the screen is cleared before each run"
    first, second = runs[1].splitlines(), runs[2].splitlines()
    stamp = r"\d\d:\d\d:\d\d"
    assert re.fullmatch(rf"kata watch · katas/phase01/demo · {stamp} · first run", first[0])
    assert re.fullmatch(
        rf"kata watch · katas/phase01/demo · {stamp} · katas/phase01/demo/calc.py changed",
        second[0],
    ), second[0]
    assert re.search(r"add\s+0/10", runs[1]) and re.search(r"add\s+10/10", runs[2]), text
    # The summary comes last, after pytest's own lines, once a run.
    for run in (first, second):
        assert sum(line.startswith("total:") for line in run) == 1, run
        assert run.index(next(x for x in run if x.startswith("phase 01 · demo"))) > run.index(
            next(x for x in run if re.search(r"\d+ (passed|failed)", x))
        ), run
    assert first[-1] == "waiting for a save… (Ctrl-C to stop)" and second[-1].startswith("total:")


SEEDED_HIDDEN = """\
from harness.testing import run_seed


def test_add_drawn(calc):
    a = run_seed() % 1000
    assert calc.add(a, 1) == a + 1, f"add({a}, 1) is wrong"


def test_mul_hidden(calc):
    assert calc.mul(7, 6) == 42, "mul(7, 6) should be 42"
"""


def test_verify_uses_a_fixed_seed_and_seeds_finds_rare_failures(repo: KataRepo, capsys) -> None:
    repo.add_demo(
        stub="from harness import todo\ndef add(a, b):\n    todo()\n\ndef mul(a, b):\n    todo()\n",
        solution="def add(a, b):\n    return a + b if a < 10 else 0\n\ndef mul(a, b):\n    return a * b\n",
        hidden=SEEDED_HIDDEN,
    )  # the reference is wrong for a >= 10: right on seed 1005 (a = 5), wrong on most others
    code, out = kata(repo, "verify", "--no-shortcuts", "--seed=1005", capsys=capsys)
    assert code == 0, out
    code, out = kata(repo, "verify", "--no-shortcuts", "--seed=1005", "--seeds=3", capsys=capsys)
    assert code == 1, out
    found = re.search(r"on fresh seed (\d+) \(--kata-seed=(\d+)\): task 'add': reference fails "
                      r"test_add_drawn: AssertionError: add\((\d+), 1\) is wrong", out)  # fmt: skip
    assert found and found[1] == found[2] and int(found[1]) % 1000 == int(found[3]), out


def test_list_weeks_follows_the_course_schedule(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    code, out = kata(repo, "list", "--weeks", capsys=capsys)
    assert code == 0, out
    lines = out.splitlines()
    # all 26 weeks, in order, with their phase and the curriculum's focus
    weeks = [int(ln.split()[0]) for ln in lines if ln[:1].isdigit()]
    assert weeks == list(range(1, 27)), out
    assert any(ln.startswith("15    08") and "ring all-reduce" in ln for ln in lines), out
    # the demo kata (phase 1, no weeks declared) is named as undated, not silently dropped
    assert "demo names no week" in out, out


def test_list_weeks_puts_each_kata_under_its_weeks(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    toml = repo.root / "katas" / "phase01" / "demo" / "kata.toml"
    toml.write_text(toml.read_text().replace("phase = 1\n", "phase = 1\nweeks = [2]\n", 1))
    code, out = kata(repo, "list", "--weeks", capsys=capsys)
    assert code == 0, out
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("2     01"))
    assert lines[at + 1].strip().startswith("demo (cpu"), out
    assert "names no week" not in out, out
