"""`kata verify --mutants`: mutants made, sampled, recorded as equivalent, judged and run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness import mutants as M
from harness import results as R
from harness.manifest import load_manifest
from harness.results import FAILED, PASSED, SKIPPED, KataResult, RunResult, TaskResult

from .conftest import KataRepo

pytest.importorskip("universalmutator")

CALC = """\
def add(a, b):
    return a + b


def mul(a, b):
    if a == 0:
        return 0
    return a * b
"""


def find(mutants: list[M.Mutant], line: str, replacement: str) -> M.Mutant:
    return next(
        m for m in mutants if m.original.strip() == line and m.replacement.strip() == replacement
    )


# --------------------------------------------------------------------------- making mutants
def test_candidates_are_lines_changed_by_the_library_rules() -> None:
    made = M.candidates("calc.py", CALC)
    minus = find(made, "return a + b", "return a - b")
    assert (minus.file, minus.line) == ("calc.py", 2)
    assert minus.apply(CALC) == CALC.replace("a + b", "a - b")
    assert find(made, "if a == 0:", "if a != 0:").line == 6
    assert all(m.original != m.replacement for m in made)
    diff = minus.diff(CALC)
    assert diff.startswith("--- a/calc.py\n+++ b/calc.py\n")
    assert "-    return a + b\n+    return a - b\n" in diff


def test_c_family_and_rust_files_have_rules_and_others_have_none() -> None:
    c = M.candidates("k.c", "int f(int a) {\n  return a + 1;\n}\n")
    assert any(m.replacement.strip() == "return a - 1;" for m in c)
    cu = M.candidates("k.cu", "__global__ void k(int* x) {\n  x[0] = x[0] * 2;\n}\n")
    assert any(m.replacement.strip() == "x[0] = x[0] + 2;" for m in cu)
    rs = M.candidates("k.rs", "pub fn f(a: u64) -> u64 {\n    a + 1\n}\n")
    assert any(m.replacement.strip() == "a - 1" for m in rs)
    assert M.candidates("notes.ptx", "add.s32 %r1, %r2, 1;\n") == []


def test_a_mutant_is_identified_by_its_text_not_its_line_number() -> None:
    moved = "import math\n\n\n" + CALC
    a = find(M.candidates("calc.py", CALC), "return a + b", "return a - b")
    b = find(M.candidates("calc.py", moved), "return a + b", "return a - b")
    assert (a.line, b.line) == (2, 5)
    assert a.key == b.key and a.id == b.id
    with pytest.raises(M.MutantsError, match="no longer"):
        a.apply(moved)


def test_validity_drops_what_does_not_compile_or_changes_no_behaviour() -> None:
    src = textwrap.dedent('''\
        def f(x: int) -> int:
            """Doubles x."""
            if x < 0:
                raise ValueError(f"negative: {x}")
            return x * 2  # twice
    ''')
    valid = M.Validity({"f.py": src})
    line = src.splitlines()

    def mutant(n: int, new: str) -> M.Mutant:
        return M.Mutant("f.py", n, line[n - 1], new)

    assert valid(mutant(5, "    return x + 2  # twice"))
    assert not valid(mutant(5, "    return x * 2  # thrice"))  # a comment
    assert not valid(mutant(2, '    """Triples x."""'))  # a docstring
    assert not valid(mutant(4, '        raise ValueError(f"")'))  # a message
    assert not valid(mutant(3, "    if x <<< 0:"))  # a syntax error
    assert not valid(mutant(1, "def f(x: str) -> int:"))  # an annotation
    commented = "def g(x):\n    # twice\n    return x * 2\n"
    cg = M.Validity({"g2.py": commented})
    assert not cg(M.Mutant("g2.py", 2, "    # twice", "    pass")), "a comment made `pass`"
    assert cg(M.Mutant("g2.py", 3, "    return x * 2", "    pass")), "the only statement dropped"
    future = M.Validity({"g.py": "from __future__ import annotations\nX = 1\n"})
    assert not future(M.Mutant("g.py", 1, "from __future__ import annotations", "pass"))
    c = "int f(int a) {\n  return a + 1;  // one more\n}\n"
    cv = M.Validity({"k.c": c})
    assert not cv(M.Mutant("k.c", 2, "  return a + 1;  // one more", "  return a + 1;  // two"))


# --------------------------------------------------------------------------- sampling
def pools() -> dict[str, list[M.Mutant]]:
    other = "".join(f"def g{i}(x):\n    return x + {i}\n\n\n" for i in range(8))
    return {"calc.py": M.candidates("calc.py", CALC), "other.py": M.candidates("other.py", other)}


def test_sampling_is_deterministic_given_the_seed() -> None:
    a = M.sample(pools(), 6, seed=7)
    assert a == M.sample(pools(), 6, seed=7)
    assert [m.key for m in a] != [m.key for m in M.sample(pools(), 6, seed=8)]


def test_sampling_spreads_across_files_and_lines() -> None:
    chosen = M.sample(pools(), 6, seed=0)
    assert len(chosen) == 6
    assert {m.file for m in chosen} == {"calc.py", "other.py"}
    lines = [(m.file, m.line) for m in chosen]
    assert len(set(lines)) == len(lines), "one mutant per line until every line had one"
    everything = M.sample(pools(), 10_000, seed=0)
    assert len(everything) == sum(len(p) for p in pools().values())


def test_sampling_replaces_an_invalid_mutant_by_another() -> None:
    chosen = M.sample(pools(), 4, seed=0, valid=lambda m: "pass" not in m.replacement)
    assert len(chosen) == 4 and all("pass" not in m.replacement for m in chosen)


# --------------------------------------------------------------------------- mutants.toml
def write_equivalents(repo: KataRepo, text: str) -> None:
    repo.write("solutions/phase01/demo/mutants.toml", text)


def test_equivalents_are_read_with_their_reasons(repo: KataRepo) -> None:
    kata = repo.add_demo(solution=CALC)
    write_equivalents(
        repo,
        """\
        [[equivalent]]
        file = "calc.py"
        line = "return 0"
        mutant = "pass"
        reason = "a * b is 0 when a is 0"
    """,
    )
    found, problems = M.load_equivalents(load_manifest(kata))
    assert problems == []
    assert found == [M.Equivalent("calc.py", "return 0", "pass", "a * b is 0 when a is 0")]
    m = find(M.candidates("calc.py", CALC), "return 0", "pass")
    assert m.key == found[0].key
    assert M.stale_equivalents(found, {"calc.py": CALC}) == []
    assert M.stale_equivalents(found, {"calc.py": CALC.replace("return 0", "return a")}) == found


def test_equivalents_file_problems_name_the_entry_and_field(repo: KataRepo) -> None:
    kata = repo.add_demo(solution=CALC)
    write_equivalents(
        repo,
        """\
        [[equivalent]]
        file = "calc.py"
        line = "return 0"
        mutant = "pass"

        [[equivalent]]
        file = "nope.py"
        line = "x"
        mutant = "y"
        reason = "z"

        [[equivalent]]
        file = "calc.py"
        line = "x"
        mutant = "y"
        reason = "z"
        why = "w"
    """,
    )
    found, problems = M.load_equivalents(load_manifest(kata))
    assert found == []
    assert "equivalent[0].reason: missing or empty" in problems[0]
    assert "equivalent[1].file: 'nope.py' is not a learner file (calc.py)" in problems[1]
    assert "equivalent[2].why: unknown field" in problems[2]


REPEATS = """\
def sign(a):
    if a < 0:
        return -1
    if a == 0:
        return 0
    return 1


