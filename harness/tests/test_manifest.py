"""kata.toml validation: every bad manifest is an error naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.manifest import ManifestError, find_kata_dir, load_manifest

GOOD = """\
id = "demo"
title = "Demo"
phase = 3
summary = "s"
languages = ["python", "cuda"]
files = ["calc.py"]
time_limit = 5
tags = ["x"]

[requires]
tier = "gpu"
capabilities = ["nvcc"]

[[tasks]]
id = "add"
title = "Add"
points = 10
tests = ["test_add*", "test_hidden.py::test_more_*"]
hints = ["h1", "h2"]
weights = { "test_add_big" = 3 }
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "calc.py").write_text("")
    path = tmp_path / "kata.toml"
    path.write_text(text)
    return path


def test_good_manifest_loads(tmp_path: Path) -> None:
    m = load_manifest(write(tmp_path, GOOD))
    assert (m.id, m.phase, m.tier, m.capabilities, m.time_limit) == (
        "demo",
        3,
        "gpu",
        ("nvcc",),
        5.0,
    )
    assert m.points == 10 and m.weeks == () and m.shortcut_jobs == 1
    jobs = write(tmp_path, GOOD.replace("time_limit = 5", "time_limit = 5\nshortcut_jobs = 3"))
    assert load_manifest(jobs).shortcut_jobs == 3
    assert load_manifest(
        write(tmp_path, GOOD.replace("phase = 3", "phase = 3\nweeks = [6, 5]"))
    ).weeks == (5, 6)
    task = m.task("add")
    assert m.task_for("test_x.py", "test_add_small[3]") is task
    assert m.task_for("test_hidden.py", "test_more_a") is task
    assert m.task_for("test_other.py", "test_more_a") is None
    assert (
        task.weight_of("t.py", "test_add_big") == 3.0 and task.weight_of("t.py", "test_add") == 1.0
    )


@pytest.mark.parametrize(
    ("old", "new", "field", "problem"),
    [
        ('id = "demo"', 'id = "Demo Kata"', "id", "lower-case"),
        ('id = "demo"\n', "", "id", "is required"),
        ("phase = 3", "phase = 13", "phase", "1..12"),
        ("phase = 3", 'phase = "3"', "phase", "integer"),
        ('languages = ["python", "cuda"]', 'languages = ["cobol"]', "languages[0]", "one of"),
        ('files = ["calc.py"]', 'files = ["missing.c"]', "files[0]", "does not exist"),
        ('files = ["calc.py"]', 'files = ["../x.py"]', "files[0]", "relative"),
        ("time_limit = 5", "time_limit = -1", "time_limit", "positive"),
        ("time_limit = 5", "time_limit = 5\nshortcut_jobs = 0", "shortcut_jobs", "1..4"),
        ("time_limit = 5", 'time_limit = 5\nshortcut_jobs = "2"', "shortcut_jobs", "integer"),
        ('tier = "gpu"', 'tier = "tpu"', "requires.tier", "one of"),
        (
            'capabilities = ["nvcc"]',
            'capabilities = ["magic"]',
            "requires.capabilities[0]",
            "one of",
        ),
        ("points = 10", "points = -3", "tasks[0].points", "positive integer, got -3"),
        ("points = 10", "points = true", "tasks[0].points", "positive integer"),
        (
            'tests = ["test_add*", "test_hidden.py::test_more_*"]',
            "tests = []",
            "tasks[0].tests",
            "at least one",
        ),
        ('hints = ["h1", "h2"]', "hints = [1]", "tasks[0].hints[0]", "must be a string"),
        ('hints = ["h1", "h2"]', 'hints = "h1"', "tasks[0].hints", "a list of strings or tables"),
        (
            'hints = ["h1", "h2"]',
            'hints = ["h1", { tests = ["t*"] }]',
            "tasks[0].hints[1].text",
            "is required",
        ),
        (
            'hints = ["h1", "h2"]',
            'hints = [{ text = "h", colour = 1, tests = ["t"] }]',
            "tasks[0].hints[0].colour",
            "unknown field",
        ),
        (
            'hints = ["h1", "h2"]',
            'hints = [{ text = "h" }]',
            "tasks[0].hints[0].tests",
            "or functions must name what the hint is for",
        ),
        (
            'hints = ["h1", "h2"]',
            'hints = [{ text = "h", tests = [2] }]',
            "tasks[0].hints[0].tests[0]",
            "must be a string",
        ),
        (
            'hints = ["h1", "h2"]',
            'hints = [{ text = "h", functions = ["a.b()"] }]',
            "tasks[0].hints[0].functions[0]",
            "must be a function name",
        ),
        ('hints = ["h1", "h2"]', 'hints = [" "]', "tasks[0].hints[0]", "must not be empty"),
        (
            '{ "test_add_big" = 3 }',
            '{ "test_add_big" = 0 }',
            "tasks[0].weights.test_add_big",
            "positive",
        ),
        ('title = "Add"', 'title = "Add"\ncolour = "red"', "tasks[0].colour", "unknown field"),
        ('tags = ["x"]', 'tags = ["x"]\nauthor = 1', "author", "unknown field"),
        ("phase = 3", "phase = 3\nweeks = [27]", "weeks[0]", "must be a week 1..26"),
        ("phase = 3", 'phase = 3\nweeks = ["5"]', "weeks[0]", "must be a week 1..26"),
        ("phase = 3", "phase = 3\nweeks = [5, 7]", "weeks[1]", "week 7 belongs to phase 4"),
    ],
)
def test_bad_manifest_names_file_and_field(
    tmp_path: Path, old: str, new: str, field: str, problem: str
) -> None:
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert err.value.field == field
    assert problem in err.value.problem
    assert str(path) in str(err.value)


