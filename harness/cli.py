"""The `kata` command: learner-first (list, progress, hint), instructor tools (new, verify).

Exit codes: 0 success; 1 the check failed (verify found problems, grading failed); 2 usage error
or bad input (unknown kata, no repository found).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import atomic, layout, progress, seeds
from .guide import command
from .manifest import TIERS, TRACKS, Manifest, ManifestError, Task, discover, load_manifest
from .results import KataResult, RunResult

DEFAULT_MUTANTS = 10  # `kata verify --mutants` without N: harness.mutants.DEFAULT_COUNT (tested)

if TYPE_CHECKING:
    from .tiers import Capabilities
    from .verify import ShortcutSample

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A usage problem reported as `kata: <message>` with exit code 2."""


# --------------------------------------------------------------------------- output
def _colour() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("PY_COLORS") == "1" or os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


_ANSI = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def say(text: str = "", **markup: bool) -> None:
    codes = [_ANSI[k] for k, on in markup.items() if on and k in _ANSI]
    if codes and _colour():
        text = f"\x1b[{';'.join(codes)}m{text}\x1b[0m"
    print(text)


# --------------------------------------------------------------------------- repository
def find_root(start: Path | None = None) -> Path:
    """The repository root: the nearest directory at or above `start` with a katas/ folder."""
    root = layout.find_root(start)
    if root is None:
        raise CliError(f"no katas/ directory at or above {(start or Path.cwd()).resolve()}; "
                       "run this inside a kata repository")  # fmt: skip
    return root


def _manifests(root: Path) -> list[Manifest]:
    out = []
    for d in discover(root):
        try:
            out.append(load_manifest(d))
        except ManifestError as e:
            say(f"! {e}", red=True)
    return out


def _find_kata(root: Path, kata_id: str) -> Manifest:
    manifests = _manifests(root)
    for m in manifests:
        if m.id == kata_id or m.dir.name == kata_id:
            return m
    known = ", ".join(m.id for m in manifests) or "none"
    raise CliError(f"there is no kata called {kata_id}; the katas are: {known}")


def _results_dir(root: Path, args: argparse.Namespace) -> Path:
    """--kata-results-dir as pytest had it (same default), for the commands that read results."""
    return layout.results_dir(root, getattr(args, "kata_results_dir", None))


def _progress(root: Path, args: argparse.Namespace) -> dict[str, dict]:
    try:
        return progress.load(_results_dir(root, args))
    except progress.ProgressError as e:
        raise CliError(str(e)) from None


def _load_json(path: Path, default: dict) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default
    except json.JSONDecodeError as e:
        raise CliError(f"{path} is not valid JSON ({e}); delete it to start afresh") from None


def _save_json(path: Path, data: dict) -> None:
    atomic.write_json(path, data)


# --------------------------------------------------------------------------- commands
def _lacking(caps: Capabilities, tier: str | None, capabilities: tuple[str, ...]) -> list[str]:
    """The tier and capabilities in a requirement that this machine does not have."""
    out = [tier] if tier and tier != "cpu" and not caps.has_tier(tier) else []
    return out + [c for c in capabilities if not caps.has(c)]


def _need(name: str) -> str:
    return f"the {name} tier" if name in TIERS else name