def clamp(a):
    if a < -1:
        return -1
    return a
"""


def test_a_repeated_line_is_told_apart_by_its_occurrence(repo: KataRepo) -> None:
    """Mutants.toml keys on a line's text; where the text repeats, `occurrence` says which of
    the file's lines with it the entry means (the survivor line shows it)."""
    kata = repo.add_demo(solution=REPEATS)
    write_equivalents(
        repo,
        """\
        [[equivalent]]
        file = "calc.py"
        line = "return -1"
        mutant = "pass"
        occurrence = 2
        reason = "clamp(-2) falls through to return a: no test clamps below -1"

        [[equivalent]]
        file = "calc.py"
        line = "return 1"
        mutant = "pass"
        occurrence = 0
        reason = "z"

        [[equivalent]]
        file = "calc.py"
        line = "return 1"
        mutant = "pass"
        occurrence = "2"
        reason = "z"
    """,
    )
    found, problems = M.load_equivalents(load_manifest(kata))
    assert found == [M.Equivalent("calc.py", "return -1", "pass", found[0].reason, 2)], found
    assert len(problems) == 2 and all(".occurrence: must be a positive integer" in p
                                      for p in problems), problems  # fmt: skip
    made = [m for m in M.candidates("calc.py", REPEATS) if m.original.strip() == "return -1"
            and m.replacement.strip() == "pass"]  # fmt: skip
    assert [(m.line, m.occurrence, m.occurrences) for m in made] == [(3, 1, 2), (11, 2, 2)]
    assert [found[0].matches(m) for m in made] == [False, True]
    assert M.Equivalent("calc.py", "return -1", "pass", "r").matches(made[0]), "0: every one"
    assert made[1].which == " (occurrence 2 of 2 of this line)"
    assert M.survivor_text("k", M.MutantResult(made[1], M.UNNOTICED)).startswith(
        "k calc.py:11 (occurrence 2 of 2 of this line) ["
    )
    assert M.stale_equivalents(found, {"calc.py": REPEATS}) == []
    one = REPEATS.replace("    if a < -1:\n        return -1\n", "")
    assert M.stale_equivalents(found, {"calc.py": one}) == found, "one `return -1` is left"


