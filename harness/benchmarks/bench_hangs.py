"""Worst-case run time of each kata when the submission hangs, against the kata's time budget.

For each kata of phases 01-03 (or those named), a scratch copy of the kata (and its hidden tests)
is run with every learner file replaced by a version, built from the reference, that hangs:

- ``import``: every Python learner file ends in ``while True: pass`` (the module never loads);
- ``call``: every Python function and method body is ``while True: pass``;
- ``native``: every top-level C/C++ function body starts with a spin on a volatile (a hang no
  Python alarm can interrupt), and every Rust function body with a spin on a black box;
- ``kernel``: every ``__global__`` function body in a .cu file starts with that spin.

A variant that changes no file of the kata is left out. The figure is pytest's wall time for
``pytest katas/phaseNN/<kata>`` (interpreter start-up included), next to the kata's per-test
limit, its time budget and its allowance for hangs (harness.timekeeper). Goal (issue 12): every
kata under 2 minutes, and the whole of ``pytest katas`` under Gradescope's default 10 minutes.

``--whole`` measures that last figure directly: one tree with every selected kata, every learner
file hanging everywhere it can (.py: every function loops; .c: every function spins; .cu: every
kernel spins), run as one ``pytest katas`` (add ``-n 2`` or ``--kata-time-budget=540`` after the
options: they go to pytest).

    python harness/benchmarks/bench_hangs.py [--all] [--kata simt --kata matmul] [--variant import]
    python harness/benchmarks/bench_hangs.py --whole [--all] [-n 2] [--kata-time-budget=540]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.manifest import discover, load_manifest  # noqa: E402
from harness.timekeeper import budget_of, hang_allowance  # noqa: E402

VARIANTS = ("import", "call", "native", "kernel")
SPIN_C = " { volatile int kata_spin = 1; while (kata_spin) {} "


def hang_python_import(text: str) -> str:
    return text + "\n\nwhile True:\n    pass\n"


def hang_python_calls(text: str) -> str:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            loop = ast.While(test=ast.Constant(True), body=[ast.Pass()], orelse=[])
            node.body = ([ast.Expr(ast.Constant(doc))] if doc else []) + [loop]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


# A top-level C function definition: a line at column 0 with a parameter list, ending in "{".
_C_DEF = re.compile(r"^(?![ \t#])([^;{}\n]*\([^;{}]*\)\s*)\{", re.M)
_GLOBAL = re.compile(r"(__global__[^;{}]*\([^;{}]*\)\s*)\{")


# A Rust function with a body: `pub extern "C" fn f(...) -> T {` (a trait's `fn f();` has none).
_RS_DEF = re.compile(r"^([ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?"
                     r"fn\s+\w+[^{;]*)\{", re.M)  # fmt: skip
SPIN_RS = " { while std::hint::black_box(true) {} "


def hang_rust_functions(text: str) -> str:
    return _RS_DEF.sub(lambda m: m.group(1) + SPIN_RS.strip(), text)


def hang_c_functions(text: str) -> str:
    return _C_DEF.sub(lambda m: m.group(1) + SPIN_C.strip(), text)


def hang_kernels(text: str) -> str:
    return _GLOBAL.sub(lambda m: m.group(1) + SPIN_C.strip(), text)


def variant_text(variant: str, name: str, text: str) -> str | None:
    suffix = Path(name).suffix
    if variant == "everywhere":  # --whole: every kind of hang a file can hold
        for v in ("call", "native", "kernel"):
            text = variant_text(v, name, text) or text
        return text
    if variant == "import" and suffix == ".py":
        return hang_python_import(text)
    if variant == "call" and suffix == ".py":
        return hang_python_calls(text)
    if variant == "native" and suffix in (".c", ".cpp", ".cc"):
        return hang_c_functions(text)
    if variant == "native" and suffix == ".rs":
        return hang_rust_functions(text)
    if variant == "kernel" and suffix == ".cu":
        out = hang_kernels(text)
        return out if out != text else None
    return None


def hang_files(kata_dir: Path, copy: Path, variant: str) -> list[str]:
    """Replace the kata's learner files in `copy` by the variant built from the reference."""
    manifest = load_manifest(kata_dir)
    sol = ROOT / "solutions" / kata_dir.relative_to(ROOT / "katas")
    changed = []
    for name in manifest.files:
        base = sol / name if (sol / name).is_file() else kata_dir / name
        hung = variant_text(variant, name, base.read_text(encoding="utf-8"))
        if hung is not None and hung != base.read_text(encoding="utf-8"):
            (copy / name).write_text(hung, encoding="utf-8")
            changed.append(name)
    return changed


def scratch_tree(tmp: Path, kata_dir: Path) -> Path:
    """A repository holding this kata, its solutions mirror and the root's pytest setup."""
    rel = kata_dir.relative_to(ROOT)
    shutil.copytree(kata_dir, tmp / rel, ignore=shutil.ignore_patterns("__pycache__"))
    sol = ROOT / "solutions" / rel.relative_to("katas")
    if sol.is_dir():
        shutil.copytree(sol, tmp / "solutions" / rel.relative_to("katas"),
                        ignore=shutil.ignore_patterns("__pycache__", "shortcuts"))  # fmt: skip
    for name in ("pyproject.toml", "conftest.py", "pytest.ini"):
        if (ROOT / name).is_file():
            shutil.copy(ROOT / name, tmp / name)
    return tmp / rel


