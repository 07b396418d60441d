"""The gpu-katas pytest plugin: kata collection, learner view, tiers, results.

Registered through the ``pytest11`` entry point, so it is active once the package is installed.
Each hook has one job; the machinery lives in its own module:

- collection: a kata directory (holding ``kata.toml``) is a :class:`KataDir` that validates its
  manifest and adds the hidden tests from ``solutions/``;
- ``kata`` fixture (:mod:`harness.loader`): the learner's sources or the reference solution;
- tiers (:mod:`harness.tiers`): probed once on the controller, handed to xdist workers;
- learner view: unimplemented stubs report as *not started*; a failure carries the hint for it;
- results: each report carries a :class:`~harness.api.KataReportInfo`; on the controller
  :class:`~harness.collector.ResultCollector` builds :mod:`harness.results` from them, saves them
  for ``kata progress`` and renders them (:mod:`harness.terminal`, the report writers).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from . import hangs, layout, seeds
from .api import (
    ITEM_INFO,
    KATA_DIR,
    METRICS,
    STATE,
    TEST_LIMIT,
    KataItemInfo,
    KataReportInfo,
    KataState,
    KataTimeout,
    kata_context,
    wall_limit,
)
from .boundary import BoundaryError
from .collector import KataTaskWarning, ResultCollector
from .loader import (
    KataContext,
    KataLoadError,
    check_impl,
    missing_shortcut,
    patch_file,
    shortcut_dir,
    shortcut_name,
)
from .manifest import MANIFEST_NAME, Manifest, ManifestError, Task, load_manifest
from .results import (
    FAILED,
    NOT_STARTED,
)
from .shared_fixtures import HiddenTests
from .tiers import Capabilities, probe
from .timekeeper import RUN_HANG_S, RUN_QUICK_S, TestLimit, TimeKeeper, scaled_limit

# The parts of the harness that are pytest plugins of their own, loaded when present. Checked by
# file, not by import, so start-up stays cheap.
_HERE = Path(__file__).parent
pytest_plugins = [
    name
    for name in (
        "harness.native.fixtures",  # native(): cached gcc/cffi builds of learner C/C++
        "harness.cuda.fixtures",  # CUDA on the cpu/gpu backends
        "harness.budgets",  # performance budgets against the reference
        "harness.sandbox",  # learner code in a child process with limits
        "harness.hidden",  # hidden tests from an encrypted bundle; grade mode
    )
    if (_HERE.parent / (name.replace(".", "/") + ".py")).is_file()
    or (_HERE.parent / name.replace(".", "/") / "__init__.py").is_file()
]

GATE_MARKER = "kata_gate"
HIDDEN_FAILED = "a hidden test failed"  # what _message says of a hidden failure with no message


def _state(config: pytest.Config) -> KataState:
    return config.stash[STATE]


# --------------------------------------------------------------------------- options and setup
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gpu-katas")
    g.addoption(
        "--kata-impl",
        type=_impl_option,
        default=os.environ.get("KATA_IMPL", "learner"),
        metavar="learner|solution|shortcut:NAME|patch:FILE",
        help="run the tests against the learner's files (default), the reference solutions, "
        "a shortcut submission (solutions/<kata>/shortcuts/NAME over the reference), or the "
        "reference with a unified diff FILE applied (paths relative to solutions/<kata>/)",
    )
    g.addoption(
        "--kata-task",
        action="append",
        default=[],
        metavar="TASK",
        help="run only the tests of this task (by id; may be given several times)",
    )
    g.addoption("--kata-tier", choices=("cpu", "cluster-sim", "gpu"), help="force the tier down")
    g.addoption(
        "--kata-require-tier",
        action="append",
        default=[],
        metavar="TIER",
        help="fail (not skip) tests whose tier is missing, e.g. on a GPU autograder",
    )
    g.addoption(
        "--kata-hidden",
        default="auto",
        metavar="auto|off|PATH",
        help="hidden tests: auto (from solutions/ when present), off, or an encrypted bundle",
    )
    g.addoption(
        "--kata-report",
        action="append",
        default=[],
        metavar="FORMAT:PATH",
        help="write a report: json, html, markdown, gradescope, prairielearn, exercism, github, "
        "junit; may be given several times",
    )
    g.addoption("--kata-results-dir", default=None, help="where results are kept (default .kata/)")
    from .grading import add_options
    from .reports import add_report_options

    add_report_options(g)
    add_options(g)
    g.addoption(
        "--kata-no-timeout", action="store_true", help="disable per-test limits and kata budgets"
    )
    g.addoption(
        "--kata-time-budget",
        type=float,
        default=float(os.environ.get("KATA_TIME_BUDGET") or 0),
        metavar="SECONDS",
        help="end the whole run, reports written, within SECONDS: the budget is shared out over "
        "the katas still to run (graders: set it below the platform's own limit)",
    )
    g.addoption(
        "--kata-hang-allowance",
        type=float,
        default=float(os.environ.get("KATA_HANG_ALLOWANCE") or RUN_HANG_S),
        metavar="SECONDS",
        help="after the run lost SECONDS to tests that hung or ran out their limit, later tests "
        f"get at most {RUN_QUICK_S:g} s each, and after a quarter more none runs "
        f"(default {RUN_HANG_S:g})",
    )
    g.addoption(
        "--kata-sanitize", default=None, help="sanitizers for native builds: address,undefined"
    )
    g.addoption("--kata-no-budgets", action="store_true", help="skip performance-budget tests")
    g.addoption(
        "--kata-seed",
        type=_seed_option,
        default=None,
        metavar="N",
        help="the run seed the hidden tests draw their inputs from (also $KATA_SEED; default: "
        "a fresh one, printed in the summary and the reports): give it to reproduce a run",
    )


def _seed_option(value: str) -> int:
    import argparse

    try:
        return seeds.parse(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _run_seed(config: pytest.Config, worker: dict[str, Any] | None) -> int:
    """The controller's seed on an xdist worker; else --kata-seed, $KATA_SEED or a fresh one."""
    if worker is not None and "kata_seed" in worker:
        return int(worker["kata_seed"])
    if config.option.kata_seed is not None:
        return int(config.option.kata_seed)
    try:
        from_env = seeds.from_env()
    except ValueError as e:
        raise pytest.UsageError(f"${seeds.ENV}: {e}") from None
    return seeds.fresh() if from_env is None else from_env