def test_a_file_only_a_skipped_task_runs_leaves_its_mutants_unjudged(repo: KataRepo) -> None:
    """[[judged_by]]: a mutant of a file that only the gpu-tier task runs, unnoticed by every
    task this machine ran, is unjudged (not a survivor); noticed by another task, or with the
    file's task judged here, it is judged as any other."""
    kata = repo.add_demo(solution=CALC)
    write_equivalents(
        repo,
        """\
        [[judged_by]]
        file = "calc.py"
        tasks = ["gpu"]
        reason = "only the gpu task imports it"

        [[judged_by]]
        file = "calc.py"
        tasks = ["nope"]
        reason = "z"

        [[judged_by]]
        file = "calc.py"
        tasks = []
        reason = "z"
    """,
    )
    toml = M.load_mutants_toml(load_manifest(kata))
    assert toml.judged_by == [M.JudgedBy("calc.py", ("gpu",), "only the gpu task imports it")]
    assert "judged_by[1].tasks: 'nope' is not a task (add, gpu, mul)" in toml.problems[0]
    assert "judged_by[2].tasks: missing or empty" in toml.problems[1]
    j = toml.judged_by[0]
    unnoticed = M.judge(MUT, REF, run_of(a=(10, [PASSED] * 4), b=(8, [PASSED] * 4)), "k")
    assert unnoticed.verdict == M.UNNOTICED
    assert M.untested_here(unnoticed, M.JudgedBy("calc.py", ("g",), "r")).verdict == M.UNJUDGED
    assert not unnoticed.counted and "only g judge calc.py (r)" in unnoticed.reason
    dented = M.judge(MUT, REF, run_of(a=(10, [PASSED] * 3 + [FAILED]), b=(8, [PASSED] * 4)), "k")
    assert M.untested_here(dented, M.JudgedBy("calc.py", ("g",), "r")).verdict == M.DENTED
    judged = M.judge(MUT, REF, run_of(a=(10, [PASSED] * 4), b=(8, [PASSED] * 4)), "k")
    assert M.untested_here(judged, M.JudgedBy("calc.py", ("a",), "r")).verdict == M.UNNOTICED
    assert M.untested_here(judged, None).verdict == M.UNNOTICED and j.tasks == ("gpu",)


BRANCHES = """\
#if defined(__KATA_NEVER_DEFINED__)
#define WIDTH 32
#else
#define WIDTH 16
#endif
int width(void) { return WIDTH; }
"""


def test_a_native_line_this_host_does_not_compile_is_not_judged() -> None:
    """A line in a preprocessor branch for another machine preprocesses to the reference's code
    (with and without -march=native): no run here can tell it apart, so it is not run."""
    pytest.importorskip("shutil").which("cc") or pytest.skip("no C compiler")
    host = M.HostBuild({"w.c": BRANCHES})
    made = M.candidates("w.c", BRANCHES)
    inactive = find(made, "#define WIDTH 32", "/*#define WIDTH 32*/")
    active = find(made, "#define WIDTH 16", "/*#define WIDTH 16*/")
    assert not host.compiles(inactive), "the #if branch is never compiled here"
    assert host.compiles(active), "the #else branch is what this host builds"
    assert M.HostBuild({"calc.py": CALC}).compiles(MUT), "a Python file always runs"
    header = "#define CHECK(x) do { f(x); } while (0)\n"
    body = find(M.candidates("c.h", header), "#define CHECK(x) do { f(x); } while (0)",
                "#define CHECK(x) do { f(x); } if (0)")  # fmt: skip
    assert M.HostBuild({"c.h": header}).compiles(body), "a macro's body, expanded by includers"


