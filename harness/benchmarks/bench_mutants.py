"""Mutation scores: how many sampled mutants of each kata's reference its tests catch.

Samples N mutants of each kata's learner files (as ``kata verify --mutants=N`` does), runs the
kata's public and hidden tests on each, and prints per kata: mutants sampled, caught (some task
at most half its points, or a hang), survived, equivalent (``mutants.toml``), unjudged, the
score caught / (caught + survived), and the wall time; then every survivor with its diff:

    python harness/benchmarks/bench_mutants.py [PATH ...] [-N 10] [-j 1] [--seed 0] [--markdown]
        [--survivors FILE]   # also append the survivors to FILE, as they are found

Goal (issue 20): at least 90 % on every kata. A full run is long (one kata run per mutant: 10 to
80 s each); CI runs a three-mutant sample of a tiny kata (harness/tests/test_mutants.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.manifest import ManifestError, discover, load_manifest
from harness.mutants import (
    KataMutation,
    MutantOptions,
    mutant_line,
    mutate_kata,
    survivor_text,
    table,
)

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[ROOT / "katas"])
    ap.add_argument("-N", "--count", type=int, default=10, help="mutants per kata")
    ap.add_argument("-j", "--jobs", type=int, default=None, help="mutants run at once")
    ap.add_argument("--seed", default="0", help="the sample's seed")
    ap.add_argument("--timeout", type=float, default=None, help="each mutant's wall limit, s")
    ap.add_argument("--markdown", action="store_true", help="a markdown table for the notes")
    ap.add_argument("--survivors", type=Path, help="append each kata's survivors to this file")
    args = ap.parse_args(argv)
    options = MutantOptions(args.count, args.seed, args.jobs, args.timeout)
    katas: list[KataMutation] = []
    started = time.perf_counter()
    for kata_dir in sorted({d for p in args.paths for d in discover(p.resolve())}):
        try:
            manifest = load_manifest(kata_dir)
        except ManifestError as e:
            print(f"malformed: {e}", file=sys.stderr)
            continue
        k = mutate_kata(manifest, ROOT, options=options)
        katas.append(k)
        for r in k.results:
            print(f"  {mutant_line(r)}", file=sys.stderr)
        print(f"{table([k])[1]}", file=sys.stderr, flush=True)
        for p in k.problems + k.notes:
            print(f"  {p.splitlines()[0]}", file=sys.stderr)
        if args.survivors and k.survivors:
            with args.survivors.open("a", encoding="utf-8") as f:
                for r in k.survivors:
                    f.write(f"- {survivor_text(k.kata, r)}\n")
    print("\n".join(table(katas, markdown=args.markdown)))
    for k in katas:
        for r in k.survivors:
            print(f"\nsurvivor: {survivor_text(k.kata, r)}\n{r.diff.rstrip()}")
    scored = [k.score for k in katas if k.score is not None]
    print(
        f"\n{len(katas)} katas, {sum(k.sampled for k in katas)} mutants, "
        f"{sum(len(k.survivors) for k in katas)} survivors "
        f"({sum(r.honest for k in katas for r in k.survivors)} lost only to their own exceptions); "
        f"{sum(s >= 0.9 for s in scored)} of {len(scored)} katas at 90 % or more; "
        f"{time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