def _impl_option(value: str) -> str:
    import argparse

    try:
        return check_impl(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@pytest.hookimpl(tryfirst=True)  # before hypothesis' own configure reads --hypothesis-seed
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{GATE_MARKER}(sentence): this test catches a named shortcut; when it fails, its task "
        "earns at most the manifest's gate_fraction of its points, and the sentence says why",
    )
    worker = getattr(config, "workerinput", None)
    if worker is not None and "kata_capabilities" in worker:
        caps = Capabilities.from_json(worker["kata_capabilities"])
    else:
        caps = probe()
        if config.option.kata_tier:
            caps = caps.restricted_to(config.option.kata_tier)
    root = config.rootpath
    results_dir = layout.results_dir(root, config.option.kata_results_dir)
    started = float(worker["kata_run_started"]) if worker and "kata_run_started" in worker else None
    budget = float(config.option.kata_time_budget or 0)
    if budget < 0:
        raise pytest.UsageError(f"--kata-time-budget={budget:g}: must be a number of seconds")
    allowance = float(config.option.kata_hang_allowance)
    if allowance <= 0:
        raise pytest.UsageError(f"--kata-hang-allowance={allowance:g}: must be a number of seconds")
    hangs.forget_all()  # a new session (pytester runs several in one process)
    seed = _run_seed(config, worker)
    seeds.set_run_seed(seed)
    if getattr(config.option, "hypothesis_seed", "absent") is None:
        # Hypothesis draws from the run seed too (state machines, find()): given tests also get
        # a seed of their own per test (_seed_hypothesis); --hypothesis-seed, if given, wins.
        config.option.hypothesis_seed = seed
    state = KataState(
        root=root,
        impl=config.option.kata_impl,
        caps=caps,
        hidden=config.option.kata_hidden,
        results_dir=results_dir,
        reports=list(config.option.kata_report),
        keeper=TimeKeeper(budget, started, allowance),
        seed=seed,
    )
    if started is not None:
        state.started = started
    for spec in state.reports:
        from .reports import check_spec

        try:
            check_spec(spec)
        except ValueError as e:
            raise pytest.UsageError(f"--kata-report={spec}: {e}") from None
    config.stash[STATE] = state
    if worker is None:
        config.pluginmanager.register(ResultCollector(state), "gpu-katas-results")
    config.pluginmanager.register(_TaskCoverage(state), "gpu-katas-task-coverage")
    # Learners read short tracebacks; --tb=long still works when asked for.
    if getattr(config.option, "tbstyle", "auto") == "auto":
        config.option.tbstyle = "short"
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "gpu-katas-xdist")


class _XdistHooks:
    """Hand the controller's probe to each worker, so the machine is probed once per session."""

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["kata_capabilities"] = _state(node.config).caps.to_json()
        node.workerinput["kata_run_started"] = _state(node.config).started
        node.workerinput["kata_seed"] = _state(node.config).seed  # every worker draws alike


