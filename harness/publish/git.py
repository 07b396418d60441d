"""Commit a directory tree as a branch of a git repository, without touching its work tree.

A temporary index is filled from the tree (``git --work-tree=TREE add -A``), written with
``write-tree`` and committed on top of the branch's previous commit, so a republish is one new
commit per branch, and the target may be bare or have another branch checked out.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

_IDENTITY = {"GIT_AUTHOR_NAME": "gpu-katas publish", "GIT_AUTHOR_EMAIL": "publish@gpu-katas",
             "GIT_COMMITTER_NAME": "gpu-katas publish", "GIT_COMMITTER_EMAIL": "publish@gpu-katas"}  # fmt: skip


class GitError(Exception):
    pass


def _git(args: list[str], env: dict[str, str], cwd: Path | None = None) -> str:
    proc = subprocess.run(["git", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args[:3])}: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout.strip()


def ensure_repo(repo: Path) -> Path:
    """The git directory of `repo`, created (``git init``) when `repo` does not exist yet."""
    if not repo.exists():
        repo.mkdir(parents=True)
        _git(["init", "-q", str(repo)], dict(os.environ))
    return Path(_git(["rev-parse", "--absolute-git-dir"], dict(os.environ), cwd=repo))


def commit_tree(repo: Path, tree: Path, branch: str, message: str) -> str:
    """Commit `tree`'s files as the new head of `branch` in `repo`; returns the commit id."""
    git_dir = ensure_repo(repo)
    with tempfile.TemporaryDirectory(prefix="kata-publish-") as tmp:
        env = {**_IDENTITY, **os.environ, "GIT_DIR": str(git_dir),
               "GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_WORK_TREE": str(tree)}  # fmt: skip
        # The tree is exactly what publish built: no ignore rules of the target apply.
        _git(["add", "-A", "-f", "."], env, cwd=tree)
        tree_id = _git(["write-tree"], env)
        parent = subprocess.run(["git", "rev-parse", "-q", "--verify", f"refs/heads/{branch}"],
                                env=env, capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
        args = ["commit-tree", tree_id, "-m", message] + (["-p", parent] if parent else [])
        commit = _git(args, env)
        _git(["update-ref", f"refs/heads/{branch}", commit], env)
    return commit
