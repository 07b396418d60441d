"""`kata shortcut`: write a kata's shortcuts as patches against its reference (kata authors).

    kata shortcut new KATA NAME --task T --why "..."   shortcut.toml, and the reference's learner
                                                       files copied to a scratch directory to edit
    kata shortcut edit KATA NAME                       the scratch copy of an existing shortcut
                                                       (reference + its patch), to rework it
    kata shortcut diff KATA NAME                       print the patch of the edited copy
    kata shortcut save KATA NAME                       write it to shortcuts/NAME/shortcut.patch
    kata shortcut convert [PATH ...]                   whole-copy shortcuts -> shortcut.patch
    kata shortcut convert --check [PATH ...]           list them, change nothing (exit 1 if any)

The scratch copy lives in ``.kata/shortcut-edit/<kata>/<name>/`` (never under solutions/). A
whole-copy shortcut (the format before patches: shortcut.toml and copies of the learner files it
replaces) is converted only when the patch, applied to today's reference, gives back each copy
byte for byte; the copies are then deleted. ``convert`` is re-runnable: shortcuts already
patches are left alone. KATA is a kata id, its directory name or its path.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from . import atomic, layout, patches
from .loader import SHORTCUT_PATCH, shortcuts_of
from .manifest import Manifest, ManifestError, discover, load_manifest

SHORTCUT_TOML = "shortcut.toml"
EDIT_DIR = "shortcut-edit"  # under the results dir: .kata/shortcut-edit/<kata>/<name>/


class ToolError(Exception):
    """A usage problem: printed as `kata shortcut: <message>`, exit code 2."""


@dataclass
class Converted:
    dir: Path
    status: str  # "converted", "already a patch", "problem"
    detail: str = ""
    lines_before: int = 0  # lines of the copies it held
    lines_after: int = 0  # lines of shortcut.patch


# --------------------------------------------------------------------------- converting
def _held(sc_dir: Path) -> list[str]:
    """The files of a shortcut directory but its toml and patch (kata-relative, sorted)."""
    return sorted(
        p.relative_to(sc_dir).as_posix()
        for p in sc_dir.rglob("*")
        if p.is_file()
        and p.name not in (SHORTCUT_TOML, SHORTCUT_PATCH)
        and "__pycache__" not in p.parts
    )


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def convert_one(sc_dir: Path, reference: Path) -> Converted:
    """Turn the whole-copy shortcut `sc_dir` into shortcut.patch against `reference` (the
    solutions/ mirror), when the patch reproduces every copy byte for byte."""
    held = _held(sc_dir)
    has_patch = (sc_dir / SHORTCUT_PATCH).is_file()
    if not held:
        status = "already a patch" if has_patch else "problem"
        return Converted(sc_dir, status, "" if has_patch else "no files and no patch")
    if has_patch:
        return Converted(sc_dir, "problem", f"holds {SHORTCUT_PATCH} and copies ({held[0]})")
    try:
        changes = {
            rel: (_text(reference / rel) if (reference / rel).is_file() else None,
                  _text(sc_dir / rel))
            for rel in held
        }  # fmt: skip
    except UnicodeDecodeError as e:
        return Converted(sc_dir, "problem", f"not UTF-8 text: {e}")
    text = patches.make_patch(changes)
    if not text:
        return Converted(sc_dir, "problem", "every copy equals the reference: it dodges nothing")
    applied = patches.apply(reference, text)
    for rel, (old, copy) in changes.items():
        got = applied[rel] if rel in applied else (old or "").encode("utf-8")
        if got != copy.encode("utf-8"):
            return Converted(sc_dir, "problem", f"{rel}: the patch does not reproduce the copy")
    before = sum(len(patches.lines(new)) for _, new in changes.values())
    atomic.write_text(sc_dir / SHORTCUT_PATCH, text)
    for rel in held:
        (sc_dir / rel).unlink()
    for d in sorted((p for p in sc_dir.rglob("*") if p.is_dir()), reverse=True):
        if d.name == "__pycache__":
            shutil.rmtree(d)
        elif not any(d.iterdir()):
            d.rmdir()
    return Converted(sc_dir, "converted", "", before, len(patches.lines(text)))


def convert(paths: list[Path]) -> list[Converted]:
    """Every shortcut of the katas under `paths`, converted where it is a whole copy."""
    out = []
    for kata_dir in sorted({d for p in paths for d in discover(p)}):
        reference = layout.solution_dir(kata_dir)
        if reference is None:
            continue
        for name in shortcuts_of(kata_dir):
            out.append(convert_one(layout.shortcut_dir(kata_dir, name), reference))
    return out


# --------------------------------------------------------------------------- authoring
def _kata(root: Path, spelling: str) -> Manifest:
    for kata_dir in (Path(spelling), root / spelling):
        if (kata_dir / "kata.toml").is_file():
            return load_manifest(kata_dir.resolve())
    for d in discover(root / layout.KATAS):
        try:
            m = load_manifest(d)
        except ManifestError:
            continue
        if spelling in (m.id, d.name):
            return m
    raise ToolError(f"there is no kata called {spelling}")


def scratch_dir(root: Path, m: Manifest, name: str) -> Path:
    return layout.results_dir(root) / EDIT_DIR / m.id / name


def _reference(m: Manifest) -> Path:
    ref = layout.solution_dir(m.dir)
    if ref is None:
        raise ToolError(f"{m.id} has no solutions/ mirror: a shortcut is a patch of the reference")
    return ref


def _fill_scratch(m: Manifest, scratch: Path, patched: dict[str, bytes]) -> list[Path]:
    if scratch.exists():
        shutil.rmtree(scratch)
    ref = _reference(m)
    written = []
    for rel in m.files:
        if (ref / rel).is_file():
            data = patched.get(rel, (ref / rel).read_bytes())
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            (scratch / rel).write_bytes(data)
            written.append(scratch / rel)
    for rel, data in patched.items():
        if rel not in m.files:  # a file the patch adds
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            (scratch / rel).write_bytes(data)
            written.append(scratch / rel)
    return written


def new(root: Path, kata: str, name: str, task: str, why: str) -> Path:
    m = _kata(root, kata)
    if task not in [t.id for t in m.tasks]:
        raise ToolError(f"--task must be a task of {m.id}: {', '.join(t.id for t in m.tasks)}")
    if not why.strip():
        raise ToolError("--why: one sentence saying why the shortcut is wrong")
    sc = layout.shortcut_dir(m.dir, name)
    if sc.exists():
        raise ToolError(f"{sc} exists: `kata shortcut edit {m.id} {name}` reworks it")
    scratch = scratch_dir(root, m, name)
    _fill_scratch(m, scratch, {})
    sc.mkdir(parents=True)
    toml = f"task = {_toml_str(task)}\nwhy = {_toml_str(' '.join(why.split()))}\n"
    atomic.write_text(sc / SHORTCUT_TOML, toml)
    return scratch


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def edit(root: Path, kata: str, name: str) -> Path:
    m = _kata(root, kata)
    sc = layout.shortcut_dir(m.dir, name)
    patch = sc / SHORTCUT_PATCH
    if not patch.is_file():
        raise ToolError(f"{patch} does not exist (`kata shortcut convert` turns copies into one)")
    try:
        patched = patches.apply(_reference(m), patch.read_text(encoding="utf-8"))
    except patches.PatchError as e:
        raise ToolError(f"{patch}: {e}") from None
    scratch = scratch_dir(root, m, name)
    _fill_scratch(m, scratch, patched)
    return scratch


def diff(root: Path, kata: str, name: str) -> str:
    m = _kata(root, kata)
    scratch = scratch_dir(root, m, name)
    if not scratch.is_dir():
        raise ToolError(f"no copy to diff at {scratch}: `kata shortcut new` or `edit` makes one")
    ref = _reference(m)
    changes: dict[str, tuple[str | None, str]] = {}
    for p in sorted(scratch.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts:
            continue
        rel = p.relative_to(scratch).as_posix()
        if rel not in m.files and (m.dir / rel).exists():
            raise ToolError(f"{p}: {rel} is given code of the kata; a shortcut changes learner "
                            f"files ({', '.join(m.files)}) or adds new ones")  # fmt: skip
        changes[rel] = (_text(ref / rel) if (ref / rel).is_file() else None, _text(p))
    text = patches.make_patch(changes)
    if not text:
        raise ToolError(f"the copy in {scratch} equals the reference: edit it first")
    return text


def save(root: Path, kata: str, name: str) -> Path:
    text = diff(root, kata, name)
    m = _kata(root, kata)
    sc = layout.shortcut_dir(m.dir, name)
    if not (sc / SHORTCUT_TOML).is_file():
        raise ToolError(f"{sc / SHORTCUT_TOML} does not exist: `kata shortcut new` writes it")
    stray = _held(sc)
    if stray:
        raise ToolError(f"{sc} still holds copies ({', '.join(stray)}): delete them first")
    atomic.write_text(sc / SHORTCUT_PATCH, text)
    return sc / SHORTCUT_PATCH


# --------------------------------------------------------------------------- the command
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kata shortcut", description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=None, help="repository root (default: search up)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("new", help="shortcut.toml, and a scratch copy of the reference to edit")
    s.add_argument("kata")
    s.add_argument("name")
    s.add_argument("--task", required=True, help="the task it dodges")
    s.add_argument("--why", required=True, help="one sentence: why it is wrong")
    for cmd, text in (
        ("edit", "a scratch copy of an existing shortcut (reference + its patch)"),
        ("diff", "print the patch of the edited copy against the reference"),
        ("save", "write the patch of the edited copy to shortcuts/NAME/shortcut.patch"),
    ):
        s = sub.add_parser(cmd, help=text)
        s.add_argument("kata")
        s.add_argument("name")
    s = sub.add_parser("convert", help="turn whole-copy shortcuts into shortcut.patch")
    s.add_argument("paths", nargs="*", type=Path, help="katas or folders (default: katas/)")
    s.add_argument(
        "--check", action="store_true", help="list whole-copy shortcuts, change nothing (exit 1)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    root = layout.find_root(args.root)
    try:
        if root is None:
            raise ToolError("no katas/ directory at or above the current directory")
        if args.command == "convert":
            return _check(root, args.paths) if args.check else _convert(root, args.paths)
        if args.command == "new":
            scratch = new(root, args.kata, args.name, args.task, args.why)
            print(f"edit the copy in {scratch}, then `kata shortcut save {args.kata} {args.name}`")
        elif args.command == "edit":
            scratch = edit(root, args.kata, args.name)
            print(f"edit the copy in {scratch}, then `kata shortcut save {args.kata} {args.name}`")
        elif args.command == "diff":
            sys.stdout.write(diff(root, args.kata, args.name))
        else:
            print(f"wrote {layout.rel(save(root, args.kata, args.name), root)}")
    except (ToolError, ManifestError, OSError, UnicodeDecodeError) as e:
        print(f"kata shortcut: {e}", file=sys.stderr)
        return 2
    return 0


def whole_copies(paths: list[Path]) -> list[Path]:
    """The shortcut directories under `paths` that still hold copies of learner files."""
    return [
        layout.shortcut_dir(kata_dir, name)
        for kata_dir in sorted({d for p in paths for d in discover(p)})
        for name in shortcuts_of(kata_dir)
        if _held(layout.shortcut_dir(kata_dir, name))
    ]


def _check(root: Path, paths: list[Path]) -> int:
    found = whole_copies([p.resolve() for p in paths] or [root / layout.KATAS])
    for d in found:
        print(f"whole copy: {layout.rel(d, root)} ({', '.join(_held(d))})")
    print(f"{len(found)} whole-copy shortcuts" + (": run `kata shortcut convert`" if found else ""))
    return 1 if found else 0


def _convert(root: Path, paths: list[Path]) -> int:
    results = convert([p.resolve() for p in paths] or [root / layout.KATAS])
    problems = 0
    before = after = 0
    for r in results:
        if r.status == "converted":
            before, after = before + r.lines_before, after + r.lines_after
            print(f"converted {layout.rel(r.dir, root)}: {r.lines_before} -> {r.lines_after} lines")
        elif r.status == "problem":
            problems += 1
            print(f"NOT converted {layout.rel(r.dir, root)}: {r.detail}")
    done = sum(r.status == "converted" for r in results)
    kept = sum(r.status == "already a patch" for r in results)
    print(f"{done} converted ({before} -> {after} lines), {kept} already patches, "
          f"{problems} not converted")  # fmt: skip
    return 1 if problems else 0


__all__ = [
    "Converted",
    "ToolError",
    "convert",
    "convert_one",
    "diff",
    "edit",
    "main",
    "new",
    "save",
]
