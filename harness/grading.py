"""Grade mode and the grader's capabilities: a test skipped because the *grader* lacks a tier
or capability is the grader's fault, not the learner's.

In grade mode (``--kata-grade``, or ``--kata-grader`` for a grader that runs the katas
without the hidden-test key, as the GitHub workflow may) such a skip makes the run an error, with one sentence for the
instructor per missing tier or capability ("this grader has no nvcc: install the [cuda] extra
(...); 50 points of vector-add were not graded"), in the terminal and in every report, unless
the instructor declared it optional for this grader (``--kata-optional=gpu`` or
``KATA_OPTIONAL=gpu``): then a task none of whose tests could run here leaves the possible
points (a test of a task that partly ran is weighed 0), and the run notes say so. The points of
a non-optional skip stay in the denominator: the possible points never shrink by accident.

Learner runs keep their friendly skips: this module is not used outside grade mode.
"""

from __future__ import annotations

import os
from typing import Any

from .capabilities import missing_sentence
from .results import SKIPPED, RunResult
from .terminal import fmt_points


def add_options(group: Any) -> None:
    group.addoption(
        "--kata-grader",
        action="store_true",
        default=os.environ.get("KATA_GRADER", "") not in ("", "0"),
        help="this run is a grader's (implied by --kata-grade): a tier or capability the machine "
        "lacks makes the run an error instead of a skip, unless declared --kata-optional",
    )
    group.addoption(
        "--kata-optional",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help="grade mode: tiers or capabilities this grader may lack (e.g. gpu); their tasks "
        "leave the possible points instead of making the run an error (also $KATA_OPTIONAL)",
    )


def active(config: Any) -> bool:
    return bool(getattr(config.option, "kata_grade", False) or config.option.kata_grader)


def optional_names(config: Any) -> set[str]:
    values = [*config.option.kata_optional, os.environ.get("KATA_OPTIONAL", "")]
    return {n.strip() for v in values for n in v.split(",") if n.strip()}


def apply(result: RunResult, optional: set[str]) -> bool:
    """Turn grader-missing skips into run errors (or excused tasks); True when one was added."""
    lost: dict[str, dict[str, float]] = {}  # missing name -> kata -> points not graded
    excused: dict[str, list[tuple[str, int]]] = {}  # optional name -> ("kata › task", points)
    for kata in result.katas:
        for task in kata.tasks:
            skipped = [r for r in task.tests if r.outcome == SKIPPED and r.missing]
            if not skipped:
                continue
            shares = dict(zip((id(r) for r in task.tests), task.shares, strict=True))
            if len(skipped) == len(task.tests) and all(r.missing in optional for r in skipped):
                name = skipped[0].missing
                task.excused = f"not graded here: {name} is optional on this grader"
                excused.setdefault(name, []).append((f"{kata.id} › {task.id}", task.points))
                continue
            for r in skipped:
                if r.missing not in optional:
                    per_kata = lost.setdefault(r.missing, {})
                    per_kata[kata.id] = per_kata.get(kata.id, 0.0) + shares[id(r)]
            dropped = [r for r in skipped if r.missing in optional]
            if dropped:  # the task's points go to the tests that could run here
                task.tests = [r for r in task.tests if r not in dropped]
                for r in dropped:
                    excused.setdefault(r.missing, []).append((f"{kata.id} › {r.name}", 0))
    for name, per_kata in lost.items():
        result.errors.append(missing_sentence(name, per_kata, fmt_points))
    for name, tasks in excused.items():
        points = sum(p for _, p in tasks)
        result.notes.append(
            f"{name} is optional on this grader: {points} points left out of the possible "
            f"points ({', '.join(t for t, _ in tasks)})"
        )
    return bool(lost)
