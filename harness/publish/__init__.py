"""``kata publish``: build the learner and solutions trees, check them, commit them as branches.

    kata publish [--out DIR] [--repo GIT_REPO] [--katas simt,coalesce]
                 [--key-file PATH | --new-key PATH] [--message TEXT]
    kata publish --check [TREE]

The key comes from ``KATA_HIDDEN_KEY`` / ``KATA_HIDDEN_KEY_FILE``, ``--key-file``, or is made
afresh with ``--new-key PATH`` (written there, never overwritten; keep it out of the tree). The
learner tree is scanned for leaks before anything is committed: lines of reference code or
hidden tests (:mod:`.check`) and private keys (:mod:`.private_keys`: a vendor's signing key must
never ship); ``--check`` scans an existing tree (default: the last build) and only reports.

Exit codes: 0 published (or no leak); 1 a leak was found; 2 usage or input error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..hidden.keys import Key, KeyProblem, load_key, new_key, read_key_file, write_key_file
from ..layout import find_root
from ..manifest import ManifestError
from .check import scan, secrets
from .git import GitError, commit_tree
from .private_keys import find_private_keys
from .trees import PublishError, build, select_katas

EXIT_OK, EXIT_LEAK, EXIT_USAGE = 0, 1, 2


def _root(start: Path | None) -> Path:
    root = find_root(start)
    if root is None:
        raise PublishError(f"no katas/ directory at or above {(start or Path.cwd()).resolve()}")
    return root


def _key(args: argparse.Namespace, out: Path) -> Key:
    if args.key_file and args.new_key:
        raise PublishError("--key-file and --new-key exclude each other")
    if args.key_file:
        return read_key_file(Path(args.key_file), f"--key-file {args.key_file}")
    if args.new_key:
        path = Path(args.new_key).resolve()
        if path.exists():
            raise PublishError(f"--new-key {args.new_key}: the file exists; pass it as --key-file")
        if out.resolve() in path.parents:
            raise PublishError(f"--new-key {args.new_key}: inside the published trees ({out})")
        key = new_key()
        write_key_file(path, key)
        print(f"new hidden-test key {key.fingerprint} written to {path}: keep it secret")
        return key
    key = load_key()
    if key is None:
        raise PublishError(
            "no hidden-test key: set KATA_HIDDEN_KEY or KATA_HIDDEN_KEY_FILE, or pass "
            "--key-file PATH (or --new-key PATH for a new one)"
        )
    return key


def _report_leaks(leaks: list, tree: Path) -> int:
    keys = find_private_keys(tree)
    for key in keys:
        print(f"check: a private key in {tree}: {key}", file=sys.stderr)
    if not leaks:
        print(f"check: no line of reference code or hidden test in {tree}")
        return EXIT_LEAK if keys else EXIT_OK
    print(f"check: {len(leaks)} line(s) of solutions/ in {tree}:", file=sys.stderr)
    for leak in leaks[:50]:
        print(f"  {leak}", file=sys.stderr)
    if len(leaks) > 50:
        print(f"  ... and {len(leaks) - 50} more", file=sys.stderr)
    return EXIT_LEAK


def run(args: argparse.Namespace) -> int:
    root = _root(args.root)
    out = Path(args.out) if args.out else root / "build" / "publish"
    ids = [k for k in (args.katas or "").split(",") if k]
    if args.check is not None:
        tree = Path(args.check) if args.check else out / "learner"
        if not tree.is_dir():
            raise PublishError(f"--check {tree}: no such directory (run `kata publish` first)")
        return _report_leaks(scan(tree, secrets(root, select_katas(root, ids))), tree)
    key = _key(args, out)
    pub = build(root, out, key, ids)
    print(f"learner tree:   {pub.learner} ({len(pub.learner_files)} files, "
          f"{pub.hidden_tests} hidden test functions sealed with key {key.fingerprint})")  # fmt: skip
    print(f"solutions tree: {pub.solutions}")
    status = _report_leaks(scan(pub.learner, secrets(root, pub.katas)), pub.learner)
    if status != EXIT_OK:
        print("not committed: fix the leaks first", file=sys.stderr)
        return status
    if args.repo:
        message = args.message or f"publish {', '.join(m.id for m in pub.katas)}"
        for tree, branch in ((pub.learner, args.learner_branch),
                             (pub.solutions, args.solutions_branch)):  # fmt: skip
            commit = commit_tree(Path(args.repo), tree, branch, message)
            print(f"committed {branch} = {commit[:12]} in {args.repo}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kata publish", description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=None, help="instructor repository (default: here)")
    p.add_argument("--out", help="where to build the trees (default build/publish)")
    p.add_argument("--repo", help="git repository to commit the branches to (created if absent)")
    p.add_argument("--katas", help="comma-separated kata ids (default: all)")
    p.add_argument("--key-file", help="file holding the hidden-test key")
    p.add_argument("--new-key", metavar="PATH", help="make a new key and write it to PATH")
    p.add_argument("--learner-branch", default="learner")
    p.add_argument("--solutions-branch", default="solutions")
    p.add_argument("--message", help="commit message")
    p.add_argument("--check", nargs="?", const="", default=None, metavar="TREE",
                   help="only scan TREE (default: the last learner build) for leaks")  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except (PublishError, KeyProblem, GitError, ManifestError) as e:
        print(f"kata publish: {e}", file=sys.stderr)
        return EXIT_USAGE