# --------------------------------------------------------------------------- the survivor rule
def run_of(**earned_of: tuple[int, list[str]]) -> RunResult:
    """A run where task t has points p and tests of the given outcomes (equal weights)."""
    tasks = []
    for task, (points, outcomes) in earned_of.items():
        tests = [
            R.TestRecord(f"n{task}{i}", f"test_{task}{i}", "t.py", "k", task, False, o)
            for i, o in enumerate(outcomes)
        ]
        tasks.append(TaskResult(task, task, points, [], tests))
    return RunResult([KataResult("k", "k", 1, "katas/phase01/k", tasks)], impl="x")


MUT = M.Mutant("calc.py", 2, "    return a + b", "    return a - b")
REF = run_of(a=(10, [PASSED] * 4), b=(8, [PASSED] * 4), g=(5, [SKIPPED]))


def test_a_mutant_is_caught_when_some_task_earns_at_most_half() -> None:
    r = M.judge(
        MUT, REF, run_of(a=(10, [PASSED, PASSED, FAILED, FAILED]), b=(8, [PASSED] * 4)), "k"
    )
    assert r.verdict == M.CAUGHT and not r.survived and r.counted
    assert r.summary() == "caught: a 5/10"


def test_a_mutant_that_keeps_more_than_half_of_every_task_survives() -> None:
    dented = M.judge(MUT, REF, run_of(a=(10, [PASSED] * 3 + [FAILED]), b=(8, [PASSED] * 4)), "k")
    assert dented.verdict == M.DENTED and dented.survived
    assert [(t.task, t.earned) for t in dented.kept()] == [("a", 7.5)]
    full = M.judge(MUT, REF, run_of(a=(10, [PASSED] * 4), b=(8, [PASSED] * 4)), "k")
    assert full.verdict == M.UNNOTICED and full.survived
    assert "calc.py:2" in M.survivor_text("k", full) and "`return a - b`" in M.survivor_text(
        "k", full
    )
    assert [t.task for t in full.tasks] == ["a", "b"], "a task this machine skips is not judged"
    assert full.not_run == ["g"] and M.survivor_text("k", full).endswith("(not run here: g)")


def test_a_survivor_that_lost_only_to_its_own_exceptions_is_told_apart() -> None:
    """A dented mutant whose every lost test failed on an exception of its code (the honest-
    mistake rule: no gate caps it) says so; one whose test failed its check does not."""

    def run(raised: list[str]) -> RunResult:
        got = run_of(a=(10, [PASSED] * 2 + [FAILED] * len(raised)), b=(8, [PASSED] * 4))
        for r, where in zip(got.katas[0].tasks[0].tests[2:], raised, strict=True):
            r.raised = where
        return got

    ref = run_of(a=(10, [PASSED] * 3), b=(8, [PASSED] * 4))
    honest = M.judge(MUT, ref, run(["ZeroDivisionError in calc.py:2"]), "k")
    assert honest.verdict == M.DENTED and honest.honest and honest.survived
    assert "raised in its code (ZeroDivisionError in calc.py:2)" in M.survivor_text("k", honest)
    assert "no gate caps that" in honest.summary() and "no gate caps that" in M.mutant_line(honest)
    plain = M.judge(MUT, ref, run_of(a=(10, [PASSED] * 2 + [FAILED]), b=(8, [PASSED] * 4)), "k")
    assert plain.verdict == M.DENTED and not plain.honest, "a check failed: a hole, not a rule"
    assert "raised" not in M.survivor_text("k", plain)


def test_a_timeout_is_caught_and_a_run_without_results_is_not_scored() -> None:
    timeout = M.classify(MUT, REF, M.Run(None, "", 99.0, timed_out=True), "k")
    assert timeout.verdict == M.TIMEOUT and timeout.counted and not timeout.survived
    broken = M.classify(MUT, REF, M.Run(None, "INTERNALERROR> boom\n", 1.0), "k")
    assert broken.verdict == M.UNJUDGED and not broken.counted
    assert "boom" in broken.reason


