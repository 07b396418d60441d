"""``kata grade``: grade a repository from its canonical tests (what autograders run).

    kata grade [PATHS ...] [--hidden PATH] [--report FORMAT:PATH ...] [-n N]
               [--time-budget SECONDS] [-- PYTEST_ARGS]

One pytest run with ``--kata-grade`` (see :mod:`harness.hidden`): the public and hidden tests
come from the hidden-test bundle (``grading/hidden.bundle``, or the grader's own with
``--hidden``; the key from ``KATA_HIDDEN_KEY``/``KATA_HIDDEN_KEY_FILE``) or from the instructor
tree, never from the learner's test or conftest files; harness files are checked against
``grading/integrity.json`` and a difference is reported as tampering. ``--time-budget`` makes the
run end, reports written, within that many seconds whatever the submission does (pass less than
the grader's own limit: the tests still to run when it is spent fail with the reason).

Exit codes: 0 every graded test passed; 1 a test failed or tampering was found; 2 usage error
(no key, a wrong key, a modified bundle, no such path).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from .layout import find_root

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _root(start: Path | None) -> Path | None:
    return find_root(start)


def pytest_args(args: argparse.Namespace, root: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", *(args.paths or ["katas"]), "--kata-grade"]
    cmd += ["-p", "no:cacheprovider"]
    if args.hidden:
        cmd.append(f"--kata-hidden={Path(args.hidden).resolve()}")
    cmd += [f"--kata-report={spec}" for spec in args.report]
    if args.jobs:
        cmd += ["-n", str(args.jobs)]
    if args.time_budget:
        cmd.append(f"--kata-time-budget={args.time_budget:g}")
    return cmd + list(args.pytest_args)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    p = argparse.ArgumentParser(prog="kata grade", description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*", help="katas to grade (default: katas)")
    p.add_argument("--root", type=Path, default=None, help="repository root (default: search up)")
    p.add_argument("--hidden", metavar="PATH", help="the grader's hidden-test bundle")
    p.add_argument("--report", action="append", default=[], metavar="FORMAT:PATH")
    p.add_argument("-n", "--jobs", type=int, default=None, help="pytest-xdist workers")
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="end the run, reports written, within SECONDS (set it below the grader's limit)",
    )
    args = p.parse_args(argv)
    if args.time_budget is not None and args.time_budget <= 0:
        p.error(f"--time-budget {args.time_budget:g}: must be a positive number of seconds")
    args.pytest_args = extra
    root = _root(args.root)
    if root is None:
        print("kata grade: no katas/ directory here or above; run it in a kata repository",
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    if args.hidden and not Path(args.hidden).is_file():
        print(f"kata grade: --hidden {args.hidden}: no such file", file=sys.stderr)
        return EXIT_USAGE
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    rc = subprocess.run(pytest_args(args, root), cwd=root, env=env, check=False).returncode
    if rc in (0, 1):
        return rc
    return EXIT_USAGE if rc in (4, 5) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
