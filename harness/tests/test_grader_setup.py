"""Graders have what the katas need, and a grader that lacks something says so (issue 11).

The scenario, run the way the graders run it: a learner tree published with ``kata publish``
(simt and vector-add), the references of both as the submission, graded by each entry point
(Gradescope's ``run_autograder``, PrairieLearn's ``run_prairielearn.sh``, the GitHub workflow's
own commands): 200/200 after the grader's setup, and an *error* naming what is missing, with
the instructor's sentence, when the CUDA toolchain is hidden (a mount namespace binds an empty
file over every nvcc/ptxas/cuobjdump the harness could find; root only).

What is and is not exercised: each grader's setup (``setup.sh``, the PrairieLearn Dockerfile, the
workflow's install step) goes through ``harness/graders/install.sh``; here it runs as a dry run
(the commands it would run are checked: the apt packages and ``pip install -e SOURCE[cuda]``),
and the grading runs with this test environment's Python, which ``.ci/run`` installed with the
same ``pip install -e '.[dev,cuda]'``. A real apt/pip install into a fresh image is not run in CI
(minutes, and network); docs/grading.md gives the measured figures.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.capabilities import INSTALL, manifests, missing_sentence, needs, plan
from harness.grading import apply
from harness.manifest import CAPABILITIES, TIERS
from harness.results import PASSED, SKIPPED, KataResult, RunResult, TaskResult
from harness.results import TestRecord as Record
from harness.toolchain import TOOLS, find_tool, search_dirs

from .conftest import KataRepo
from .test_reports import validate

ROOT = Path(__file__).resolve().parents[2]
GRADERS = ROOT / "harness" / "graders"
WORKFLOW = ROOT / ".github" / "workflows" / "autograde.yml"
SCENARIO = ("simt", "vector-add")
SENTENCE = re.compile(
    r"this grader has no nvcc: install the \[cuda\] extra.*; 50 points of vector-add were not graded"
)
CUDA_TOOLS = ("nvcc", "ptxas", "cuobjdump", "nvdisasm", "cu++filt")


# --------------------------------------------------------------------------- the capability map
def test_every_tier_and_capability_has_an_install_entry() -> None:
    assert set(TIERS) | set(CAPABILITIES) <= set(INSTALL)
    assert all(i.advice for name, i in INSTALL.items() if name != "cpu")


def test_the_plan_comes_from_the_manifests() -> None:
    ms = manifests(ROOT, list(SCENARIO))
    assert {m.id for m in ms} == set(SCENARIO)
    assert needs(ms) == {"cxx": ["vector-add"], "nvcc": ["vector-add"]}
    assert plan(ms) == (["cuda"], ["g++"])
    assert plan(manifests(ROOT, ["simt"])) == ([], [])
    # Every kata in the course: the gpu tier is never installed (it needs hardware).
    extras, apt = plan(manifests(ROOT))
    assert "cuda" in extras and "gpu" not in extras and "g++" in apt


def test_the_instructors_sentence() -> None:
    text = missing_sentence("nvcc", {"vector-add": 50.0, "transpose": 12.5})
    assert text.startswith("this grader has no nvcc: install the [cuda] extra")
    assert text.endswith("; 50.0 points of vector-add and 12.5 points of transpose were not graded")


@pytest.mark.parametrize("name", ["cargo", "busybox", "valgrind", "node"])
def test_the_sentence_says_the_gpu_tier_image_lacks_it(name: str) -> None:
    from harness.capabilities import GPU_IMAGE_LACKS, main

    assert name in GPU_IMAGE_LACKS
    text = missing_sentence(name, {"k": 30.0})
    assert text.startswith(f"this grader has no {name}: {INSTALL[name].advice}; ")
    assert (
        "the gpu-tier image has no Rust, bpftrace, busybox, Node.js/TypeScript, promtool or valgrind"
        in text
    )
    assert "KATA_OPTIONAL=bpftrace,busybox,cargo,node,promtool,valgrind" in text
    assert text.endswith("; 30.0 points of k were not graded")
    assert "gpu-tier image" not in missing_sentence("nvcc", {"k": 1.0}), "it has the toolkit"
    assert main(["gpu-image-optional"]) == 0


def test_the_gpu_image_optional_list_is_printed(capsys) -> None:
    from harness.capabilities import main

    main(["gpu-image-optional"])
    assert capsys.readouterr().out.strip() == "bpftrace,busybox,cargo,node,promtool,valgrind"


def _run(*task_outcomes: tuple[int, list[tuple[str, str]]]) -> RunResult:
    tasks = []
    for n, (points, tests) in enumerate(task_outcomes):
        recs = [
            Record(
                f"k/test_k.py::test_{n}_{i}",
                f"test_{n}_{i}",
                "test_k.py",
                "kata",
                f"t{n}",
                False,
                outcome,
                missing=missing,
            )  # fmt: skip
            for i, (outcome, missing) in enumerate(tests)
        ]
        tasks.append(TaskResult(f"t{n}", f"T{n}", points, [], recs))
    return RunResult([KataResult("kata", "Kata", 2, "katas/phase02/kata", tasks)])


def test_grade_mode_turns_a_grader_missing_skip_into_an_error() -> None:
    result = _run((25, [(PASSED, "")]), (50, [(SKIPPED, "nvcc"), (SKIPPED, "nvcc")]))
    assert apply(result, optional=set()) is True
    assert result.status == "error" and result.points == 75, "the points stay possible"
    assert result.errors == [
        "this grader has no nvcc: install the [cuda] extra (pip install -e '.[cuda]'); "
        "50 points of kata were not graded"
    ]


def test_an_optional_tier_leaves_the_possible_points_and_says_so() -> None:
    result = _run(
        (25, [(PASSED, "")]), (10, [(SKIPPED, "gpu")]), (20, [(PASSED, ""), (SKIPPED, "gpu")])
    )
    assert apply(result, optional={"gpu"}) is False
    assert result.errors == [] and result.status == "passed"
    assert result.points == 45 and result.earned == 45, (
        "t1 left out; t2's points go to its run test"
    )
    assert result.notes == ["gpu is optional on this grader: 10 points left out of the possible points (kata › t1, kata › test_2_1)"]  # fmt: skip
    assert result.katas[0].tasks[1].excused


def test_a_graded_run_of_a_kata_with_a_gpu_task_on_a_cpu_grader(repo: KataRepo) -> None:
    from harness.tiers import probe

    if probe().has_tier("gpu"):
        pytest.skip("this machine has a GPU: the demo's gpu task runs")
    repo.add_demo()  # add 10, mul 5, gpu 5 (tier gpu)
    plain = repo.pytester.runpytest_subprocess("katas", "--kata-impl=solution")
    assert plain.ret == 0 and "this grader has no" not in plain.stdout.str(), "learners skip"
    graded = repo.pytester.runpytest_subprocess("katas", "--kata-impl=solution", "--kata-grader")
    assert graded.ret == 1
    graded.stdout.fnmatch_lines(["! this grader has no GPU: run the grader on a machine with an NVIDIA GPU*; 5 points of demo were not graded", "total: 15/20 points"])  # fmt: skip
    reports = [f"--kata-report={f}:out/{f}" for f in ("gradescope", "exercism", "github", "html")]
    optional = repo.pytester.runpytest_subprocess(
        "katas", "--kata-impl=solution", "--kata-grader", "--kata-optional=gpu", *reports
    )
    assert optional.ret == 0
    note = "gpu is optional on this grader: 5 points left out of the possible points (demo › gpu)"
    optional.stdout.fnmatch_lines([f"note: {note}", "total: 15/15 points"])
    out = repo.root / "out"
    gs = json.loads((out / "gradescope").read_text())
    assert gs["score"] == 15 and note in gs["output"] and gs["extra_data"]["status"] == "passed"
    assert not any(t["tags"][1] == "gpu" for t in gs["tests"]), "an excused task has no rows"
    assert sum(t["max_score"] for t in gs["tests"]) == 15
    assert json.loads((out / "exercism").read_text())["status"] == "pass"
    assert note in (out / "html").read_text().replace("&gt;", ">").replace("&#8250;", "›")


def test_a_learner_skip_is_not_the_graders_fault() -> None:
    result = _run((25, [(PASSED, ""), (SKIPPED, "")]))  # pytest.skip() in a test: no `missing`
    assert apply(result, optional=set()) is False and result.errors == []


# --------------------------------------------------------------------------- the entry points
@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A learner tree of simt and vector-add (`kata publish`), its key, and a submission holding
    the references of both."""
    out = tmp_path_factory.mktemp("publish")
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "publish", "--root", str(ROOT), "--out", str(out / "trees"),
         "--katas", ",".join(SCENARIO), "--new-key", str(out / "key")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    submission = out / "submission"
    submission.mkdir()
    for kata in ("phase01/simt", "phase02/vector-add"):
        for f in (ROOT / "solutions" / kata).iterdir():
            if f.is_file():
                shutil.copy(f, submission / f.name)
    return {"learner": out / "trees" / "learner", "key": out / "key", "submission": submission}


