"""The README's commands and example output are true: run as printed, they do what it shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import summary_of

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _setup_steps() -> tuple[list[str], list[str]]:
    """The README's first two commands (learner, developer), split at `&&`."""
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block, "the README starts with a bash block of its setup commands"
    lines = [x for x in block[1].splitlines() if x.strip() and not x.startswith("#")]
    learner, developer = ([s.strip() for s in line.split("&&")] for line in lines[:2])
    return learner, developer


def test_readme_setup_activates_the_venv_before_using_its_commands() -> None:
    """`kata hint ...`, which the summary suggests, is only on PATH after activation."""
    for steps in _setup_steps():
        assert steps[:2] == ["python3 -m venv .venv", ". .venv/bin/activate"], steps
        assert not any(".venv/bin/" in s for s in steps[2:]), "activated: plain commands"


def test_ci_run_does_exactly_the_readmes_developer_setup() -> None:
    _, developer = _setup_steps()
    ci = [
        line.strip().replace(" -q ", " ")  # CI installs quietly; the command is the same
        for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    at = [ci.index(step) if step in ci else -1 for step in developer]
    assert -1 not in at, f".ci/run lacks {developer[at.index(-1)]!r} (it has {ci})"
    assert at == sorted(at), ".ci/run runs the README's steps in another order"


def _example() -> tuple[list[str], list[str]]:
    """The README's example run: its command's arguments and the summary it shows."""
    section = README[README.index("## Learner flow") :]
    block = re.search(r"```text\n(.*?)```", section, re.S)
    assert block, "the learner flow shows an example run"
    lines = block[1].splitlines()
    command = lines[0].removeprefix("$ ").split()
    assert command[0] == "pytest", lines[0]
    return command[1:], summary_of("\n".join(lines))


def test_readme_example_summary_is_the_real_output(tmp_path: Path) -> None:
    args, shown = _example()
    bindir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KATA_", "PYTEST_"))}
    env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), NO_COLOR="1")  # activated
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider",
         f"--kata-results-dir={tmp_path}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    real = summary_of(run.stdout)
    total = [i for i, line in enumerate(real) if line.startswith("total:")]
    assert total, run.stdout[-3000:] + run.stderr[-3000:]
    real = real[: total[0] + 1]  # lines after the total (sandbox notes) differ by machine
    assert real == shown, (
        "the README's example summary is not what `pytest " + " ".join(args) + "` prints; "
        "paste this into README.md (Learner flow):\n" + "\n".join(real)
    )