def test_duplicate_task_ids(tmp_path: Path) -> None:
    task = GOOD[GOOD.index("[[tasks]]") :]
    with pytest.raises(ManifestError, match=r"tasks\[1\]\.id: duplicate task id 'add'"):
        load_manifest(write(tmp_path, GOOD + "\n" + task))


def test_toml_syntax_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"\(syntax\): invalid TOML"):
        load_manifest(write(tmp_path, GOOD + "\n[[tasks]\n"))


def test_no_tasks(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="tasks: is required"):
        load_manifest(write(tmp_path, GOOD[: GOOD.index("[[tasks]]")]))


def test_find_kata_dir_maps_solutions_to_katas(tmp_path: Path) -> None:
    kata = tmp_path / "katas" / "phase01" / "demo"
    kata.mkdir(parents=True)
    (kata / "kata.toml").write_text("")
    hidden = tmp_path / "solutions" / "phase01" / "demo" / "tests" / "test_h.py"
    hidden.parent.mkdir(parents=True)
    hidden.write_text("")
    assert find_kata_dir(hidden) == kata.resolve()
    assert find_kata_dir(kata / "tests" / "test_x.py") == kata.resolve()
    assert find_kata_dir(tmp_path) is None


def test_bad_manifest_is_a_collection_error_naming_file_and_field(repo) -> None:
    repo.add_demo()
    toml = repo.root / "katas/phase01/demo/kata.toml"
    toml.write_text(toml.read_text().replace("points = 5", "points = -5"))
    result = repo.pytester.runpytest("katas")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    out = result.stdout.str()
    assert "invalid kata manifest" in out and "kata.toml: tasks[1].points" in out
    assert "Traceback" not in out


def test_hints_belong_to_tests_and_functions(tmp_path: Path) -> None:
    """Plain strings (today's form) are for any failure of the task; a table's hint for the
    tests or learner functions it names, also written as [[tasks.hints]]."""
    text = (
        GOOD.replace('hints = ["h1", "h2"]\n', "")
        + """
[[tasks.hints]]
text = "for big ones"
tests = ["test_add_big*"]

[[tasks.hints]]
text = "carry the one"
functions = ["carry"]

[[tasks.hints]]
text = "in general"
"""
    )
    with pytest.raises(ManifestError, match=r"tasks\[0\]\.hints\[2\]\.tests: or functions"):
        load_manifest(write(tmp_path, text))
    task = load_manifest(
        write(tmp_path, text.split('[[tasks.hints]]\ntext = "in general"')[0])
    ).task("add")
    assert task.hints == ("for big ones", "carry the one")
    assert task.hint_for("t.py", "test_add_big[3]") == "for big ones"
    assert task.hint_for("t.py", "test_add", frozenset({"carry"})) == "carry the one"
    assert task.hint_for("t.py", "test_add") == "", "no hint for what failed"
    plain = load_manifest(write(tmp_path, GOOD)).task("add")
    assert plain.hint_for("t.py", "test_add_big") == "h1"  # today's form: the first, always
    mixed = GOOD.replace('["h1", "h2"]', '[{ text = "big", tests = ["test_add_big"] }, "h2"]')
    task = load_manifest(write(tmp_path, mixed)).task("add")
    assert task.hint_for("t.py", "test_add_big") == "big" and task.hint_for("t.py", "x") == "h2"


def test_every_kata_of_the_course_names_its_weeks() -> None:
    # `kata list --weeks` is the course's schedule: a kata without weeks would fall out of it.
    # A track's kata (system-design, interview-prep) is listed beside the schedule instead.
    from harness.manifest import discover

    root = Path(__file__).resolve().parents[2]
    manifests = [load_manifest(d / "kata.toml") for d in discover(root / "katas")]
    undated = [str(m.dir.relative_to(root)) for m in manifests if not m.weeks and not m.track]
    assert not undated, (
        f"these katas name no week of the schedule (`weeks = [...]` in kata.toml): {undated}"
    )