def _cuda_files() -> list[str]:
    """Every CUDA tool file the harness could find, as it searches (PATH, CUDA_HOME, wheels)."""
    found = set()
    for tool in CUDA_TOOLS:
        for d in search_dirs(tool):
            for name in TOOLS.get(tool, (tool,)):
                path = d / name
                if path.is_file():
                    found |= {str(path), os.path.realpath(path)}
    return sorted(found)


def _command(argv: list[str], hide_cuda: bool, empty: Path) -> list[str]:
    if not hide_cuda:
        return argv
    mounts = "".join(f'mount --bind "{empty}" "{p}" && ' for p in _cuda_files())
    return ["unshare", "-m", "bash", "-c", mounts + 'exec "$@"', "_", *argv]


needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="hiding the CUDA toolchain needs a mount namespace (root and unshare)",
)
needs_cuda = pytest.mark.skipif(
    find_tool("nvcc") is None, reason="this environment lacks the [cuda] extra"
)


def _entry(argv: list[str], env: dict[str, str], tmp: Path, hide_cuda: bool, cwd: Path | None = None, rc: tuple[int, ...] = (0,)) -> str:  # fmt: skip
    empty = tmp / "empty"
    empty.write_text("")
    full = {k: v for k, v in os.environ.items() if not k.startswith(("KATA_", "GITHUB_", "CUDA_"))}
    full.update(KATA_PYTHON=sys.executable, KATA_WORKERS="2", **env)
    proc = subprocess.run(
        _command(argv, hide_cuda, empty), env=full, cwd=cwd, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode in rc, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _dry_run_setup(argv: list[str], env: dict[str, str], learner: Path) -> str:
    full = dict(os.environ, KATA_INSTALL_DRY_RUN="1", KATA_SETUP_PYTHON=sys.executable, **env)
    proc = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"^\+ .*apt-get install .* g\+\+$", out, re.M), out
    assert f"install -q -e {learner}[cuda]" in out, "the setup installs the [cuda] extra"
    return out