def test_score_is_caught_over_non_equivalent_mutants() -> None:
    def res(v: str) -> M.MutantResult:
        return M.MutantResult(MUT, v)

    results = [res(M.CAUGHT), res(M.TIMEOUT), res(M.DENTED), res(M.UNNOTICED), res(M.EQUIVALENT),
               res(M.UNJUDGED)]  # fmt: skip
    assert M.score(results) == 0.5
    assert M.score([res(M.EQUIVALENT)]) is None
    k = M.KataMutation("k", sampled=6, results=results)
    head, row = M.table([k])
    assert head.split() == ["kata", "sampled", "caught", "survived", "equivalent", "unjudged",
                            "score", "seconds"]  # fmt: skip
    assert row.split()[:7] == ["k", "6", "2", "2", "1", "1", "50%"]
    assert M.table([k], markdown=True)[2].startswith("| k | 6 | 2 | 2 | 1 | 1 | 50% |")


# --------------------------------------------------------------------------- running
SLOW = """\
import time


def test_add(calc):
    time.sleep(60)
"""


def test_a_run_past_its_wall_limit_is_killed(repo: KataRepo, tmp_path: Path) -> None:
    kata = repo.add_demo(public=SLOW, hidden=None)
    run = M.run_kata(kata, repo.root, "solution", tmp_path / "w", timeout=3)
    assert run.timed_out and run.result is None and run.seconds < 30


def test_mutants_of_a_kata_are_run_and_judged(repo: KataRepo, tmp_path: Path) -> None:
    """One mutant caught, one survivor, one equivalent (never run): the whole pipeline, with
    each mutant run as `--kata-impl=patch:<its diff>`."""
    kata = repo.add_demo(solution=CALC)
    write_equivalents(
        repo,
        """\
        [[equivalent]]
        file = "calc.py"
        line = "return 0"
        mutant = "pass"
        reason = "a * b is 0 when a is 0"
    """,
    )
    made = M.candidates("calc.py", CALC)
    chosen = [
        find(made, "return a + b", "return a - b"),  # add(2, 3) == 5 catches it
        find(made, "if a == 0:", "if a == 1:"),  # no test multiplies by 1 (the gpu one skips)
        find(made, "return 0", "pass"),
    ]
    out = M.mutate_kata(load_manifest(kata), repo.root, workdir=tmp_path / "w", chosen=chosen)
    assert out.problems == [], out.problems
    verdicts = [r.verdict for r in out.results]
    assert verdicts == [M.CAUGHT, M.UNNOTICED, M.EQUIVALENT], [r.summary() for r in out.results]
    assert out.results[0].summary() == "caught: add 0/10"
    assert M.mutant_line(out.results[0]).endswith("`return a - b`: caught: add 0/10")
    assert M.mutant_line(out.results[1]).endswith(": unnoticed: every task as the reference")
    assert out.score == 0.5 and out.survivors == [out.results[1]]
    assert "+    if a == 1:" in out.results[1].diff


def test_verify_takes_the_mutant_options() -> None:
    from harness.cli import build_parser

    def parse(*argv: str):  # noqa: ANN202
        return build_parser().parse_args(["verify", *argv])

    assert parse().mutants == 0
    assert parse("--mutants").mutants == M.DEFAULT_COUNT
    got = parse("katas", "--mutants=3", "-j", "2", "--mutant-seed", "7", "--mutant-timeout", "9")
    assert (got.mutants, got.mutant_jobs, got.mutant_seed, got.mutant_timeout) == (3, 2, "7", 9.0)


def test_kata_verify_mutants_lists_and_scores_each_kata(
    repo: KataRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    repo.add_demo(solution=CALC)
    main(["--root", str(repo.root), "verify", "--no-shortcuts", "--mutants=1", "-j", "1"])
    out = capsys.readouterr().out
    assert "mutants: caught when a task earns at most half its points" in out, out
    listed = [line for line in out.splitlines() if line.strip().startswith("demo [")]
    assert len(listed) == 1 and "calc.py:" in listed[0], out
    row = next(line for line in out.splitlines() if line.split()[:2] == ["demo", "1"])
    assert row.split()[5] == "0", "the mutant was judged (not unjudged)"
