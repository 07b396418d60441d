"""Shortcut table: what each kata's shortcut submissions earn, without and with the gates.

Runs every shortcut under ``solutions/phaseNN/<kata>/shortcuts/`` against its task (as
``kata verify`` does) and prints, per shortcut, the task's points its passing tests are worth
("without gates") and what it earns once the task's failed gates cap it ("with gates"):

    python harness/benchmarks/bench_shortcuts.py [PATH ...] [-n 2] [--markdown]

Goal (issue 10): every shortcut earns at most half of its task with gates; the "without" column
is what the same submission kept before gates existed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from harness.manifest import ManifestError, discover, load_manifest
from harness.shortcuts import MAX_SHARE, ShortcutScore, shortcuts, table
from harness.terminal import fmt_points
from harness.verify import score_shortcut

ROOT = Path(__file__).resolve().parents[2]


def markdown(scores: list[ShortcutScore]) -> list[str]:
    out = [
        "| kata | shortcut | task | without gates | with gates |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for s in scores:
        if s.judged:
            cells = [f"{fmt_points(s.before)}/{s.points}", f"{fmt_points(s.after)}/{s.points}"]
        else:
            cells = ["not judged", (s.problem or s.skipped).splitlines()[0]]
        out.append(f"| {s.kata} | {s.shortcut} | {s.task} | {' | '.join(cells)} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[ROOT / "katas"])
    ap.add_argument("-n", "--jobs", type=int, default=0, help="pytest-xdist workers per run")
    ap.add_argument("--markdown", action="store_true", help="a markdown table for the notes")
    args = ap.parse_args(argv)
    extra = ["-n", str(args.jobs)] if args.jobs else []
    scores: list[ShortcutScore] = []
    broken: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-shortcuts-") as tmp:
        for kata_dir in sorted({d for p in args.paths for d in discover(p.resolve())}):
            try:
                manifest = load_manifest(kata_dir)
            except ManifestError as e:
                broken.append(str(e))
                continue
            found, problems = shortcuts(manifest)
            broken += problems
            for sc in found:
                scores.append(score_shortcut(manifest, sc, ROOT, extra, Path(tmp)))
                print(f"ran {manifest.id}/{sc.name}", file=sys.stderr, flush=True)
    print("\n".join(markdown(scores) if args.markdown else table(scores)))
    over = [s for s in scores if s.too_much]
    print(
        f"\n{len(scores)} shortcuts, {len(over)} earn more than {MAX_SHARE:.0%} of their task, "
        f"{sum(not s.judged for s in scores)} not judged here; "
        f"{time.perf_counter() - started:.0f} s"
    )
    for b in broken:
        print(f"malformed: {b}")
    return 1 if over or broken else 0


if __name__ == "__main__":
    sys.exit(main())