def test_gradescope_setup_installs_what_the_katas_need(published: dict[str, Path], tmp_path: Path) -> None:  # fmt: skip
    learner = published["learner"]
    out = _dry_run_setup(
        ["bash", str(learner / "harness/graders/gradescope_zip/setup.sh")],
        {"KATA_GS_SOURCE": str(learner), "KATA_GS_VENV": str(tmp_path / "venv")},
        learner,
    )
    assert f"-m venv {tmp_path / 'venv'}" in out


def _gradescope(published: dict[str, Path], tmp: Path, hide_cuda: bool, katas: str) -> dict[str, Any]:  # fmt: skip
    results = tmp / "results.json"
    _entry(
        ["bash", str(published["learner"] / "harness/graders/gradescope_zip/run_autograder")],
        {"KATA_GS_SOURCE": str(published["learner"]), "KATA_GS_SUBMISSION": str(published["submission"]),
         "KATA_GS_RESULTS": str(results), "KATA_HIDDEN_KEY_FILE": str(published["key"]), "KATA_KATAS": katas},
        tmp, hide_cuda,
    )  # fmt: skip
    data = json.loads(results.read_text())
    validate("gradescope", data)
    return data


@needs_cuda
def test_gradescope_gives_full_points_after_setup(published: dict[str, Path], tmp_path: Path) -> None:  # fmt: skip
    data = _gradescope(published, tmp_path, hide_cuda=False, katas="")
    assert data["score"] == 200 and data["extra_data"]["status"] == "passed", data["output"]
    assert sum(t["max_score"] for t in data["tests"]) == 200


@needs_root
def test_gradescope_without_the_toolchain_is_an_error_with_the_sentence(published: dict[str, Path], tmp_path: Path) -> None:  # fmt: skip
    data = _gradescope(published, tmp_path, hide_cuda=True, katas="vector-add")
    assert data["extra_data"]["status"] == "error"
    assert SENTENCE.search(data["output"]), data["output"]
    assert data["tests"][0]["name"] == "gpu-katas: grading error"
    assert SENTENCE.search(data["tests"][0]["output"])