def pytest_sessionstart(session: pytest.Session) -> None:
    """`pytest katas/phase09` where there is none: name the phases that are there."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    from .guide import missing_path

    problem = missing_path(config.rootpath, config.invocation_params.dir, list(config.args))
    if problem:
        raise pytest.UsageError(problem)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = _state(config)
    missing = [t for t in ("cluster-sim", "gpu") if not state.caps.has_tier(t)]
    lines = [
        f"gpu-katas: implementation={state.impl}; tiers: {', '.join(state.caps.tiers)}; "
        f"seed {state.seed}"
    ]
    for t in missing:
        lines.append(f"  no {t} tier: {state.caps.why_not(t)}")
    return lines


# --------------------------------------------------------------------------- collection
class KataDir(pytest.Dir):
    """A kata directory: its manifest is validated first, and its hidden tests are added."""

    def collect(self):
        manifest = load_manifest(self.path)  # a ManifestError becomes this node's collection error
        state = _state(self.config)
        name = shortcut_name(state.impl)
        if name is not None and not shortcut_dir(self.path, name).is_dir():
            raise KataLoadError(missing_shortcut(self.path, name))
        if name is not None or patch_file(state.impl) is not None:
            # A patch that does not apply is one error of the kata, naming its hunk.
            KataContext(self.path, manifest, state.impl).search_path  # noqa: B018
        yield from super().collect()
        if state.hidden == "off":
            return
        from .layout import solution_dir

        sol = solution_dir(self.path)
        if sol is None:
            return
        in_tests: list[Path] = []
        for path in sorted(sol.rglob("test_*.py")):
            rel = path.relative_to(sol).parts
            if "__pycache__" in rel or rel[0] == layout.SHORTCUTS:  # shortcuts: learner files
                continue
            if rel[0] == layout.TESTS:
                in_tests.append(path)  # collected below, seeing the public conftest's fixtures
                continue
            ihook = self.session.gethookproxy(path)
            yield from ihook.pytest_collect_file(file_path=path, parent=self)
        if in_tests:
            yield HiddenTests.create(self, sol / layout.TESTS, self.path, in_tests)
        del manifest

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
        if isinstance(excinfo.value, ManifestError):
            return f"invalid kata manifest: {excinfo.value}"
        if isinstance(excinfo.value, KataLoadError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if (path / MANIFEST_NAME).is_file():
        kata_dir = KataDir.from_parent(parent, path=path)
        kata_dir.stash[KATA_DIR] = True
        return kata_dir
    return None


def _item_info(item: pytest.Item) -> KataItemInfo | None:
    try:
        ctx = kata_context(item.config, item.path)
    except (KataLoadError, ManifestError):
        return None
    name = getattr(item, "originalname", item.name)
    task = ctx.manifest.task_for(item.path.name, name)
    hidden = layout.is_hidden_path(item.nodeid)
    return KataItemInfo(ctx.manifest, task, hidden, gate=gate_sentence(item))


def gate_sentence(item: pytest.Item) -> str:
    """The sentence of the test's ``kata_gate`` marker ("" if it has none).

    A marker without exactly one non-empty sentence is a mistake of the test's author: it raises
    a usage error naming the test, since a silent gate would never take points.
    """
    marker = item.get_closest_marker(GATE_MARKER)
    if marker is None:
        return ""
    args = marker.args
    if len(args) != 1 or not isinstance(args[0], str) or not args[0].strip() or marker.kwargs:
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.{GATE_MARKER} takes one sentence saying what the "
            f"submission does wrong, got args={args!r} kwargs={marker.kwargs!r}"
        )
    return " ".join(args[0].split())


def _requirements(item: pytest.Item, info: KataItemInfo) -> tuple[list[str], list[str]]:
    tiers = [info.manifest.tier]
    caps = list(info.manifest.capabilities)
    if info.task is not None:
        tiers += [info.task.tier] if info.task.tier else []
        caps += list(info.task.capabilities)
    for m in item.iter_markers("tier"):
        tiers += list(m.args)
    for m in item.iter_markers("needs"):
        caps += list(m.args)
    return [t for t in tiers if t != "cpu"], caps


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = _state(config)
    required = {t for arg in config.option.kata_require_tier for t in arg.split(",") if t}
    for item in items:
        info = _item_info(item)
        if info is None:
            continue
        item.stash[ITEM_INFO] = info
        tiers, caps = _requirements(item, info)
        for tier in tiers:
            if not state.caps.has_tier(tier):
                info.skip_reason = f"needs the {tier} tier: {state.caps.why_not(tier)}"
                info.missing = tier
                if tier in required:
                    info.fail_reason = f"--kata-require-tier={tier}: {info.skip_reason}"
                break
        else:
            for cap in caps:
                if not state.caps.has(cap):
                    info.skip_reason = f"needs {cap}: {state.caps.why_not(cap)}"
                    info.missing = cap
                    break
        if info.skip_reason and not info.fail_reason:
            item.add_marker(pytest.mark.skip(reason=info.skip_reason))
        if info.manifest not in state.kata_order:
            state.kata_order.append(info.manifest)
    if config.option.kata_task:
        _keep_tasks(config, items, set(config.option.kata_task))


def _keep_tasks(config: pytest.Config, items: list[pytest.Item], tasks: set[str]) -> None:
    """--kata-task: deselect the kata tests of every other task (`kata verify` runs a shortcut's
    task only); tests outside katas are left alone."""
    known = {
        t.id
        for item in items
        if ITEM_INFO in item.stash
        for t in item.stash[ITEM_INFO].manifest.tasks
    }
    unknown = sorted(tasks - known)
    if unknown and items:
        raise pytest.UsageError(
            f"--kata-task: no collected kata has a task {', '.join(map(repr, unknown))}"
        )
    keep, drop = [], []
    for item in items:
        info = item.stash.get(ITEM_INFO, None)
        task = info.task.id if info is not None and info.task is not None else None
        (drop if info is not None and task not in tasks else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class _TaskCoverage:
    """Warn at run time, not only in `kata verify`, when a task matches none of its kata's tests.

    Judged before -k, -m and --deselect drop items, and only for katas whose test files were all
    collected: a one-file run leaves the other files' tasks without tests, and that is fine.
    """

    def __init__(self, state: KataState) -> None:
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        import warnings

        from .guide import kata_test_files, no_test_warning, tasks_without_tests
        from .layout import solution_dir

        by_kata: dict[Path, tuple[Manifest, list[pytest.Item]]] = {}
        for item in items:
            try:
                manifest = kata_context(item.config, item.path).manifest
            except (KataLoadError, ManifestError):
                continue
            by_kata.setdefault(manifest.dir, (manifest, []))[1].append(item)
        for kata_dir, (manifest, kata_items) in by_kata.items():
            hidden = solution_dir(kata_dir) if self.state.hidden != "off" else None
            if not kata_test_files(kata_dir, hidden) <= {i.path for i in kata_items}:
                continue
            tests = [(i.path.name, getattr(i, "originalname", i.name)) for i in kata_items]
            for task in tasks_without_tests(manifest, tests):
                warning = KataTaskWarning(no_test_warning(manifest, task))
                warnings.warn_explicit(warning, KataTaskWarning, str(manifest.path), 1)


@pytest.fixture(scope="module")  # module scope: usable from hypothesis @given tests
def kata(request: pytest.FixtureRequest) -> KataContext:
    """The kata this test belongs to: ``kata.module("simt")``, ``kata.source("alloc.c")``."""
    return kata_context(request.config, request.path)


def test_key(item: pytest.Item) -> str:
    """`test_x.py::test_y[3]`: what a test's random stream is derived from (with the run seed),
    the same whichever directory pytest runs from and wherever the hidden tests come from."""
    return f"{item.path.name}::{item.name}"


@pytest.fixture
def kata_seed(request: pytest.FixtureRequest) -> int:
    """This test's seed: derived from the run seed (``--kata-seed``) and the test's name, so it
    changes from run to run and reproduces with the run seed."""
    return seeds.derive(test_key(request.node))


@pytest.fixture
def kata_rng(kata_seed: int) -> Any:
    """A ``numpy.random.Generator`` seeded with :func:`kata_seed`: hidden tests draw fresh
    inputs from it (``kata_rng.integers(1, 4096)``)."""
    import numpy as np

    return np.random.default_rng(kata_seed)


@pytest.fixture
def kata_random(kata_seed: int) -> Any:
    """A ``random.Random`` seeded with :func:`kata_seed`."""
    import random

    return random.Random(kata_seed)


@pytest.fixture
def kata_metrics(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Numbers and pictures a test reports: ``kata_metrics["ratio"] = 1.7``,
    ``kata_metrics["svg"] = "<svg ...>"`` (embedded in the HTML report). Plain JSON values only:
    they travel from xdist workers to the controller's results."""
    return request.node.stash.setdefault(METRICS, {})


