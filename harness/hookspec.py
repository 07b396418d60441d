"""The gpu-katas plugins' own hooks (registered by :mod:`harness.plugin`'s ``pytest_addhooks``).

Written like ``_pytest/hookspec.py``: each hook says who calls it, when, and what an
implementation must do, so a plugin swaps a mechanism by implementing a hook, not by importing
another plugin. Which plugin calls and which implements is in docs/harness-map.md.

The secrets of a run (the hidden-test key, the bundle, other katas' hidden tests) belong to
:mod:`harness.hidden`; keeping them from learner code is :mod:`harness.sandbox`'s job. The two do
not import each other: the sandbox asks through these hooks, and the hidden plugin answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.hookspec
def pytest_kata_secret_paths(config: pytest.Config) -> list[str]:
    """Return the files learner code must not read in this run.

    :param config: The pytest config object.
    :returns: Absolute paths (a hidden-test bundle, a key file); the results of every
        implementation are joined.

    Called by the sandbox in the pytest process (or xdist worker) each time it starts a sandbox
    child, so after every ``pytest_configure``. The child mounts an empty file over each path
    (where it can) before learner code runs, and a non-empty answer makes the harness process
    not dumpable, so a same-user process cannot read the secrets from its memory either.

    Implemented by :mod:`harness.hidden`. An implementation must be cheap (it is called per
    child) and must not raise.
    """


@pytest.hookspec
def pytest_kata_forget_secrets(config: pytest.Config, kata_dir: Path) -> None:
    """Drop every secret this process holds that the tests of `kata_dir` do not need.

    :param config: The pytest config object.
    :param kata_dir: The kata whose tests this process will run (its directory under katas/).

    Called by the sandbox in a freshly forked sandbox child, once, before any learner code runs
    there and after the sandbox has wiped the key variables from the environment. A fork holds
    copies of everything its parent held: an implementation overwrites secrets in place
    (:func:`harness.sandbox.secrets.wipe_str`, ``wipe_bytes``, ``scrub_memory``), since
    dropping a reference leaves the bytes in memory. What the running kata's own tests need
    must stay usable.

    Implemented by :mod:`harness.hidden` (the key, other katas' hidden tests, the sources of
    hidden test modules already imported). Must not raise: the child reports the harness's own
    errors as a crash of the test.
    """