def test_prairielearn_image_is_set_up_by_the_same_install(published: dict[str, Path], tmp_path: Path) -> None:  # fmt: skip
    learner = published["learner"]
    dockerfile = (learner / "harness/graders/prairielearn.Dockerfile").read_text()
    run = re.search(r"^RUN bash (\S+) (\S+) (\S+)", dockerfile, re.M)
    assert run and run[1].endswith("harness/graders/install.sh")
    assert "/opt/gpu-katas-venv" in (learner / "harness/graders/run_prairielearn.sh").read_text()
    _dry_run_setup(["bash", str(learner / "harness/graders/install.sh"), str(learner), str(tmp_path / "v")], {}, learner)  # fmt: skip


def _prairielearn(published: dict[str, Path], tmp: Path, hide_cuda: bool, katas: list[str]) -> dict[str, Any]:  # fmt: skip
    grade = tmp / "grade"
    course = grade / "serverFilesCourse" / "gpu-katas"
    shutil.copytree(published["learner"], course)
    shutil.copytree(published["submission"], grade / "student")
    (grade / "data").mkdir()
    (grade / "data" / "data.json").write_text(json.dumps({"params": {"kata": katas}}))
    _entry(["bash", str(course / "harness/graders/run_prairielearn.sh")],
           {"KATA_PL_ROOT": str(grade), "KATA_HIDDEN_KEY_FILE": str(published["key"])}, tmp, hide_cuda)  # fmt: skip
    data = json.loads((grade / "results" / "results.json").read_text())
    validate("prairielearn", data)
    return data


@needs_cuda
def test_prairielearn_gives_full_points_after_setup(published: dict[str, Path], tmp_path: Path) -> None:  # fmt: skip
    data = _prairielearn(published, tmp_path, hide_cuda=False, katas=list(SCENARIO))
    assert (
        data["gradable"] and data["score"] == 1.0 and data["message"] == "200/200 points · passed"
    ), data["message"]


@needs_root
def test_prairielearn_without_the_toolchain_is_not_gradable(published: dict[str, Path], tmp_path: Path) -> None:  # fmt: skip
    data = _prairielearn(published, tmp_path, hide_cuda=True, katas=["vector-add"])
    assert data["gradable"] is False, (
        "PrairieLearn must not count a grade the grader could not give"
    )
    assert SENTENCE.search(data["message"]), data["message"]


def _workflow_steps() -> tuple[str, str, dict[str, str]]:
    """(install command, run command, the run step's env) from autograde.yml."""
    text = WORKFLOW.read_text()
    install = re.search(r"- name: Install gpu-katas.*\n\s+run: (.+)", text)
    command = re.search(r"run: >-\n((?:\s{10}.*\n)+)", text)
    env = re.search(r"env:\n((?:\s{10}\w+: .*\n)+)\s+run: >-", text)
    assert install and command and env, "autograde.yml's steps are not where the test expects them"
    values = {
        k: v.strip('"') for k, v in (line.strip().split(": ", 1) for line in env[1].splitlines())
    }
    return install[1].strip(), " ".join(command[1].split()), values


def test_workflow_installs_what_the_katas_need(published: dict[str, Path]) -> None:
    install, _, _ = _workflow_steps()
    assert install == "bash harness/graders/install.sh . -"
    learner = published["learner"]
    proc = subprocess.run(
        ["bash", "-c", install], cwd=learner, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, KATA_INSTALL_DRY_RUN="1", KATA_SETUP_PYTHON=sys.executable), check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"-m pip install -q -e {learner}[cuda]" in proc.stdout, proc.stdout


def _workflow(published: dict[str, Path], tmp: Path, hide_cuda: bool, katas: list[str]) -> tuple[dict[str, Any], str]:  # fmt: skip
    tree = tmp / "learner-repo"
    shutil.copytree(published["learner"], tree)
    for f in published["submission"].iterdir():  # the learner's work, in their repository
        for dest in tree.glob(f"katas/*/*/{f.name}"):
            shutil.copy(f, dest)
    _, command, env = _workflow_steps()
    env_file = tmp / "github_env"
    command = command.replace('"$GITHUB_ENV"', str(env_file)).replace("katas -n 2", " ".join(
        str(next(tree.glob(f"katas/*/{k}")).relative_to(tree)) for k in katas) + " -n 2")  # fmt: skip
    out = _entry(
        ["bash", "-c", command.replace("python ", f"{sys.executable} ", 1)],
        {"KATA_OPTIONAL": env["KATA_OPTIONAL"], "KATA_TIME_BUDGET": env["KATA_TIME_BUDGET"],
         "KATA_HIDDEN_KEY": published["key"].read_text().strip()},
        tmp, hide_cuda, cwd=tree, rc=(1,) if hide_cuda else (0,),
    )  # fmt: skip  # pytest exits 1 on an incomplete grade; the step has continue-on-error
    lines = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    runners = lines["KATA_RUNNERS"].split(",")
    payloads = {r: json.loads(base64.b64decode(lines[f"{r.upper()}_RESULTS"])) for r in runners}
    for p in payloads.values():
        validate("github", p)
    return payloads, out


