"""The oracle fence, tried with hostile submissions: learner code cannot import the grader's
modules, however it spells the import; what the kata gives still imports."""

from __future__ import annotations

import json
import pkgutil

import pytest

from harness.sandbox import fence

from .conftest import DEMO_MANIFEST, KataRepo

PUBLIC = """\
def test_add_loads(kata):
    assert kata.module("calc").add(2, 3) == 5
"""

OK_BODY = "\n\ndef add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n"


def write_shortcut(repo: KataRepo, name: str, files: dict[str, str]) -> None:
    """Shortcut `name` of the demo kata: `files` as a patch against today's reference."""
    from harness.patches import make_patch

    base = repo.root / "solutions/phase01/demo"
    repo.write(
        f"solutions/phase01/demo/shortcuts/{name}/shortcut.toml", 'task = "add"\nwhy = "w"\n'
    )
    changes = {
        r: ((base / r).read_text() if (base / r).is_file() else None, t) for r, t in files.items()
    }
    (base / "shortcuts" / name / "shortcut.patch").write_text(make_patch(changes))


def run_learner(repo: KataRepo, calc: str, *args: str, manifest: str | None = None) -> dict:
    """Run the demo kata with `calc` as the learner's calc.py; the test's record."""
    repo.add_demo(stub=calc, public=PUBLIC, hidden=None, manifest=manifest)
    repo.pytester.runpytest("katas", "-p", "no:randomly", *args)
    data = json.loads((repo.root / ".kata" / "last-run.json").read_text())
    return next(r for t in data["katas"][0]["tasks"] for r in t["tests"])


@pytest.mark.parametrize(
    "code, refused, instead",
    [
        ("from harness.cuda.static import occupancy", "harness.cuda.static", "grader's oracle"),
        ("import harness.cuda.static as s", "harness.cuda.static", "grader's oracle"),
        ("from harness.cuda import static", "harness.cuda.static", "grader's oracle"),
        ("from harness.cuda.static.calculator import occupancy", "harness.cuda.static.calculator",
         "grader's oracle"),
        ("import importlib\nimportlib.import_module('harness.cuda.static.opcodes')",
         "harness.cuda.static.opcodes", "grader's oracle"),
        ("import harness.hidden", "harness.hidden", "hidden tests run at grading"),
        ("from harness import testing", "harness.testing", "test helpers belong to tests"),
        ("import importlib\nimportlib.import_module('harness.budgets')", "harness.budgets",
         "budgets are measured by the tests"),
        ("__import__('harness.ptx')", "harness.ptx", "generate it yourself"),
        ("import builtins\nbuiltins.__import__('harness.loader', None, None, ['KataContext'])",
         "harness.loader", "part of the grader"),
        ("from importlib import import_module as im\nim('.plugin', 'harness')", "harness.plugin",
         "part of the grader"),
        ("__name__ = 'harness.pretend'\nimport harness.cuda.static", "harness.cuda.static",
         "grader's oracle"),
        ("import solutions.phase01.demo.calc", "solutions.phase01.demo.calc",
         "the reference solution is not part of the kata"),
    ],
)  # fmt: skip
def test_refused_imports_name_the_import_and_what_to_use(
    repo: KataRepo, code: str, refused: str, instead: str
) -> None:
    record = run_learner(repo, code + OK_BODY)
    assert record["outcome"] == "failed", record
    message = record["message"]
    assert f"import of '{refused}' refused (calc.py:" in message, message
    assert instead in message
    assert "Learner code may import harness (todo() and KataTodo" in message


def test_what_learners_may_import_still_imports(repo: KataRepo) -> None:
    code = (
        "import harness\nfrom harness import todo, KataTodo\nfrom harness.cuda import In, Out\n"
        "import harness.toolchain\nfrom harness.toolchain import find_tool\nimport numpy, json\n"
        "import importlib\nimportlib.import_module('harness.cuda.errors')\n"
    )
    record = run_learner(repo, code + OK_BODY)
    assert record["outcome"] == "passed", record["message"]


def test_another_implementation_is_refused(repo: KataRepo) -> None:
    code = (
        "import importlib\n"
        "importlib.import_module(__name__.split('.')[0].replace('_learner_', '_solution_') "
        "+ '.calc')\n"
    )
    record = run_learner(repo, code + OK_BODY)
    assert "it is another implementation of a kata" in record["message"], record