@pytest.fixture
def kata_explain(kata_metrics: dict[str, Any]) -> Callable[[str], None]:
    """``kata_explain("Because ...")`` after a test's checks: the text is shown with the test in
    the summary and the reports when it passed, and never when it did not. Interview-prep katas
    explain a right answer with it; their checks are hidden tests, which ship encrypted, so the
    explanation is seen after the right answer, not before."""

    def explain(text: str) -> None:
        kata_metrics["explanation"] = str(text)

    return explain


# --------------------------------------------------------------------------- running
def _upcoming(state: KataState, manifest: Manifest) -> list[Manifest]:
    """This kata and those this process has not started yet, in collection order."""
    return [m for m in state.kata_order if m is manifest or m.dir not in state.keeper.katas]


def _runs_learner_code(item: pytest.Item, info: KataItemInfo | None) -> bool:
    return info is not None and not info.fail_reason and item.get_closest_marker("skip") is None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Before a kata test: fail it at once for an earlier cause, or set its wall limit; after
    it, charge its time to the kata. Runs in the pytest process (or xdist worker), around the
    sandbox, which runs the test in a child."""
    info = item.stash.get(ITEM_INFO, None)
    if info is None or not _runs_learner_code(item, info):
        return (yield)
    state = _state(item.config)
    enabled = not item.config.option.kata_no_timeout
    upcoming = _upcoming(state, info.manifest)
    reason = state.keeper.fail_now(info.manifest, upcoming, enabled)
    if reason:
        info.fail_reason, info.fail_fast = reason, True
        return (yield)
    item.stash[TEST_LIMIT] = state.keeper.limit(info.manifest, upcoming, enabled)
    start = time.monotonic()
    try:
        return (yield)
    finally:
        hang = _HANGS_BY_NODEID.pop(item.nodeid, None)
        lost = item.nodeid in _OVERRAN  # a limit stopped it: its time was lost, not spent
        _OVERRAN.discard(item.nodeid)
        state.keeper.spent(info.manifest, item.name, time.monotonic() - start, hang, lost)


@pytest.hookimpl(wrapper=True, trylast=True)  # innermost: other plugins' wrappers set up first
def pytest_runtest_setup(item: pytest.Item):
    """The test's wall limit covers its fixtures too: a learner module imported by a fixture
    that never finishes is stopped like a test that never finishes."""
    info = item.stash.get(ITEM_INFO, None)
    if info is not None and info.fail_reason:
        pytest.fail(info.fail_reason, pytrace=False)
    if info is not None:
        _start_alarm(item, wall_limit(item))
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item):
    if ITEM_INFO in item.stash:
        seeds.set_current_key(test_key(item))
        _seed_hypothesis(item)
    narrowed = _narrow_to_scale(item)
    try:
        return (yield)
    finally:
        seeds.set_current_key("")
        # The test's code has ended: its report is made with no alarm pending (one firing in the
        # middle of it stopped the sandbox child: "your code stopped the test run").
        if item.stash.get(_ALARM, None) is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if narrowed:
            _widen_back(item)  # teardown gets what the test's own limit left


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    left = hangs.time_left()
    if item.stash.get(_ALARM, None) is not None and left is not None:
        signal.setitimer(signal.ITIMER_REAL, max(1.0, left))  # fixtures' teardown: what is left
    try:
        return (yield)
    finally:
        _stop_alarm(item)


_ALARM = pytest.StashKey[Any]()  # the SIGALRM handler to restore
_LIMIT_NOW = pytest.StashKey[list]()  # [the TestLimit in force, the setup's deadline]


def _seed_hypothesis(item: pytest.Item) -> None:
    """A kata's @given test draws from a seed of its own, derived from the run seed and its key
    (``hypothesis.seed``, set again before each parametrized case)."""
    obj = getattr(item, "obj", None)
    function = getattr(obj, "__func__", obj)
    if function is None or "hypothesis" not in sys.modules:
        return
    from hypothesis import is_hypothesis_test
    from hypothesis import seed as hypothesis_seed

    if is_hypothesis_test(function):
        hypothesis_seed(seeds.derive(test_key(item)))(function)


def _start_alarm(item: pytest.Item, limit: TestLimit) -> None:
    seconds = limit.seconds
    deadline = time.monotonic() + seconds if seconds > 0 else 0.0
    hangs.begin_test(item.name, deadline)
    use_alarm = (
        seconds > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not use_alarm:
        return

    info = item.stash.get(ITEM_INFO, None)
    names = {Path(f).name for f in info.manifest.files if f.endswith(".py")} if info else set()
    now = item.stash[_LIMIT_NOW] = [limit, deadline]  # the call may narrow it (pytest_runtest_call)

    def on_alarm(signum: int, frame: Any) -> None:
        current, _ = now
        # Name the learner code it stopped in: the function on the stack, or what hangs.running
        # says runs (an import, a kernel, a native call).
        where = hangs.python_entry(frame, names)
        label = f"{where[1]}() in {Path(where[2]).name}" if where else ""
        running = hangs.current()
        label = label or (running[2] if running else "")
        timeout = KataTimeout(current.seconds, current.why, label)
        hangs.record_python_hang(frame, names, str(timeout))  # later calls of it fail at once
        raise timeout

    item.stash[_ALARM] = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _narrow_to_scale(item: pytest.Item) -> bool:
    """The test's call gets its own limit, at its scale (timekeeper.scaled_limit), when that is
    shorter than what the test has left; True when it did (restore the deadline after)."""
    info = item.stash.get(ITEM_INFO, None)
    now = item.stash.get(_LIMIT_NOW, None)
    left = hangs.time_left()
    if info is None or now is None or left is None or item.stash.get(_ALARM, None) is None:
        return False
    scaled = scaled_limit(info.manifest, item.name)
    if scaled is None or scaled.seconds >= left:
        return False
    now[0] = scaled
    hangs.set_deadline(time.monotonic() + scaled.seconds)
    signal.setitimer(signal.ITIMER_REAL, scaled.seconds)
    return True


def _widen_back(item: pytest.Item) -> None:
    now = item.stash.get(_LIMIT_NOW, None)
    if now is not None:
        hangs.set_deadline(now[1])


def _stop_alarm(item: pytest.Item) -> None:
    hangs.end_test()
    previous = item.stash.get(_ALARM, None)
    if previous is None:
        return
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)
    del item.stash[_ALARM]


def _is_todo(excinfo: pytest.ExceptionInfo[BaseException] | None) -> bool:
    return excinfo is not None and excinfo.errisinstance(NotImplementedError)


def _todo_where(excinfo: pytest.ExceptionInfo[BaseException], info: KataItemInfo) -> str:
    """`simt.py:42` — the stub that raised, so the learner knows where to start."""
    harness_dir = Path(__file__).parent
    for entry in reversed(excinfo.traceback):
        path = Path(str(entry.path))
        if harness_dir in path.parents:
            continue
        try:
            rel = path.relative_to(info.manifest.dir)
        except ValueError:
            rel = Path(path.name)
        return f"{rel}:{entry.lineno + 1}"
    return "?"


def _message(excinfo: pytest.ExceptionInfo[BaseException], hidden: bool) -> str:
    if isinstance(excinfo.value, KataLoadError | hangs.KnownHang | BoundaryError):
        return str(excinfo.value)
    if hidden:
        # Hidden tests show their message only: never their source or the expressions asserted.
        text = str(excinfo.value)
        if isinstance(excinfo.value, AssertionError):
            text = text.split("\nassert ", 1)[0]
            text = "" if text.startswith("assert ") else text
        return f"{type(excinfo.value).__name__}: {text}".rstrip(": ") if text else HIDDEN_FAILED
    return excinfo.exconly()[:4000]


_CALLED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def _functions_in(
    excinfo: pytest.ExceptionInfo[BaseException], item: pytest.Item, info: KataItemInfo
) -> frozenset[str]:
    """The learner functions a failure involves, for the hints that belong to them: those the
    traceback passes through in the kata's own files, and those the test's failing line calls."""
    names: set[str] = set()
    kata_dir, tests_dir = info.manifest.dir, info.manifest.dir / "tests"
    for entry in excinfo.traceback:
        path = Path(str(entry.path))
        if kata_dir in path.parents and tests_dir not in path.parents:
            names.add(entry.name)
    for entry in reversed(excinfo.traceback):
        if Path(str(entry.path)) == item.path:
            try:
                names.update(_CALLED.findall(str(entry.statement)))
            except Exception:  # noqa: BLE001 - no source (a test run from memory): frames only
                pass
            break
    return frozenset(names)


def _failing_source(excinfo: pytest.ExceptionInfo[BaseException], item: pytest.Item):
    for entry in reversed(excinfo.traceback):
        if Path(str(entry.path)) == item.path:
            lines = [str(line) for line in entry.source.lines] if entry.source else []
            rel = entry.lineno - entry.getfirstlinesource()
            window = lines[max(0, rel - 3) : rel + 2]
            return entry.lineno + 1, "\n".join(window)
    return None, ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report: pytest.TestReport = yield
    info = item.stash.get(ITEM_INFO, None)
    if info is None:
        return report
    rec = KataReportInfo(info.manifest.id, info.task.id if info.task else None, info.hidden)
    rec.gate = info.gate
    if call.excinfo is not None and call.excinfo.errisinstance(BoundaryError):
        rec.gate = ""  # the value's type failed, not the gate's property (harness/boundary.py)
    rec.metrics = item.stash.get(METRICS, None) or {}
    new_hangs = hangs.take_new()
    if new_hangs:  # the parent process learns of them: later children fail fast too
        rec.hang, rec.more_hangs = new_hangs[0], new_hangs[1:]
    if call.excinfo is not None and call.excinfo.errisinstance(hangs.Overrun):
        rec.overran = True
    if report.skipped and info.skip_reason:
        rec.tier_skip, rec.skip_reason, rec.missing = True, info.skip_reason, info.missing
    elif report.failed and info.fail_fast and report.when == "setup":
        # An earlier test's cause, said once per test: no traceback, no hint (it is not this
        # test's problem); the first such test also names it as the kata's error.
        rec.message = rec.kata_error = info.fail_reason
        rec.outcome, rec.fail_fast = FAILED, True
        report.longrepr = info.fail_reason
    elif report.failed and call.excinfo is not None:
        if _is_todo(call.excinfo):
            where = _todo_where(call.excinfo, info)
            msg = str(call.excinfo.value) or "not implemented yet"
            rec.outcome = NOT_STARTED
            rec.message = f"not started: {msg} ({where})"
            # Reported to pytest as a skip, not a failure: `-x` stops at and `--lf` reruns
            # real failures only. The exit status still says "not solved" (ResultCollector).
            report.outcome = "skipped"
            report.longrepr = (item.location[0], (item.location[1] or 0) + 1, rec.message)
        else:
            # The reports say a hidden test's message only, whoever runs; an instructor's run
            # (the solutions, a shortcut, a patch: solutions/ is at hand) keeps pytest's whole
            # failure in the terminal, a learner's run the message only.
            secret = info.hidden and _state(item.config).impl == "learner"
            rec.message = _message(call.excinfo, info.hidden)
            if rec.message == HIDDEN_FAILED:
                # No message of its own: the test's name says the property, the type what failed.
                rec.message = f"{item.name} failed ({call.excinfo.typename}, without a message)"
            elif info.hidden:  # "KeyError: 2" alone names nothing: where the learner's code raised
                rec.message += _where_learner_raised(call.excinfo.value, info, item.name)
            if info.hidden and not _load_problem(call.excinfo):
                rec.message += f" ({seeds.reproduce_hint(_state(item.config).seed)})"
            if isinstance(call.excinfo.value, KataLoadError) and call.excinfo.value.key:
                rec.load_error = call.excinfo.value.key  # shown once per kata
            if secret:
                report.longrepr = f"hidden test failed: {rec.message}"
            elif info.hidden and not _load_problem(call.excinfo):
                # An instructor's run shows pytest's whole failure; the seed to replay it too.
                hint = seeds.reproduce_hint(_state(item.config).seed)
                report.sections.append(("fresh inputs", hint))
            elif call.excinfo.errisinstance((KataLoadError, hangs.KnownHang)):
                report.longrepr = str(call.excinfo.value)
            elif not info.hidden:
                rec.line, rec.source = _failing_source(call.excinfo, item)
            # every failed test (kata verify --mutants tells a survivor that only raised apart)
            rec.raised = _learner_raised(call.excinfo, info)
            if info.task is not None and rec.gate and not rec.raised:
                report.sections.append(
                    (f"gate of task {info.task.id!r}", _gate_note(info.gate, info.task))
                )
            if info.task is not None and info.task.hints and not _load_problem(call.excinfo):
                name = item.name if isinstance(item, pytest.Function) else item.nodeid
                hint = info.task.hint_for(
                    item.path.name, name, _functions_in(call.excinfo, item, info)
                )
                if hint:  # shown once per task and run: ResultCollector drops the repeats
                    rec.hint = hint
                    report.sections.append((f"hint for task {info.task.id!r}", hint))
    rec.attach(report)
    return report


def _learner_raised(excinfo: pytest.ExceptionInfo[BaseException], info: KataItemInfo) -> str:
    """Where the learner's code raised the exception that failed a test ("" when the test's own
    check failed): sources that do not load, a value the boundary refused (a missing return), or
    an exception whose traceback passes through a learner file, or one that says (`kata_learner_crash`, a sentence) that a child process running
    the learner's native code died of a signal. Such a failure is an honest mistake and never
    trips a gate. A time limit is not an exception of the learner's: a gate may catch a hang."""
    if excinfo.errisinstance((KataTimeout, hangs.KnownHang, hangs.Overrun)):
        return ""
    name = type(excinfo.value).__name__
    if isinstance(excinfo.value, KataLoadError) or _is_build_error(excinfo.value):
        return f"{name}: the sources do not load"
    if isinstance(excinfo.value, BoundaryError):  # a value of the wrong type (a missing return)
        first = str(excinfo.value).splitlines()
        return f"{name}: {first[0]}" if first else name
    crash = getattr(excinfo.value, "kata_learner_crash", "")
    if isinstance(crash, str) and crash:  # a child process running learner C died of a signal
        return f"{name}: {crash}"
    return _raised_in(excinfo.value, {Path(f).name for f in info.manifest.files})