def cmd_list(args: argparse.Namespace) -> int:
    from .tiers import probe

    root = find_root(args.root)
    caps = probe()
    manifests = _manifests(root)
    if not manifests:
        say("no katas found")
        return EXIT_OK
    if args.weeks:
        return _list_weeks(manifests, caps)
    say(f"{'phase':<6}{'kata':<22}{'tier':<12}{'tasks':>6}{'points':>8}  title", bold=True)
    shown_track = ""
    # The phases' katas, then each track's (system-design, interview-prep) under its name.
    for m in sorted(manifests, key=lambda m: (m.track, m.phase, m.id)):
        whole = _lacking(caps, m.tier, m.capabilities)
        # Per task too: a kata can run here while some of its tasks cannot (vector-add's nvcc).
        tasks: dict[str, list[str]] = {}
        for t in m.tasks if not whole else ():
            for need in _lacking(caps, t.tier, t.capabilities):
                tasks.setdefault(need, []).append(t.id)
        tier = m.tier + ("" if not (whole or tasks) else " (!)")
        if m.track and m.track != shown_track:
            shown_track = m.track
            say(f"{m.track} (phase: the one whose material the kata draws on)", bold=True)
        say(f"{m.phase:02d}    {m.id:<22}{tier:<12}{len(m.tasks):>6}{m.points:>8}  {m.title}")
        if whole:
            needs = ", ".join(map(_need, whole))
            say(f"      (!) needs {needs}: {caps.why_not(whole[0])}", yellow=True)
        for need, ids in tasks.items():
            which = f"task {ids[0]} needs" if len(ids) == 1 else f"tasks {', '.join(ids)} need"
            say(f"      (!) {which} {_need(need)}: {caps.why_not(need)}", yellow=True)
    say(f"this machine: tiers {', '.join(caps.tiers)}")
    return EXIT_OK


def _list_weeks(manifests: list[Manifest], caps: Capabilities) -> int:
    """The curriculum's 26 weeks, each with its focus and the katas that declare it."""
    from .schedule import SCHEDULE

    by_week: dict[int, list[Manifest]] = {}
    undated, tracks = [], []
    for m in sorted(manifests, key=lambda m: (m.phase, m.id)):
        for w in m.weeks:
            by_week.setdefault(w, []).append(m)
        if not m.weeks:
            (tracks if m.track else undated).append(m)
    say(f"{'week':<6}{'phase':<7}focus / katas (tier; what this machine lacks)", bold=True)
    for w in SCHEDULE:
        say(f"{w.week:<6}{w.phase:02d}     {w.focus}")
        for m in by_week.get(w.week, []):
            needs = sorted({n for t in m.tasks for n in _lacking(caps, t.tier, t.capabilities)})
            whole = _lacking(caps, m.tier, m.capabilities)
            need = ", ".join(map(_need, whole or needs))
            lack = f"; needs {need}" + ("" if whole else " for some tasks") if need else ""
            say(f"{'':<13}{m.id} ({m.tier}{lack})", yellow=bool(need))
        if not by_week.get(w.week):
            say(f"{'':<13}(no kata yet)")
    for m in undated:
        say(
            f"phase {m.phase:02d}: {m.id} names no week (`weeks = [...]` in its kata.toml)",
            yellow=True,
        )
    for m in tracks:  # alongside the schedule, after the phase whose material they use
        say(f"any week from phase {m.phase:02d} on: {m.track} {m.id} ({m.tier})")
    say(f"this machine: tiers {', '.join(caps.tiers)}")
    return EXIT_OK


def cmd_progress(args: argparse.Namespace) -> int:
    from .terminal import fmt_points, kata_lines

    root = find_root(args.root)
    latest = _progress(root, args)
    if not latest:
        say(f"no results yet: run `{command('pytest')} katas/phase01` first")
        return EXIT_OK
    run = RunResult.from_dict({"katas": list(latest.values())})
    katas: list[KataResult] = sorted(run.katas, key=lambda k: (k.phase, k.id))
    if args.kata:
        katas = [k for k in katas if k.id == args.kata]
        if not katas:
            raise CliError(f"no results for kata {args.kata} yet: run its tests with pytest first")
    for k in katas:
        for text, markup in kata_lines(k):
            say(text, **markup)
    earned = sum(k.earned for k in katas)
    say(f"total: {fmt_points(earned)}/{sum(k.points for k in katas)} points", bold=True)
    return EXIT_OK