def test_the_fence_holds_without_the_sandbox_too(repo: KataRepo) -> None:
    record = run_learner(repo, "import harness.cuda.static" + OK_BODY, "--kata-no-sandbox")
    assert "import of 'harness.cuda.static' refused" in record["message"], record


def test_undoing_the_fence_is_tampering(repo: KataRepo) -> None:
    code = "import builtins, importlib._bootstrap as b\nbuiltins.__import__ = b.__import__\n"
    record = run_learner(repo, code + OK_BODY)
    assert record["outcome"] == "failed"
    assert (
        "tampered with the test harness" in record["message"] and "__import__" in record["message"]
    )


GIVEN_MANIFEST = DEMO_MANIFEST.format(id="demo", time_limit=10).replace(
    'files = ["calc.py"]', 'files = ["calc.py"]\ngiven = ["sim.py"]'
)


def test_given_modules_may_wrap_oracles_but_learner_helpers_are_fenced(repo: KataRepo) -> None:
    # The given module uses the oracle on the learner's behalf (as nvcc-pipeline's toolchain.py
    # runs the real tools): allowed. A helper the learner adds is learner code: fenced.
    repo.write("katas/phase01/demo/sim.py", "from harness.cuda.static import occupancy\nBASE = 0\n")
    record = run_learner(repo, "from .sim import BASE" + OK_BODY, manifest=GIVEN_MANIFEST)
    assert record["outcome"] == "passed", record["message"]
    repo.write("katas/phase01/demo/helper.py", "from harness.cuda.static import occupancy\n")
    record = run_learner(repo, "from . import helper" + OK_BODY, manifest=GIVEN_MANIFEST)
    assert "import of 'harness.cuda.static' refused (helper.py:1)" in record["message"], record