def _is_build_error(exc: BaseException) -> bool:
    """A native build of the learner's sources failed (a compile error: harness.native.build's
    BuildError, CudaCompileError too); by name, so the plugin imports no build machinery."""
    return any(
        c.__name__ == "BuildError" and c.__module__ == "harness.native.build"
        for c in type(exc).__mro__
    )


def _is_native_fault(exc: BaseException) -> bool:
    """The learner's native code failed (harness.NativeFault: a Rust panic a given wrapper
    raised, harness.native's NativeCrash); by name, as _is_build_error."""
    return any(
        c.__name__ == "NativeFault" and c.__module__ == "harness.faults" for c in type(exc).__mro__
    )


def _in_harness(path: Path) -> bool:
    """A frame of the harness itself (harness/plugin.py shares its name with a kata's plugin.py)."""
    try:
        return path.resolve().is_relative_to(Path(__file__).resolve().parent)
    except OSError:
        return False


def _raised_in(exc: BaseException, learner: set[str]) -> str:
    """`exc` passed through a learner file ("<Error> in <file>:<line>"); for a group (hypothesis'
    several distinct failures), every exception in it did."""
    if isinstance(exc, BaseExceptionGroup):
        inner = [_raised_in(e, learner) for e in exc.exceptions]
        return inner[0] if inner and all(inner) else ""
    if _is_native_fault(exc) and not isinstance(exc, hangs.Overrun):
        first = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {first[0]}" if first else type(exc).__name__
    frame = _learner_frame(exc, learner)
    return f"{type(exc).__name__} in {frame[0]}:{frame[1]}" if frame else ""