def cmd_hint(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    path = layout.results_dir(root) / "hints.json"  # the learner's own, whatever runs write
    if args.reset:
        return _reset_hints(root, path, args.kata, args.task)
    if args.kata is None:
        known = ", ".join(m.id for m in _manifests(root)) or "none"
        raise CliError(f"name a kata, e.g. `{command()} hint simt`; the katas are: {known}")
    m = _find_kata(root, args.kata)
    task = _task_of(m, args.task) if args.task else _next_task(root, m, args)
    shown = _load_json(path, {})
    key = f"{m.id}/{task.id}"
    if not task.hints:
        say(f"task {key} has no hints")
        return EXIT_OK
    count = min(shown.get(key, 0) + 1, len(task.hints))
    shown[key] = count
    _save_json(path, shown)
    say(f"{m.id} · {task.id} — {task.title}", bold=True)
    for i, hint in enumerate(task.hints[:count], 1):
        say(f"  hint {i}/{len(task.hints)}: {hint}")
    if count < len(task.hints):
        say(f"  (run `{command()} hint {m.id} {task.id}` again for the next hint)")
    else:
        say("  (that was the last hint)")
    return EXIT_OK


def _task_of(m: Manifest, task_id: str) -> Task:
    for t in m.tasks:
        if t.id == task_id:
            return t
    known = ", ".join(t.id for t in m.tasks)
    raise CliError(f"kata {m.id} has no task called {task_id}; its tasks are: {known}")


def _reset_hints(root: Path, path: Path, kata_id: str | None, task_id: str | None) -> int:
    """Hide hints again: of one task, of every task of a kata, or (no kata named) of all katas."""
    shown = _load_json(path, {})
    if kata_id is None:
        keys, what = list(shown), "every kata"
    else:
        m = _find_kata(root, kata_id)
        if task_id is not None:
            keys, what = [f"{m.id}/{_task_of(m, task_id).id}"], f"{m.id} · {task_id}"
        else:
            keys, what = [k for k in shown if k.split("/", 1)[0] == m.id], m.id
    for k in keys:
        shown.pop(k, None)
    _save_json(path, shown)
    say(f"hints hidden again for {what}")
    return EXIT_OK


def _next_task(root: Path, m: Manifest, args: argparse.Namespace) -> Task:
    """The task to hint: the kata's next task from the last run, else its first task."""
    kata = _progress(root, args).get(m.id)
    if kata is not None:
        run = RunResult.from_dict({"katas": [kata]})
        nxt = run.katas[0].next_task
        task = next((t for t in m.tasks if nxt is not None and t.id == nxt.id), None)
        if task is not None:  # a task of the last run may since have left the manifest
            return task
    return m.tasks[0]


def cmd_new(args: argparse.Namespace) -> int:
    from .scaffold import scaffold

    root = find_root(args.root)
    try:
        written = scaffold(root, args.phase, args.name, args.title, args.track or "")
    except (ValueError, FileExistsError) as e:
        raise CliError(str(e)) from None
    for p in written:
        say(f"created {p.relative_to(root)}")
    folder = args.track or f"phase{args.phase:02d}"
    say(f"next: edit the files, then `{command()} verify katas/{folder}/{args.name}`")
    return EXIT_OK


def _shortcut_sample(text: str | None) -> ShortcutSample | None:
    """`--shortcut-sample N[:SEED]` -> verify's ShortcutSample (a fresh seed when none is given)."""
    if not text:
        return None
    from .verify import ShortcutSample

    count, _, seed = text.partition(":")
    try:
        n, s = int(count), int(seed) if seed else seeds.fresh()
    except ValueError:
        raise CliError(
            f"--shortcut-sample {text!r}: expected N or N:SEED (whole numbers)"
        ) from None
    if n < 1:
        raise CliError(f"--shortcut-sample {text!r}: N must be at least 1")
    return ShortcutSample(n, s)


def cmd_verify(args: argparse.Namespace) -> int:
    from .shortcuts import table as shortcut_table
    from .verify import verify

    root = find_root(args.root)
    paths = [Path(p).resolve() for p in args.paths] or [root / layout.KATAS]
    for p in paths:
        if not p.exists():
            raise CliError(f"{p} does not exist")
    extra = ["-n", str(args.jobs)] if args.jobs else []
    mutants = None
    if args.mutants:
        from .mutants import MutantOptions

        mutants = MutantOptions(
            args.mutants, args.mutant_seed, args.mutant_jobs, args.mutant_timeout
        )
    verdicts = verify(
        paths,
        root,
        extra,
        run_shortcuts=not args.no_shortcuts,
        record=args.record,
        mutants=mutants,
        seed=args.seed,
        fresh_seeds=args.seeds,
        shortcut_sample=_shortcut_sample(args.shortcut_sample),
    )
    if not verdicts:
        raise CliError(f"no katas under {', '.join(map(str, paths))}")
    failed = 0
    for v in verdicts:
        if v.ok:
            say(f"✓ {v.kata} ({v.path})", green=True)
        else:
            failed += 1
            say(f"✗ {v.kata} ({v.path})", red=True)
            for p in v.problems:
                say(f"    {p}", red=True)
        for n in v.notes:
            say(f"    note: {n}", yellow=True)
    scores = [s for v in verdicts for s in v.shortcuts]
    if scores:
        say("shortcuts, points of the task each dodges:", bold=True)
        for line in shortcut_table(scores):
            say(f"  {line}")
    mutation = [v.mutation for v in verdicts if v.mutation is not None]
    if mutation:
        _say_mutants(mutation)
    say(f"{len(verdicts) - failed} of {len(verdicts)} katas verified", bold=True)
    return EXIT_FAILED if failed else EXIT_OK


def _say_mutants(katas: list) -> None:  # list[mutants.KataMutation]
    from .mutants import mutant_line, survivor_text, table

    say("mutants: caught when a task earns at most half its points", bold=True)
    for k in katas:
        for r in k.results:
            say(f"  {k.kata} {mutant_line(r)}", yellow=r.survived)
    for line in table(katas):
        say(f"  {line}")
    for k in katas:
        for r in k.survivors:
            say(f"  survivor: {survivor_text(k.kata, r)}", yellow=True)
            for line in r.diff.splitlines():
                say(f"      {line}")


def _snapshot(paths: list[Path]) -> dict[Path, int]:
    """mtimes of the files a learner edits (sources and tests), to notice a save."""
    seen: dict[Path, int] = {}
    for base in paths:
        for p in base.rglob("*") if base.is_dir() else [base]:
            if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith("."):
                seen[p] = p.stat().st_mtime_ns
    return seen


def _changed(before: dict[Path, int], after: dict[Path, int], root: Path) -> str:
    """The saved file(s), relative to the root: "katas/phase01/simt/simt.py" (and 2 more)."""
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if not changed:
        return ""
    try:
        first = str(changed[0].relative_to(root))
    except ValueError:
        first = str(changed[0])
    more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
    removed = " removed" if changed[0] not in after else ""
    return f"{first}{removed}{more}"


CLEAR = "\x1b[2J\x1b[3J\x1b[H"  # clear the screen and its scrollback, cursor home


def watch_header(target: str, changed: str, when: float) -> str:
    """`kata watch · katas/phase01/simt · 14:02:31 · simt.py changed`, the first line of a run."""
    import time

    stamp = time.strftime("%H:%M:%S", time.localtime(when))
    why = f"{changed} changed" if changed else "first run"
    return f"kata watch · {target} · {stamp} · {why}"


def _watch_summary(root: Path, args: argparse.Namespace, paths: list[Path]) -> None:
    """The watched katas' summary, last on the screen (pytest's own lines come before it)."""
    from .terminal import kata_lines

    try:
        result = RunResult.load(_results_dir(root, args) / progress.LAST_RUN_FILE)
    except (OSError, ValueError, KeyError, TypeError):
        return
    watched = [p.resolve() for p in paths]
    say()
    for kata in result.katas:
        where = (root / kata.path).resolve()
        if not any(where == w or w in where.parents or where in w.parents for w in watched):
            continue
        for text, markup in kata_lines(kata):
            say(text, **markup)
    say(f"total: {_points(result.earned)}/{result.points} points", bold=True)


def _points(x: float) -> str:
    from .terminal import fmt_points

    return fmt_points(x)


def cmd_watch(args: argparse.Namespace) -> int:
    """Re-run the tests of a kata (or phase) each time a file in it is saved (rustlings-style):
    the screen cleared, a header naming the saved file and the time, the summary last."""
    import subprocess
    import time

    root = find_root(args.root)
    if args.path is None:
        paths = [root / layout.KATAS]
    elif (root / args.path).exists() or Path(args.path).exists():
        paths = [Path(args.path).resolve() if Path(args.path).exists() else root / args.path]
    else:
        paths = [_find_kata(root, args.path).dir]
    target = " ".join(str(p.relative_to(root)) for p in paths)
    # -rN: no list of failures after the summary; the plugin's summary is left to watch, last.
    cmd = [sys.executable, "-m", "pytest", *map(str, paths), "-q", "-rN", *args.pytest_args]
    if args.kata_results_dir is not None:
        cmd.append(f"--kata-results-dir={args.kata_results_dir}")
    env = {**os.environ, "KATA_SUMMARY": "off"}
    clear = args.clear if args.clear is not None else sys.stdout.isatty()
    runs, changed = 0, ""
    while True:
        if clear:
            print(CLEAR, end="", flush=True)
        say(watch_header(target, changed, time.time()), bold=True)
        sys.stdout.flush()
        before = _snapshot(paths)  # taken before the run, so a save during it counts too
        subprocess.run(cmd, cwd=root, env=env)
        runs += 1
        _watch_summary(root, args, paths)
        if args.once or (args.max_runs and runs >= args.max_runs):
            return EXIT_OK
        say("waiting for a save… (Ctrl-C to stop)")
        sys.stdout.flush()
        try:
            while (after := _snapshot(paths)) == before:
                time.sleep(args.interval)
            changed = _changed(before, after, root)
        except KeyboardInterrupt:
            return EXIT_OK


def _delegate(module: str, argv: list[str]) -> int:
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise CliError(f"this command is not available in this installation ({e})") from None
    return int(mod.main(argv))


def _results_option(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--kata-results-dir",
        type=Path,
        default=None,
        help=f"where your pytest runs keep results, as given to pytest (default {layout.RESULTS_DIR}/)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kata", description="gpu-katas: learn GPU systems by doing")
    p.add_argument("--root", type=Path, default=None, help="repository root (default: search up)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("list", help="katas with tiers and points")
    s.add_argument(
        "--weeks", action="store_true", help="the course's 26-week schedule: week -> katas, tiers"
    )
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("progress", help="your status per kata, from the last run")
    s.add_argument("kata", nargs="?")
    _results_option(s)
    s.set_defaults(func=cmd_progress)
    s = sub.add_parser("hint", help="reveal the next hint of a task")
    s.add_argument("kata", nargs="?", help="with --reset and no kata: every kata")
    s.add_argument("task", nargs="?", help="default: the kata's next task")
    s.add_argument(
        "--reset",
        action="store_true",
        help="hide hints again: of the task, of every task of the kata, or of all katas",
    )
    _results_option(s)
    s.set_defaults(func=cmd_hint)
    s = sub.add_parser("watch", help="re-run a kata's tests whenever you save a file")
    s.add_argument("path", nargs="?", help="a kata id, or a path (default: all katas)")
    s.add_argument("--interval", type=float, default=0.5, help="seconds between checks")
    s.add_argument(
        "--clear",
        dest="clear",
        action="store_true",
        default=None,
        help="clear the screen before each run (default: when the output is a terminal)",
    )
    s.add_argument("--no-clear", dest="clear", action="store_false", help="never clear the screen")
    _results_option(s)
    s.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    s.add_argument("--max-runs", type=int, default=0, help=argparse.SUPPRESS)
    s.set_defaults(func=cmd_watch, pytest_args=[])  # extra pytest arguments go after `--`
    s = sub.add_parser("new", help="scaffold a kata (instructors)")
    s.add_argument("phase", type=int, help="the phase (1..12), or the one a --track kata draws on")
    s.add_argument("name")
    s.add_argument("--title")
    s.add_argument(
        "--track",
        choices=TRACKS,
        help="a kata outside the phases, in katas/<track>/ (system design, interview prep)",
    )
    s.set_defaults(func=cmd_new)
    s = sub.add_parser(
        "verify", help="check katas: reference passes, stubs not started, shortcuts earn little"
    )
    s.add_argument("paths", nargs="*")
    s.add_argument("-n", "--jobs", type=int, default=None, help="pytest-xdist workers")
    s.add_argument(
        "--no-shortcuts", action="store_true", help="do not run the katas' shortcut submissions"
    )
    s.add_argument(
        "--record",
        action="store_true",
        help="write each kata's time_budget into kata.toml from the reference's run time",
    )
    s.add_argument(
        "--mutants",
        nargs="?",
        type=int,
        const=DEFAULT_MUTANTS,
        default=0,
        metavar="N",
        help="also run N (default 10) sampled mutants of each reference; report the survivors",
    )
    s.add_argument("-j", "--mutant-jobs", type=int, default=None, help="mutants run at once")
    s.add_argument("--mutant-seed", default="0", help="the mutant sample's seed (default 0)")
    s.add_argument(
        "--mutant-timeout", type=float, default=None, help="each mutant's wall limit, seconds"
    )
    s.add_argument(
        "--seed",
        type=int,
        default=seeds.VERIFY_SEED,
        metavar="N",
        help=f"the run seed of every run (default {seeds.VERIFY_SEED}: the same inputs each time)",
    )
    s.add_argument(
        "--seeds",
        type=int,
        default=0,
        metavar="K",
        help="also run each reference on K fresh seeds: finds references wrong on rare inputs",
    )
    s.add_argument(
        "--shortcut-sample",
        metavar="N[:SEED]",
        default=None,
        help="run only N of each kata's shortcuts, drawn with SEED (fresh if not given)",
    )
    s.set_defaults(func=cmd_verify)
    for name, module, text in (
        ("grade", "harness.grade", "grade from the canonical tests (autograders)"),
        ("publish", "harness.publish", "build the learner and solutions branches"),
        ("shortcut", "harness.shortcut_tool", "write shortcuts as patches (kata authors)"),
    ):
        s = sub.add_parser(name, help=text, add_help=False)
        s.add_argument("rest", nargs=argparse.REMAINDER)
        s.set_defaults(func=lambda a, module=module: _delegate(module, a.rest))
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    delegated = {
        "grade": "harness.grade",
        "publish": "harness.publish",
        "shortcut": "harness.shortcut_tool",
    }
    if argv[:1] and argv[0] in delegated:
        # argparse's REMAINDER drops a leading "--option": hand these commands argv as it is.
        try:
            return _delegate(delegated[argv[0]], argv[1:])
        except CliError as e:
            print(f"kata: {e}", file=sys.stderr)
            return EXIT_USAGE
    extra: list[str] = []
    if "watch" in argv and "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    if extra:
        args.pytest_args = extra
    try:
        return args.func(args)
    except (CliError, ManifestError) as e:
        print(f"kata: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `kata hint simt | head -2`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return EXIT_OK
    except OSError as e:  # a file we read or write: say which and why, not the exception's repr
        where = f"{e.filename}: " if e.filename else ""
        print(f"kata: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
