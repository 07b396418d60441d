"""What the gpu-katas sub-plugins may use of the kata plugin: its stash keys, records and helpers.

:mod:`harness.plugin` owns the session (collection, the learner view, results); the plugins it
loads (:mod:`harness.sandbox`, :mod:`harness.budgets`, :mod:`harness.hidden`,
:mod:`harness.cuda.fixtures`) reach it through this module only. Nothing here imports a plugin,
so each depends on this module and never on another's internals.

- stash keys: :data:`STATE` (config), :data:`ITEM_INFO`, :data:`METRICS`, :data:`TEST_LIMIT`
  (item), :data:`KATA_DIR` (collector);
- :class:`KataItemInfo`: what collection found out about a kata test (its kata, task, skips);
- :class:`KataReportInfo`: what the plugin says about a test's report, carried to the process
  that builds the results in ``report.user_properties`` (as JSON: xdist and the sandbox pipe
  move plain data only);
- :func:`kata_context`, :func:`is_kata_dir`, :func:`item_info`, :func:`capabilities`,
  :func:`results_dir`, :func:`wall_limit`, :func:`add_run_error`, :func:`run_result`;
  :func:`in_sandbox_child`.
"""

from __future__ import annotations

import time
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

import pytest

from . import hangs
from .loader import KataContext, KataLoadError, context_for
from .manifest import Manifest, Task
from .results import RunResult
from .tiers import Capabilities
from .timekeeper import TestLimit, TimeKeeper

PROPS_KEY = "gpu_katas"  # the user_properties entry that carries a KataReportInfo


@dataclass
class KataItemInfo:
    """A kata test, as collection found it (``item.stash[ITEM_INFO]``; absent outside katas)."""

    manifest: Manifest
    task: Task | None
    hidden: bool
    skip_reason: str = ""  # a tier/capability is missing
    missing: str = ""  # ... which one (grade mode: the grader's fault, see harness.grading)
    fail_reason: str = ""  # ... and --kata-require-tier makes that a failure
    gate: str = ""  # the kata_gate sentence, when this test gates its task
    fail_fast: bool = False  # fail_reason is an earlier test's cause (a hang, a spent budget)


@dataclass
class KataState:
    """The kata plugin's session (``config.stash[STATE]``). Sub-plugins read it through the
    functions below; its fields are the plugin's to change."""

    root: Path
    impl: str
    caps: Capabilities
    hidden: str
    results_dir: Path
    reports: list[str]
    result: RunResult | None = None  # built on the controller at session finish
    written: list[str] = field(default_factory=list)
    contexts: dict[Path, KataContext] = field(default_factory=dict)
    keeper: TimeKeeper = field(default_factory=TimeKeeper)
    started: float = field(default_factory=time.time)  # the run's start (the controller's)
    kata_order: list[Manifest] = field(default_factory=list)  # katas in collection order
    run_errors: list[str] = field(default_factory=list)  # from add_run_error, said first
    seed: int = 0  # the run seed (harness.seeds): the controller's, on every worker too


STATE = pytest.StashKey[KataState]()
ITEM_INFO = pytest.StashKey[KataItemInfo]()
METRICS = pytest.StashKey[dict[str, Any]]()
TEST_LIMIT = pytest.StashKey[TestLimit]()  # this test's wall limit and why (set before it runs)
KATA_DIR = pytest.StashKey[bool]()  # on the collector of a kata directory (holding kata.toml)


@dataclass
class KataReportInfo:
    """What the kata plugin says about one test report, beyond pytest's own fields.

    Written by :mod:`harness.plugin` (``pytest_runtest_makereport``) and by the sandbox for a
    child that died; read on the controller by the results. Travels as :meth:`to_json` under
    :data:`PROPS_KEY` in ``report.user_properties``; fields at their defaults are left out.
    """

    kata: str
    task: str | None
    hidden: bool = False
    gate: str = ""  # the test's kata_gate sentence
    outcome: str = ""  # the kata's verdict where it differs from pytest's (not started, fail fast)
    message: str = ""  # the one line the learner reads
    metrics: dict[str, Any] = field(default_factory=dict)  # kata_metrics
    hang: hangs.Hang | None = None  # code this test found hung (later tests fail fast on it)
    more_hangs: list[hangs.Hang] = field(default_factory=list)
    tier_skip: bool = False  # skipped for a missing tier or capability ...
    skip_reason: str = ""  # ... saying why
    missing: str = ""  # ... and which
    fail_fast: bool = False  # failed at setup for an earlier test's cause ...
    kata_error: str = ""  # ... said once as the kata's error
    load_error: str = ""  # the learner's sources do not load: the key to say it once per kata
    line: int | None = None  # where a public test failed, and its source lines
    source: str = ""
    sandbox: str = ""  # how a sandbox child ended when it sent no report ("crash", "exit", ...)
    overran: bool = False  # stopped by a time limit (test alarm, launch limit): its time was lost
    hint: str = ""  # the task's hint for this failure (harness.manifest.Task.hint_for)
    raised: str = ""  # the learner's code raised (not the test's check): a gate is not tripped

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kata": self.kata, "task": self.task, "hidden": self.hidden}
        for f in fields(self)[3:]:
            value = getattr(self, f.name)
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            if value == default:
                continue
            if f.name == "hang":
                value = value.to_json()
            elif f.name == "more_hangs":
                value = [h.to_json() for h in value]
            data[f.name] = value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KataReportInfo:
        """The record :meth:`to_json` wrote; an unknown key is a TypeError (a writer drifted)."""
        kw = dict(data)
        if kw.get("hang") is not None:
            kw["hang"] = hangs.Hang.from_json(kw["hang"])
        kw["more_hangs"] = [hangs.Hang.from_json(h) for h in kw.get("more_hangs", [])]
        return cls(**kw)

    @classmethod
    def of(cls, report: pytest.TestReport) -> KataReportInfo | None:
        """The record attached to `report`, or None (not a kata test, or a crashed worker's)."""
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPS_KEY:
                return cls.from_json(value)
        return None

    def attach(self, report: pytest.TestReport) -> None:
        """Attach this record to `report`, replacing the one it has."""
        entry = (PROPS_KEY, self.to_json())
        props = report.user_properties
        at = next((i for i, (name, _) in enumerate(props) if name == PROPS_KEY), None)
        if at is None:
            props.append(entry)
        else:
            props[at] = entry