def _learner_frame(exc: BaseException, learner: set[str]) -> tuple[str, int, str] | None:
    """The innermost frame of `exc`'s traceback in a learner file: (file name, line, function)."""
    import traceback

    found = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        path = Path(frame.f_code.co_filename)
        if path.name in learner and layout.TESTS not in path.parts and not _in_harness(path):
            found = (path.name, lineno, frame.f_code.co_name)
    return found


def _where_learner_raised(exc: BaseException, info: KataItemInfo, test: str) -> str:
    """A hidden test failed because the learner's code raised: where, so the learner can find it
    without the test's source ("" when the exception did not come from a learner file)."""
    frame = _learner_frame(exc, {Path(f).name for f in info.manifest.files})
    if frame is None or isinstance(exc, AssertionError | KataLoadError | BoundaryError):
        return ""
    name, lineno, function = frame
    called = f"{function}() at {name}:{lineno}" if function != "<module>" else f"{name}:{lineno}"
    return f" — raised in {called}, during the hidden test {test}"


def _gate_note(gate: str, task: Task) -> str:
    cap = task.points * task.gate_fraction
    most = f"at most {cap:g} of its {task.points} points" if cap else "no points"
    return f"{gate} — task {task.id!r} earns {most} while this test fails"


def _load_problem(excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    """The sources do not load, or an earlier test hung in this code: no hint is about that."""
    return excinfo.errisinstance((KataLoadError, hangs.KnownHang))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """In the process that dispatched the test: code that hung there is known hung here too, so
    a sandbox child forked later fails fast on it; and its test is charged with the hang."""
    rec = KataReportInfo.of(report)
    if rec is not None and (rec.overran or rec.sandbox == "timeout" or rec.hang is not None):
        _OVERRAN.add(report.nodeid)
    if rec is not None and rec.hang is not None:
        hang = rec.hang
        hangs.record(hang)
        for more in rec.more_hangs:
            hangs.record(more)
        hangs.take_new()  # known here already: not news for this process's next report
        _HANGS_BY_NODEID[report.nodeid] = hang


_HANGS_BY_NODEID: dict[str, hangs.Hang] = {}
_OVERRAN: set[str] = set()  # tests a time limit stopped, until their protocol wrapper ends


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    rec = KataReportInfo.of(report)
    if rec is not None and rec.outcome == NOT_STARTED and report.skipped:
        return "not started", "N", ("NOT STARTED", {"yellow": True})
    return None