def test_reference_and_kata_tests_are_not_fenced(repo: KataRepo) -> None:
    repo.add_demo()
    repo.write(
        "katas/phase01/demo/tests/test_uses_oracle.py",
        "from harness.cuda import static\n\ndef test_add_oracle(kata):\n"
        "    assert static is not None and kata.module('calc').add(1, 1) == 2\n",
    )
    result = repo.pytester.runpytest("katas", "--kata-impl=solution", "-n", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


def test_refusal_text_lists_the_allowlist() -> None:
    kata = fence.KataFiles("_kata_x", "x", (), frozenset({"a.py"}), frozenset({"sim.py"}))
    text = fence._allowed_text(kata)
    for module in fence.ALLOWED:
        assert module in text
    assert "given: sim.py" in text
    assert fence._refusal(kata, "harness.cuda.static") is not None
    import harness.cuda.static as static  # a package: every module of it is the oracle too

    for sub in pkgutil.iter_modules(static.__path__, "harness.cuda.static."):
        assert "grader's oracle" in (fence._refusal(kata, sub.name) or ""), sub.name
    assert fence._refusal(kata, "harness.cuda") is None and fence._refusal(kata, "numpy") is None
    assert fence._refusal(kata, "_kata_x.sim") is None


def test_verify_notes_modules_that_are_neither_learner_files_nor_given(repo: KataRepo) -> None:
    from harness.manifest import load_manifest
    from harness.verify import _undeclared_modules

    kata = repo.add_demo(manifest=GIVEN_MANIFEST)
    repo.write("katas/phase01/demo/sim.py", "")
    assert _undeclared_modules(load_manifest(kata)) == []
    repo.write("katas/phase01/demo/extra.py", "")
    assert _undeclared_modules(load_manifest(kata)) == [
        "extra.py: neither a learner file nor given (the fence treats it as learner code)"
    ]
    plain = repo.add_demo("plain", phase_dir="phase02")
    assert "no `given` list" in _undeclared_modules(load_manifest(plain))[0]


def test_a_reference_file_shared_by_a_shortcut_and_the_budgets_reference(repo: KataRepo) -> None:
    """A shortcut run loads the reference's unreplaced files in its own package, and the budgets
    load the same files again as the reference: each copy imports its own siblings."""
    manifest = GIVEN_MANIFEST.replace('files = ["calc.py"]', 'files = ["calc.py", "other.py"]')
    repo.add_demo(manifest=manifest, public=PUBLIC, hidden=None)
    repo.write("katas/phase01/demo/sim.py", "BASE = 0\n")
    repo.write("katas/phase01/demo/other.py", "")
    repo.write("solutions/phase01/demo/other.py", "")
    repo.write("solutions/phase01/demo/calc.py", "from .sim import BASE" + OK_BODY)
    write_shortcut(repo, "empty", {"other.py": "X = 1\n"})
    repo.write(
        "katas/phase01/demo/tests/test_both.py",
        "from harness.loader import KataContext\n\n"
        "def test_add_both(kata):\n"
        "    assert kata.module('calc').add(1, 2) == 3\n"
        "    ref = KataContext(kata.dir, kata.manifest, 'solution')\n"
        "    assert ref.module('calc').add(1, 2) == 3\n",
    )
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:empty")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


READ_REFERENCE = """\
from pathlib import Path

root = next(p for p in Path(__file__).resolve().parents if (p / "solutions").is_dir())
exec(compile((root / {target!r}).read_text(), __file__, "exec"))
"""


@pytest.mark.parametrize(
    "impl, target",
    [
        ("learner", "solutions/phase01/demo/calc.py"),
        ("learner", "solutions/phase01/demo/tests/test_hidden_demo.py"),
        ("shortcut:peek", "solutions/phase01/demo/calc.py"),  # the file the shortcut replaces
    ],
)
def test_reading_the_reference_or_hidden_tests_from_disk_is_refused(
    repo: KataRepo, impl: str, target: str
) -> None:
    code = READ_REFERENCE.format(target=target)
    repo.add_demo(stub=code, public=PUBLIC, hidden=None)
    write_shortcut(repo, "peek", {"calc.py": code})
    record = run_learner(repo, code, f"--kata-impl={impl}")
    assert record["outcome"] != "passed", record
    assert "PermissionError: learner code may not read" in record["message"], record
    assert target in record["message"]


def test_a_shortcut_still_loads_the_reference_files_it_does_not_replace(repo: KataRepo) -> None:
    manifest = DEMO_MANIFEST.format(id="demo", time_limit=10).replace(
        'files = ["calc.py"]', 'files = ["calc.py", "other.py"]'
    )
    repo.add_demo(manifest=manifest, public=PUBLIC, hidden=None)
    repo.write("katas/phase01/demo/other.py", "")
    repo.write("solutions/phase01/demo/other.py", "def add(a, b):\n    return a + b\n")
    write_shortcut(repo, "s", {"calc.py": "from .other import add\n"})
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:s")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


READ_GRADER = """\
import sys, types
from pathlib import Path

path = {path}
source = Path(path).read_text()
scratch = types.ModuleType("scratch")
exec(compile(source, "scratch.py", "exec"), scratch.__dict__)
"""


@pytest.mark.parametrize(
    "path, what",
    [
        ("Path(sys.modules['harness'].__file__).parent / 'cuda/static/calculator.py'",
         "it belongs to the grader"),
        ("Path(__file__).parent / 'sim.py'", "it is a given module of the kata"),
        ("next(p for p in Path(__file__).resolve().parents if (p / 'katas').is_dir())"
         " / '.kata/last-run.json'", "it belongs to the grader"),
    ],
)  # fmt: skip
def test_reading_the_graders_or_a_given_modules_source_is_refused(
    repo: KataRepo, path: str, what: str
) -> None:
    """A copy of the grader's calculator or of a given simulator, compiled under another name,
    is the same oracle that the fence and watch_calls know by its file and module name."""
    repo.write("katas/phase01/demo/sim.py", "BASE = 0\n")
    repo.write("solutions/phase01/demo/sim.py", "BASE = 0\n")
    repo.write(".kata/last-run.json", "{}")
    code = READ_GRADER.format(path=path) + OK_BODY
    record = run_learner(repo, code, manifest=GIVEN_MANIFEST)
    assert record["outcome"] != "passed", record
    assert "PermissionError: learner code may not read" in record["message"], record
    assert what in record["message"], record


def test_importing_and_reloading_a_given_module_still_work(repo: KataRepo) -> None:
    """The import system reads the given module for learner code: that is not the learner's read."""
    repo.write("katas/phase01/demo/sim.py", "BASE = 0\n")
    repo.write("solutions/phase01/demo/sim.py", "BASE = 0\n")
    code = (
        "from .sim import BASE\nimport importlib\n"
        "importlib.reload(importlib.import_module(__package__ + '.sim'))\n"
    )
    record = run_learner(repo, code + OK_BODY, manifest=GIVEN_MANIFEST)
    assert record["outcome"] == "passed", record["message"]