def run_variant(kata_dir: Path, variant: str, timeout: float, extra: list[str]) -> dict | None:
    manifest = load_manifest(kata_dir)
    with tempfile.TemporaryDirectory(prefix="bench-hangs-") as t:
        tmp = Path(t)
        copy = scratch_tree(tmp, kata_dir)
        changed = hang_files(kata_dir, copy, variant)
        if not changed:
            return None
        report = tmp / "report.json"
        cmd = [sys.executable, "-m", "pytest", str(copy.relative_to(tmp)), "-q",
               "-p", "no:cacheprovider", f"--kata-report=json:{report}", *extra]  # fmt: skip
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        wall = time.monotonic() - start
        tests = status = None
        if report.exists():
            data = json.loads(report.read_text())
            kata = data["katas"][0] if data["katas"] else {}
            tests = sum(len(task["tests"]) for task in kata.get("tasks", []))
            status = kata.get("status")
        return {
            "kata": manifest.id,
            "variant": variant,
            "files": changed,
            "wall_s": round(wall, 1),
            "time_limit": manifest.time_limit,
            "budget": budget_of(manifest),
            "allowance": hang_allowance(float(manifest.time_limit)),
            "tests": tests,
            "status": status,
            "rc": rc,
        }


def run_whole(dirs: list[Path], timeout: float, extra: list[str]) -> dict:
    """One `pytest katas` over every kata in `dirs`, every learner file hanging everywhere."""
    with tempfile.TemporaryDirectory(prefix="bench-hangs-whole-") as t:
        tmp = Path(t)
        changed = 0
        for d in dirs:
            changed += len(hang_files(d, scratch_tree(tmp, d), "everywhere"))
        report = tmp / "report.json"
        junit = tmp / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "katas", "-q", "-p", "no:cacheprovider",
               f"--kata-report=json:{report}", f"--kata-report=junit:{junit}", *extra]  # fmt: skip
        start = time.monotonic()
        try:
            rc: int | str = subprocess.run(
                cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        wall = time.monotonic() - start
        katas = json.loads(report.read_text())["katas"] if report.exists() else []
        return {
            "katas": len(dirs),
            "files": changed,
            "args": extra,
            "wall_s": round(wall, 1),
            "reported": len(katas),
            "tests": sum(len(task["tests"]) for k in katas for task in k.get("tasks", [])),
            "status": sorted({k.get("status") for k in katas}),
            "junit": junit.exists(),
            "rc": rc,
            "per_kata": {  # seconds its tests took, its status, its first error
                k["id"]: [
                    round(sum(t["duration"] for task in k["tasks"] for t in task["tests"]), 1),
                    k.get("status"),
                    (k.get("errors") or [""])[0][:160],
                ]
                for k in katas
            },
        }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kata", action="append", default=[], help="kata id (default: phases 1-3)")
    p.add_argument("--variant", action="append", default=[], choices=VARIANTS)
    p.add_argument("--timeout", type=float, default=900, help="per run, seconds")
    p.add_argument("--json", type=Path, help="also write the rows here")
    p.add_argument("--all", action="store_true", help="every kata, not only phases 1-3")
    p.add_argument("--whole", action="store_true", help="one `pytest katas`, everything hanging")
    args, extra = p.parse_known_args(argv)
    dirs = list(discover(ROOT / "katas"))
    if not args.all:
        dirs = [d for d in dirs if re.search(r"phase0[1-3]", str(d))]
    if args.kata:
        dirs = [d for d in dirs if d.name in args.kata]
    if args.whole:
        row = run_whole(dirs, args.timeout, extra)
        print(json.dumps(row, indent=1))
        if args.json:
            args.json.write_text(json.dumps(row, indent=1))
        return 0
    rows = []
    print(f"{'kata':<20}{'variant':<8}{'wall s':>8}{'limit':>7}{'budget':>8}{'hangs':>7}"
          f"{'tests':>7}  status")  # fmt: skip
    for d in dirs:
        for v in args.variant or VARIANTS:
            row = run_variant(d, v, args.timeout, extra)
            if row is None:
                continue
            rows.append(row)
            print(f"{row['kata']:<20}{v:<8}{row['wall_s']:>8.1f}{row['time_limit']:>7g}"
                  f"{row['budget']:>8g}{row['allowance']:>7g}{row['tests'] or 0:>7}"
                  f"  {row['status']} (rc {row['rc']})",
                  flush=True)  # fmt: skip
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    worst: dict[str, float] = {}
    for r in rows:
        worst[r["kata"]] = max(worst.get(r["kata"], 0.0), r["wall_s"])
    print("worst case per kata: " + ", ".join(f"{k} {s:.0f} s" for k, s in worst.items()))
    over = [k for k, s in worst.items() if s >= 120]
    print(f"all katas, serially: {sum(worst.values()):.0f} s (goal < 600 s); "
          f"katas over 2 min: {', '.join(over) or 'none'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