class KataTimeout(hangs.Overrun):
    """The test ran past its wall limit (the kata's time_limit, or what its budget had left)."""

    def __init__(self, seconds: float, why: str = "the kata's time_limit", where: str = "") -> None:
        at = f" in {where}" if where else ""
        super().__init__(f"exceeded {hangs.seconds_text(seconds)} s wall time ({why}){at}")
        self.seconds, self.why, self.where = seconds, why, where  # where: the learner code


# --------------------------------------------------------------------------- reading the session
def kata_context(config: pytest.Config, path: Path) -> KataContext:
    """The kata of the test file at `path`, as this run loads it (learner, solution, shortcut).

    Raises :class:`harness.loader.KataLoadError` when `path` is in no kata or the kata plugin is
    not active (``-p no:gpu_katas``), and :class:`harness.manifest.ManifestError` when the
    kata's manifest does not load. Cached per path for the session.
    """
    state = config.stash.get(STATE, None)
    if state is None:
        raise KataLoadError(f"{path}: the gpu-katas plugin is not active in this run")
    if path not in state.contexts:
        state.contexts[path] = context_for(path, state.impl)
    return state.contexts[path]


def is_kata_dir(collector: pytest.Collector) -> bool:
    """Whether `collector` is a kata directory's: its children are the kata's tests, public and
    hidden (``harness.hidden`` adds or replaces the hidden ones)."""
    return collector.stash.get(KATA_DIR, False)


def item_info(item: pytest.Item) -> KataItemInfo | None:
    """The kata test's collection info; None for a test outside katas."""
    return item.stash.get(ITEM_INFO, None)


def capabilities(config: pytest.Config) -> Capabilities | None:
    """The tiers and capabilities this run has (probed once, on the controller); None where the
    kata plugin is not active."""
    state = config.stash.get(STATE, None)
    return None if state is None else state.caps


def results_dir(config: pytest.Config) -> Path:
    """Where this run keeps its results (``--kata-results-dir``, default ``.kata/``)."""
    return Path(config.stash[STATE].results_dir)


def wall_limit(item: pytest.Item) -> TestLimit:
    """The wall limit of a kata test and why: what its kata's time budget left it (set before it
    runs) or the kata's time_limit; no limit outside katas or under ``--kata-no-timeout``."""
    info = item_info(item)
    if info is None or item.config.option.kata_no_timeout:
        return TestLimit(0.0, "")
    return item.stash.get(TEST_LIMIT, None) or TestLimit(
        float(info.manifest.time_limit), "the kata's time_limit"
    )


def add_run_error(config: pytest.Config, message: str) -> None:
    """Make `message` an error of the whole run (not of one kata): the run fails and every report
    says it. Counts where the results are built (the controller, not an xdist worker); such errors
    come first in the run's errors, in the order added."""
    config.stash[STATE].run_errors.append(message)


def run_result(config: pytest.Config) -> RunResult | None:
    """The run's results, once built (on the controller, at session finish); None before, on an
    xdist worker, and in a run of no kata."""
    state = config.stash.get(STATE, None)
    return None if state is None else state.result


# --------------------------------------------------------------------------- the sandbox child
_in_child = False


def in_sandbox_child() -> bool:
    """Whether this process is a sandbox child (:mod:`harness.sandbox`), where a test's reports
    are made, not dispatched: locks and report rewrites belong to the parent."""
    return _in_child


def mark_sandbox_child() -> None:
    """Called once by the sandbox in a child it forked, before any test runs there."""
    global _in_child
    _in_child = True


__all__ = [
    "ITEM_INFO",
    "KATA_DIR",
    "METRICS",
    "PROPS_KEY",
    "STATE",
    "TEST_LIMIT",
    "KataItemInfo",
    "KataReportInfo",
    "KataState",
    "KataTimeout",
    "add_run_error",
    "capabilities",
    "in_sandbox_child",
    "is_kata_dir",
    "item_info",
    "kata_context",
    "mark_sandbox_child",
    "results_dir",
    "run_result",
    "wall_limit",
]