@needs_cuda
def test_workflow_gives_full_points_after_setup(published: dict[str, Path], tmp_path: Path) -> None:  # fmt: skip
    payloads, out = _workflow(published, tmp_path, hide_cuda=False, katas=list(SCENARIO))
    assert sorted(payloads) == ["simt", "vectoradd"]
    total = sum(t["score"] for p in payloads.values() for t in p["tests"])
    assert (total, sum(p["max_score"] for p in payloads.values())) == (200, 200), out[-2000:]
    assert all(p["status"] == "pass" for p in payloads.values())


@needs_root
def test_workflow_without_the_toolchain_is_an_error_with_the_sentence(published: dict[str, Path], tmp_path: Path) -> None:  # fmt: skip
    payloads, out = _workflow(published, tmp_path, hide_cuda=True, katas=["vector-add"])
    assert payloads["harness"]["status"] == "error", (
        "the reporter fails the job: 'Some tests errored'"
    )
    assert SENTENCE.search(payloads["harness"]["tests"][0]["message"])
    assert SENTENCE.search(out), "the terminal says it too"


def test_every_entry_point_passes_a_time_budget_below_its_platforms_limit() -> None:
    def budget(text: str) -> int:
        m = re.search(r"KATA_TIME_BUDGET(?:=\$\{KATA_TIME_BUDGET-|: \")(\d+)", text)
        assert m, "no KATA_TIME_BUDGET in this entry point"
        return int(m[1])

    assert budget((GRADERS / "gradescope_zip" / "run_autograder").read_text()) < 600
    assert budget((GRADERS / "run_prairielearn.sh").read_text()) <= 300 - 60
    workflow = WORKFLOW.read_text()
    minutes = int(re.search(r"timeout-minutes: (\d+)", workflow)[1])
    assert budget(workflow) < minutes * 60 - 120, "room for checkout and the install"


# --------------------------------------------------------------------------- the workflow file
def test_workflows_pass_actionlint() -> None:
    exe = shutil.which("actionlint") or str(Path(sys.executable).parent / "actionlint")
    if not Path(exe).is_file():
        pytest.skip("actionlint is not installed (pip install -e '.[dev]')")
    files = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    proc = subprocess.run([exe, "-no-color", *files], capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bpftrace_counts_only_where_the_kernel_lets_it_trace(tmp_path: Path) -> None:
    """On PATH is not enough: the probe runs bpftrace with a syscall tracepoint and reports the
    kernel's refusal (a container without tracefs) as the reason the capability is missing."""
    from harness.tiers import _probe_bpftrace

    refused = tmp_path / "refused"
    refused.write_text(
        "#!/bin/sh\necho 'stdin:1:1-38: ERROR: tracepoint not found: syscalls:sys_enter_getppid' >&2\n"
        "exit 1\n"
    )
    works = tmp_path / "works"
    runs = tmp_path / "runs"
    works.write_text(
        f'#!/bin/sh\necho run >> {runs}\ncase "$2" in *sys_enter_getppid*exit*) exit 0;; esac\nexit 3\n'
    )
    for f in (refused, works):
        f.chmod(0o755)
    why = _probe_bpftrace(refused)
    assert why is not None and "tracepoint not found: syscalls:sys_enter_getppid" in why
    assert why.startswith("bpftrace cannot trace system calls here (exit 1")
    assert _probe_bpftrace(works) is None, "a program with the syscall tracepoint and exit() ran"
    assert _probe_bpftrace(works) is None and runs.read_text() == "run\n", "the answer is kept"
    works.write_text(works.read_text() + "# another build\n")
    assert _probe_bpftrace(works) is None and runs.read_text() == "run\nrun\n", "a new binary"
