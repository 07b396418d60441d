"""Mutation testing of a kata's tests: `kata verify --mutants[=N]`.

A *mutant* is the reference solution with one line of one learner file changed by a rule of
universalmutator's library (``+`` → ``-``, ``<`` → ``<=``, a condition negated, a statement
dropped, ...; rules for Python, C, C++ and Rust, CUDA through its C++ rules). Each sampled mutant
runs the kata's public and hidden tests as an implementation of its own (the reference with that
one file patched), and is judged on the points each task earns against the reference's:

* **caught**: some task earns at most :data:`~harness.shortcuts.MAX_SHARE` of its points (a
  learner who hands it in is capped), or the run outlived its wall limit (a hang);
* **survivor**: every task keeps more than half its points. Either it lost some points (a test
  noticed, no gate caps it: ``dented``) or none (``unnoticed``: no test tells it from the
  reference; it is a survivor unless shown equivalent). A dented survivor whose every lost test
  failed on an exception of its own code (or a missing return) is marked so: by the rule that an
  honest mistake never trips a gate, only losing more than half a task's tests caps it;
* **equivalent**: listed in the kata's ``mutants.toml`` with a reason; never run;
* **unjudged**: the run produced no results (a harness problem, reported, not scored).

The mutation score is caught / (caught + survivors). Mutants are identified stably by their file,
the reference line's text and the replacement's (never a line number, which drifts), so an entry
of ``mutants.toml`` keeps meaning the same mutant while the reference changes around it.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import patches
from .layout import MUTANTS_TOML, mirror_of
from .manifest import Manifest
from .results import ERROR, FAILED, PASSED, SKIPPED, RunResult
from .shortcuts import MAX_SHARE
from .terminal import fmt_points

DEFAULT_COUNT = 10  # `--mutants` without a number
DEFAULT_SEED = 0
STARTUP_S = 5.0  # a kata run's start (pytest, the plugin), beyond its tests' own durations
TRIES_PER_LINE = 3  # mutants of one line checked for validity before the next line's turn
# universalmutator's rule files per learner-file suffix ("universal" and, for the C family,
# "c_like" are added as its own genmutants does). CUDA sources take the C++ rules.
RULES_BY_SUFFIX = {
    ".py": "python",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".hpp": "cpp",
    ".cu": "cpp",
    ".cuh": "cpp",
    ".rs": "rust",
    ".ts": "javascript",  # TypeScript (phase 12's CLI): JavaScript's rules, checked by tsc
}
_C_LIKE = ("c", "cpp", "rust", "javascript")

CAUGHT, TIMEOUT, DENTED, UNNOTICED, EQUIVALENT, UNJUDGED = (
    "caught", "timeout", "dented", "unnoticed", "equivalent", "unjudged",
)  # fmt: skip
SURVIVED = (DENTED, UNNOTICED)


class MutantsError(RuntimeError):
    """Mutants cannot be made or run here (the library is missing, a file is not found)."""


# --------------------------------------------------------------------------- mutants
@dataclass(frozen=True)
class Mutant:
    """One changed line of one learner file of the reference."""

    file: str  # the learner file, as kata.toml's `files` names it
    line: int  # 1-based, in the reference as it is now (for showing; not its identity)
    original: str  # the reference's line, without its newline
    replacement: str  # the mutated line, without its newline
    rule: str = ""  # the universalmutator rule that made it ("a ==> b")
    occurrence: int = 1  # which line of the file with this text it is (1: the first)
    occurrences: int = 1  # how many lines of the file have this text

    @property
    def key(self) -> tuple[str, str, str]:
        """Its stable identity: file, the reference line's text, the replacement's (stripped)."""
        return (self.file, self.original.strip(), self.replacement.strip())

    @property
    def id(self) -> str:
        return hashlib.sha1("\0".join(self.key).encode()).hexdigest()[:8]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def which(self) -> str:
        """Which of the file's lines with this text it is, when the text repeats
        (``mutants.toml``'s ``occurrence``): "" for a line whose text is unique."""
        if self.occurrences <= 1:
            return ""
        return f" (occurrence {self.occurrence} of {self.occurrences} of this line)"

    def apply(self, text: str) -> str:
        """The mutated file, from the reference's text."""
        lines = text.splitlines(keepends=True)
        if lines[self.line - 1].rstrip("\r\n") != self.original:
            raise MutantsError(f"{self.where}: the reference line is no longer {self.original!r}")
        end = lines[self.line - 1][len(lines[self.line - 1].rstrip("\r\n")) :] or "\n"
        lines[self.line - 1] = self.replacement + end
        return "".join(lines)

    def diff(self, text: str, context: int = 3) -> str:
        """The unified diff (harness.patches) of the reference file to the mutant: what
        ``--kata-impl=patch:<file>`` runs."""
        return patches.make_patch({self.file: (text, self.apply(text))}, context=context)


def _rules_for(file: str) -> list[str] | None:
    language = RULES_BY_SUFFIX.get(Path(file).suffix)
    if language is None:
        return None
    return [
        "universal.rules",
        f"{language}.rules",
        *(["c_like.rules"] if language in _C_LIKE else []),
    ]


def _library():  # noqa: ANN202 (a third-party module without types)
    try:
        from universalmutator import mutator
    except ImportError:
        raise MutantsError(
            "mutants need universalmutator (instructors' dependency): pip install -e '.[dev]'"
        ) from None
    return mutator


def candidates(file: str, text: str) -> list[Mutant]:
    """Every mutant universalmutator's rules make of `text` (learner file `file`), in line order;
    [] for a language it has no rules for."""
    rules = _rules_for(file)
    if rules is None:
        return []
    mutator = _library()
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its progress
        # ignoreStringOnly: a change inside a "string" only (a message) is not made
        made = mutator.mutants_regexp(lines, rules, ignorePatterns=[], ignoreStringOnly=True)
    stripped = [ln.strip() for ln in lines]
    out = []
    for lineno, new, (rule, _where), _pair in made:
        original = lines[lineno - 1].rstrip("\r\n")
        replacement = new.rstrip("\r\n")
        if replacement != original and "\n" not in replacement:
            text = original.strip()
            occurrence = stripped[:lineno].count(text)
            out.append(Mutant(file, lineno, original, replacement, rule.strip(), occurrence,
                              stripped.count(text)))  # fmt: skip
    return out


# --------------------------------------------------------------------------- cheap validity
def _python_shape(text: str, file: str) -> str | None:
    """The module's AST as text, its messages and annotations left out (docstrings, the strings
    of a `raise` or an `assert`'s message, type annotations and `from __future__` imports: they
    change no behaviour a test grades); None when it does not compile."""
    try:
        compile(text, file, "exec", dont_inherit=True)
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None

    class Blank(ast.NodeTransformer):
        def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
            return ast.Constant("")

        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            return ast.Constant("") if isinstance(node.value, str) else node

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Pass()
        if isinstance(node, ast.Module):  # `from __future__ import annotations`: annotations
            node.body = [
                ast.Pass() if isinstance(n, ast.ImportFrom) and n.module == "__future__" else n
                for n in node.body
            ]
        if isinstance(node, ast.arg):
            node.annotation = None  # annotations change no behaviour a test grades
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.returns = None
        elif isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant("")
        if isinstance(node, ast.Raise) and node.exc is not None:
            node.exc = Blank().visit(node.exc)
        elif isinstance(node, ast.Assert) and node.msg is not None:
            node.msg = Blank().visit(node.msg)
    for node in ast.walk(tree):  # a `pass` beside other statements (a comment made `pass`,
        for name in ("body", "orelse", "finalbody"):  # or the blanked parts above) does nothing
            block = getattr(node, name, None)
            if isinstance(block, list) and len(block) > 1:
                block[:] = [n for n in block if not isinstance(n, ast.Pass)] or block[:1]
    return ast.dump(tree)


def _c_code(line: str) -> str:
    """A C, C++, CUDA or Rust line without its comments and whitespace (strings kept)."""
    out, i, quote = [], 0, ""
    while i < len(line):
        c = line[i]
        if quote:
            out.append(c)
            if c == "\\" and i + 1 < len(line):
                out.append(line[i + 1])
                i += 1
            elif c == quote:
                quote = ""
        elif line.startswith("//", i):
            break
        elif line.startswith("/*", i):
            end = line.find("*/", i + 2)
            if end < 0:
                break
            i = end + 1
        elif c == '"':
            quote = c
            out.append(c)
        elif not c.isspace():
            out.append(c)
        i += 1
    return "".join(out)


class Validity:
    """Which mutants are worth running: those that still compile (a Python mutant compiles; a C,
    C++ or CUDA one passes the compiler's syntax check when the reference does) and are not the
    reference again (a Python mutant with the reference's AST, docstrings aside)."""

    def __init__(self, sources: dict[str, str], include_dirs: Iterable[Path] = ()) -> None:
        self.sources = sources
        self.include_dirs = list(include_dirs)
        self._shapes: dict[str, str | None] = {}
        self._native_ok: dict[str, bool] = {}
        self._crate: Path | None = None  # a copy of a Rust kata's crate for `cargo check`

    def __call__(self, m: Mutant) -> bool:
        text = m.apply(self.sources[m.file])
        suffix = Path(m.file).suffix
        if suffix == ".py":
            if m.file not in self._shapes:
                self._shapes[m.file] = _python_shape(self.sources[m.file], m.file)
            shape = _python_shape(text, m.file)
            return shape is not None and shape != self._shapes[m.file]
        if _c_code(m.original) == _c_code(m.replacement):
            return False  # a comment or whitespace: the same program
        if suffix == ".rs":
            return self._rust_ok(m.file, text)
        if suffix == ".ts":
            if m.file not in self._native_ok:
                self._native_ok[m.file] = self._ts_ok(m.file, self.sources[m.file])
            return not self._native_ok[m.file] or self._ts_ok(m.file, text)
        if suffix in (".c", ".h", ".cpp", ".cc", ".hpp", ".cu", ".cuh"):
            if (
                m.file not in self._native_ok
            ):  # the check is used only where the reference passes it
                self._native_ok[m.file] = self._syntax_ok(m.file, self.sources[m.file])
            return not self._native_ok[m.file] or self._syntax_ok(m.file, text)
        return True

    def _rust_ok(self, file: str, text: str) -> bool:
        """rustc's type check (no code) of the kata's crate with the mutant (its root lib.rs, or
        the file itself), used when the reference passes it."""
        rustc = shutil.which("rustc")
        if rustc is None:
            return True
        if self._crate is None:
            self._crate = Path(tempfile.mkdtemp(prefix="kata-mutant-crate-"))
            for d in reversed(self.include_dirs):  # the reference's files over the kata's
                for p in d.iterdir():
                    if p.is_file() and p.suffix == ".rs":
                        shutil.copy(p, self._crate / p.name)
            self._native_ok[file] = self._rustc_check(rustc, file, self.sources[file])
        ok = not self._native_ok[file] or self._rustc_check(rustc, file, text)
        (self._crate / file).write_text(self.sources[file], encoding="utf-8")
        return ok

    def _rustc_check(self, rustc: str, file: str, text: str) -> bool:
        assert self._crate is not None
        (self._crate / file).write_text(text, encoding="utf-8")
        root = "lib.rs" if (self._crate / "lib.rs").is_file() else file
        cmd = [rustc, "--edition", "2021", "--crate-type", "lib", "--emit=metadata",
               "-o", str(self._crate / "check.rmeta"), "-A", "warnings", root]  # fmt: skip
        try:
            proc = subprocess.run(cmd, cwd=self._crate, capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return proc.returncode == 0

    def _ts_ok(self, file: str, text: str) -> bool:
        """tsc's type check (`--noEmit`) of the TypeScript project around `file` (the nearest
        directory above it with a tsconfig.json: the kata's files, the reference's over them)
        with `text` as `file`; True where node or tsc is missing (nothing to check with)."""
        from .toolchain import find_tool

        node, tsc = find_tool("node"), find_tool("tsc")
        rel = Path(file)
        root = next((p for p in rel.parents if any((d / p / "tsconfig.json").is_file()
                                                   for d in self.include_dirs)), None)  # fmt: skip
        if node is None or tsc is None or root is None:
            return True
        with tempfile.TemporaryDirectory(prefix="kata-mutant-ts-") as tmp:
            project = Path(tmp) / "project"
            for d in reversed(self.include_dirs):  # the reference's files over the kata's
                if (d / root).is_dir():
                    shutil.copytree(d / root, project, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("node_modules", "dist"))  # fmt: skip
            (project / rel.relative_to(root)).write_text(text, encoding="utf-8")
            cmd = [str(node), os.path.realpath(tsc), "-p", "tsconfig.json", "--noEmit"]
            try:
                proc = subprocess.run(cmd, cwd=project, capture_output=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired):
                return False
        return proc.returncode == 0

    def close(self) -> None:
        if self._crate is not None:
            shutil.rmtree(self._crate, ignore_errors=True)
            self._crate = None

    def _syntax_ok(self, file: str, text: str) -> bool:
        suffix = Path(file).suffix
        c = suffix in (".c", ".h")
        compiler = shutil.which("cc" if c else "c++")
        if compiler is None:
            return False
        lang = ["-x", "c"] if c else ["-x", "c++", "-std=c++17"]
        if suffix in (".cu", ".cuh"):
            lang += ["-include", "cuda_runtime.h"]
        with tempfile.TemporaryDirectory(prefix="kata-mutant-") as tmp:
            src = Path(tmp) / Path(file).name
            src.write_text(text, encoding="utf-8")
            incs = [f"-I{d}" for d in [Path(tmp), *self.include_dirs]]
            cmd = [compiler, "-fsyntax-only", "-w", *lang, *incs, str(src)]
            try:
                proc = subprocess.run(cmd, capture_output=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                return False
            return proc.returncode == 0


NOT_COMPILED_HERE = (
    "not compiled on this host: the reference and the mutant preprocess to the same code "
    "(a preprocessor branch for another machine), with and without -march=native"
)
_NATIVE = (".c", ".h", ".cpp", ".cc", ".hpp", ".cu", ".cuh")
_HOST_FLAGS = ((), ("-march=native",))  # the katas' builds: plain, or for this machine's ISA


class HostBuild:
    """Whether this host compiles a native mutant's line at all: a line in a preprocessor branch
    for another machine (``#elif defined(__AVX__)`` on an AVX-512 host) preprocesses to the
    reference's code under every flag set the katas build with, so no run here can judge it."""

    def __init__(self, sources: dict[str, str], include_dirs: Iterable[Path] = ()) -> None:
        self.sources = sources
        self.include_dirs = list(include_dirs)
        self._reference: dict[str, list[str | None]] = {}

    def compiles(self, m: Mutant) -> bool:
        if Path(m.file).suffix not in _NATIVE:
            return True
        if m.file not in self._reference:
            text = self.sources[m.file]
            self._reference[m.file] = [self._preprocess(m.file, text, f) for f in _HOST_FLAGS]
        reference = self._reference[m.file]
        if any(r is None for r in reference):
            return True  # the reference does not preprocess alone here: run the mutant
        text = m.apply(self.sources[m.file])
        return any(self._preprocess(m.file, text, f) != r
                   for f, r in zip(_HOST_FLAGS, reference, strict=True))  # fmt: skip

    def _preprocess(self, file: str, text: str, flags: tuple[str, ...]) -> str | None:
        suffix = Path(file).suffix
        c = suffix in (".c", ".h")
        compiler = shutil.which("cc" if c else "c++")
        if compiler is None:
            return None
        lang = ["-x", "c"] if c else ["-x", "c++", "-std=c++17"]
        if suffix in (".cu", ".cuh"):
            lang += ["-include", "cuda_runtime.h"]
        with tempfile.TemporaryDirectory(prefix="kata-mutant-") as tmp:
            src = Path(tmp) / Path(file).name
            src.write_text(text, encoding="utf-8")
            incs = [f"-I{d}" for d in [Path(tmp), *self.include_dirs]]
            # -dD keeps the #define lines: a macro's body counts even where nothing expands it
            # (a header alone), a #define in a branch not taken does not
            cmd = [compiler, "-E", "-P", "-dD", "-w", *lang, *flags, *incs, str(src)]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                return None
        if proc.returncode != 0:
            return None
        return " ".join(proc.stdout.split())


def untested_here(res: MutantResult, judged_by: JudgedBy | None) -> MutantResult:
    """A mutant that every judged task missed, of a file that only tasks this machine did not
    run judge (mutants.toml's ``[[judged_by]]``): unjudged here, not a survivor."""
    if res.verdict != UNNOTICED or judged_by is None:
        return res
    if any(t not in res.not_run for t in judged_by.tasks):
        return res  # a task that runs the file was judged: it did not notice
    res.verdict = UNJUDGED
    res.reason = (
        f"only {', '.join(judged_by.tasks)} judge {judged_by.file} ({judged_by.reason}), and "
        "this machine did not run it"
    )
    return res


def native_include_dirs(manifest: Manifest) -> list[Path]:
    """Where a native learner file's includes are found: the reference, the kata, the CUDA
    headers of the harness' cpu backend."""
    dirs = [d for d in (mirror_of(manifest.dir), manifest.dir) if d is not None]
    return [*dirs, Path(__file__).parent / "cuda" / "cpu" / "include"]


# --------------------------------------------------------------------------- sampling
def sample(
    pools: dict[str, list[Mutant]],
    count: int,
    seed: int | str,
    valid: Callable[[Mutant], bool] = lambda m: True,
) -> list[Mutant]:
    """`count` mutants, deterministic given `seed`, spread across files (each file in turn,
    then in proportion to its mutated lines) and across lines (one per line until every line
    has had one). A mutant that is not `valid` is replaced by another of its line."""
    rng = random.Random(f"kata-mutants:{seed}")
    queues: dict[str, list[list[Mutant]]] = {}
    for file in sorted(pools):
        by_line: dict[int, list[Mutant]] = {}
        for m in pools[file]:
            by_line.setdefault(m.line, []).append(m)
        lines = sorted(by_line)
        rng.shuffle(lines)
        for mutants in by_line.values():
            rng.shuffle(mutants)
        queues[file] = [by_line[n] for n in lines]
    sizes = {f: max(1, len(q)) for f, q in queues.items()}
    taken = {f: 0 for f in queues}
    chosen: list[Mutant] = []
    while len(chosen) < count:
        live = [f for f in queues if queues[f]]
        if not live:
            break
        file = min(live, key=lambda f: (taken[f] / sizes[f], f))
        line = queues[file].pop(0)
        tried = line[:TRIES_PER_LINE]
        pick = next((m for m in tried if valid(m)), None)
        rest = line[tried.index(pick) + 1 :] if pick is not None else line[len(tried) :]
        if rest:  # the line's other mutants, once every line has had its turn
            queues[file].append(rest)
        if pick is None:
            continue  # none of these compiles: the next line
        chosen.append(pick)
        taken[file] += 1
    return chosen


# --------------------------------------------------------------------------- mutants.toml
@dataclass(frozen=True)
class Equivalent:
    file: str
    line: str  # the reference line's text, stripped
    mutant: str  # the replacement's text, stripped
    reason: str
    occurrence: int = 0  # which of the file's lines with this text (1, 2, ...); 0: every one

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.file, self.line, self.mutant)

    def matches(self, m: Mutant) -> bool:
        return m.key == self.key and self.occurrence in (0, m.occurrence)


@dataclass(frozen=True)
class JudgedBy:
    """``[[judged_by]]``: the only tasks that run a learner file (a gpu-tier task's file). A
    mutant of it that no judged task notices is unjudged, not a survivor, when none of these
    tasks ran here."""

    file: str
    tasks: tuple[str, ...]
    reason: str


@dataclass
class MutantsToml:
    equivalents: list[Equivalent] = field(default_factory=list)
    judged_by: list[JudgedBy] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def equivalents_path(manifest: Manifest) -> Path | None:
    mirror = mirror_of(manifest.dir)
    return mirror / MUTANTS_TOML if mirror is not None else None


def load_mutants_toml(manifest: Manifest) -> MutantsToml:
    """The kata's ``solutions/<kata>/mutants.toml``: its equivalent mutants, the files only some
    tasks judge, and the problems of its entries (a missing field, an unknown file or task)."""
    out = MutantsToml()
    path = equivalents_path(manifest)
    if path is None or not path.is_file():
        return out
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        out.problems.append(f"{path}: invalid TOML: {e}")
        return out
    unknown = sorted(set(data) - {"equivalent", "judged_by"})
    if unknown:
        out.problems.append(
            f"{path}: {unknown[0]}: unknown table (known: [[equivalent]], [[judged_by]])"
        )
    tasks = {t.id for t in manifest.tasks}
    for table_name, fields in (("equivalent", ("file", "line", "mutant", "reason")),
                               ("judged_by", ("file", "tasks", "reason"))):  # fmt: skip
        entries = data.get(table_name, [])
        if not isinstance(entries, list):
            out.problems.append(
                f"{path}: {table_name}: must be an array of tables ([[{table_name}]])"
            )
            continue
        optional = ("occurrence",) if table_name == "equivalent" else ()
        for i, e in enumerate(entries):
            where = f"{path}: {table_name}[{i}]"
            if not isinstance(e, dict):
                out.problems.append(f"{where}: must be a table")
                continue
            extra = sorted(set(e) - set(fields) - set(optional))
            if extra:
                out.problems.append(
                    f"{where}.{extra[0]}: unknown field (known: {', '.join(fields + optional)})"
                )
                continue
            strings = [f for f in fields if f != "tasks"]
            bad = next((f for f in strings if not isinstance(e.get(f), str) or not e[f].strip()),
                       None)  # fmt: skip
            if bad:
                out.problems.append(f"{where}.{bad}: missing or empty (a string)")
                continue
            if e["file"] not in manifest.files:
                out.problems.append(
                    f"{where}.file: {e['file']!r} is not a learner file "
                    f"({', '.join(manifest.files)})"
                )
                continue
            if table_name == "equivalent":
                occurrence = e.get("occurrence", 0)
                if "occurrence" in e and (type(occurrence) is not int or occurrence < 1):
                    out.problems.append(
                        f"{where}.occurrence: must be a positive integer (which of the file's "
                        "lines with this text: 1 for the first)"
                    )
                    continue
                out.equivalents.append(Equivalent(
                    e["file"], e["line"].strip(), e["mutant"].strip(), e["reason"], occurrence,
                ))  # fmt: skip
                continue
            named = e.get("tasks")
            if (
                not isinstance(named, list)
                or not named
                or not all(isinstance(t, str) for t in named)
            ):
                out.problems.append(f"{where}.tasks: missing or empty (a list of task ids)")
                continue
            missing = [t for t in named if t not in tasks]
            if missing:
                out.problems.append(
                    f"{where}.tasks: {missing[0]!r} is not a task ({', '.join(sorted(tasks))})"
                )
                continue
            out.judged_by.append(JudgedBy(e["file"], tuple(named), e["reason"]))
    return out


def load_equivalents(manifest: Manifest) -> tuple[list[Equivalent], list[str]]:
    """The kata's equivalent mutants (``solutions/<kata>/mutants.toml``) and the problems of the
    file's entries: a missing field, an unknown file, an entry that no longer matches."""
    toml = load_mutants_toml(manifest)
    return toml.equivalents, toml.problems


def stale_equivalents(equivalents: list[Equivalent], sources: dict[str, str]) -> list[Equivalent]:
    """Entries whose reference line is no longer in their file (or not as often as their
    `occurrence` says): the reference changed."""
    lines = {f: [ln.strip() for ln in t.splitlines()] for f, t in sources.items()}
    return [e for e in equivalents if lines.get(e.file, []).count(e.line) < max(1, e.occurrence)]


# --------------------------------------------------------------------------- judging
@dataclass
class TaskPoints:
    task: str
    points: int
    reference: float
    earned: float


@dataclass
class MutantResult:
    mutant: Mutant
    verdict: str  # CAUGHT, TIMEOUT, DENTED, UNNOTICED, EQUIVALENT, UNJUDGED
    tasks: list[TaskPoints] = field(default_factory=list)  # the tasks both runs judged
    not_run: list[str] = field(default_factory=list)  # tasks this machine skips (tier, tools)
    diff: str = ""
    reason: str = ""  # EQUIVALENT: mutants.toml's reason; UNJUDGED: what went wrong
    seconds: float = 0.0
    # DENTED: for each test it failed in a task it kept more than half of, where the mutant's
    # code raised ("" for a test whose check failed: harness.results.TestRecord.raised)
    raised: list[str] = field(default_factory=list)

    @property
    def honest(self) -> bool:
        """A survivor whose every lost test failed on an exception of the mutant's own code (or
        a missing return): an honest mistake, which by the harness's rule never trips a gate, so
        only a task that loses more than half its tests to it is capped."""
        return self.verdict == DENTED and bool(self.raised) and all(self.raised)

    @property
    def survived(self) -> bool:
        return self.verdict in SURVIVED

    @property
    def counted(self) -> bool:
        return self.verdict in (CAUGHT, TIMEOUT, DENTED, UNNOTICED)

    def kept(self) -> list[TaskPoints]:
        """The tasks a survivor kept more than half of while losing points (DENTED), or every
        task (UNNOTICED)."""
        if self.verdict == UNNOTICED:
            return self.tasks
        return [t for t in self.tasks if t.earned < t.reference]

    def honest_note(self) -> str:
        if not self.honest:
            return ""
        return f"; every test it failed raised in its code ({self.raised[0]}): no gate caps that"

    def summary(self) -> str:
        if self.verdict == EQUIVALENT:
            return f"equivalent: {self.reason}"
        if self.verdict == TIMEOUT:
            return "caught: killed by the wall limit (a hang)"
        if self.verdict == UNJUDGED:
            return f"unjudged: {self.reason}"
        if self.verdict == CAUGHT:
            capped = [t for t in self.tasks if t.earned <= t.points * MAX_SHARE]
            return "caught: " + ", ".join(
                f"{t.task} {fmt_points(t.earned)}/{t.points}" for t in capped
            )
        if self.verdict == DENTED:
            return (
                "SURVIVED (points lost, no task capped): "
                + ", ".join(f"{t.task} {fmt_points(t.earned)}/{t.points}" for t in self.kept())
                + self.honest_note()
            )
        return "SURVIVED (full points on every task): no test tells it from the reference"


def judge(mutant: Mutant, reference: RunResult, run: RunResult, kata_id: str) -> MutantResult:
    """The survivor rule: caught when some task earns at most MAX_SHARE of its points; a
    survivor when every task judged in both runs keeps more than that share."""
    ref = _kata(reference, kata_id)
    got = _kata(run, kata_id)
    if ref is None or got is None:
        return MutantResult(mutant, UNJUDGED, reason=f"no results for kata {kata_id}")
    tasks, not_run = [], []
    for rt in ref.tasks:
        mt = next((t for t in got.tasks if t.id == rt.id), None)
        if mt is None or not _judged(rt) or all(r.outcome == SKIPPED for r in mt.tests):
            not_run.append(rt.id)  # a task this machine cannot run says nothing of the mutant
            continue
        tasks.append(TaskPoints(rt.id, rt.points, rt.earned, mt.earned))
    if not tasks:
        return MutantResult(mutant, UNJUDGED, reason="no task was judged in both runs")
    if any(t.earned <= t.points * MAX_SHARE for t in tasks):
        verdict = CAUGHT
    elif any(t.earned < t.reference for t in tasks):
        res = MutantResult(mutant, DENTED, tasks, not_run)
        lost = {t.task for t in res.kept()}
        res.raised = [
            r.raised
            for t in got.tasks
            if t.id in lost
            for r in t.tests
            if r.outcome in (FAILED, ERROR)
        ]
        return res
    else:
        verdict = UNNOTICED
    return MutantResult(mutant, verdict, tasks, not_run)


def classify(mutant: Mutant, reference: RunResult, run: Run, kata_id: str) -> MutantResult:
    """A mutant's run judged: killed by the wall limit is caught (a hang); no results at all is
    unjudged (something other than the mutant broke); else :func:`judge`."""
    if run.timed_out:
        res = MutantResult(mutant, TIMEOUT)
    elif run.result is None:
        res = MutantResult(mutant, UNJUDGED, reason="the run produced no results: "
                           + _last_line(run.output))  # fmt: skip
    else:
        res = judge(mutant, reference, run.result, kata_id)
    res.seconds = run.seconds
    return res


def _kata(run: RunResult, kata_id: str):  # noqa: ANN202
    return next((k for k in run.katas if k.id == kata_id), None)


def _judged(task) -> bool:  # noqa: ANN001
    return any(r.outcome == PASSED for r in task.tests)


def score(results: list[MutantResult]) -> float | None:
    """caught / (caught + survivors); None when no mutant was counted."""
    counted = [r for r in results if r.counted]
    if not counted:
        return None
    return sum(1 for r in counted if not r.survived) / len(counted)


# --------------------------------------------------------------------------- running
@dataclass
class Run:
    """One pytest run of a kata: its results (None: none came back) and how it ended."""

    result: RunResult | None
    output: str
    seconds: float
    timed_out: bool = False


def run_kata(
    kata_dir: Path,
    root: Path,
    impl: str,
    workdir: Path,
    timeout: float | None,
    extra: list[str] | None = None,
) -> Run:
    """Run every test of the kata (public and hidden) with `impl`, killed after `timeout` s."""
    workdir.mkdir(parents=True, exist_ok=True)
    report = workdir / "report.json"
    cmd = [
        sys.executable, "-m", "pytest", str(kata_dir), f"--kata-impl={impl}",
        f"--kata-report=json:{report}", f"--kata-results-dir={workdir / 'results'}",
        "-p", "no:cacheprovider", "-q", "--no-header", "-rN", *(extra or []),
    ]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group: a timeout kills the forked children too
    )  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    seconds = time.monotonic() - start
    result = RunResult.load(report) if report.exists() and not timed_out else None
    return Run(result, output or "", seconds, timed_out)


@dataclass
class KataMutation:
    """What `kata verify --mutants` found for one kata."""

    kata: str
    sampled: int = 0
    results: list[MutantResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # failures of `kata verify`
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    candidates: int = 0

    def count(self, *verdicts: str) -> int:
        return sum(1 for r in self.results if r.verdict in verdicts)

    @property
    def score(self) -> float | None:
        return score(self.results)

    @property
    def survivors(self) -> list[MutantResult]:
        return [r for r in self.results if r.survived]


ImplFor = Callable[[Manifest, str, Path], str]
"""(manifest, a unified diff of one learner file, a private directory) → a --kata-impl value
that runs the reference with the diff applied."""


def patch_impl(manifest: Manifest, diff: str, workdir: Path) -> str:
    """The reference with `diff` applied, as ``--kata-impl=patch:<file>``."""
    path = workdir / "mutant.patch"
    path.write_text(diff, encoding="utf-8")
    return f"patch:{path}"


@dataclass(frozen=True)
class MutantOptions:
    """`kata verify --mutants[=N] [-j J] [--mutant-seed S] [--mutant-timeout T]`."""

    count: int = DEFAULT_COUNT
    seed: int | str = DEFAULT_SEED
    jobs: int | None = None  # mutants run at once (default: half the CPUs)
    timeout: float | None = None  # each mutant's wall limit (default: 3 × the reference's run)


def mutate_kata(
    manifest: Manifest,
    root: Path,
    extra: list[str] | None = None,
    options: MutantOptions | None = None,
    impl_for: ImplFor = patch_impl,
    workdir: Path | None = None,
    chosen: list[Mutant] | None = None,
    reference: RunResult | None = None,
) -> KataMutation:
    """Sample `options.count` mutants of the kata's reference, run each, judge each against
    the reference's own run. Each mutant's wall limit is `options.timeout`, by default 3 × the
    reference's run and at least 60 s. `chosen`: run these mutants instead of a sample.
    `reference`: a run of the reference's tests already made (else the kata's is run first)."""
    options = options or MutantOptions()
    count, seed, jobs, timeout = options.count, options.seed, options.jobs, options.timeout
    start = time.monotonic()
    out = KataMutation(manifest.id)
    mirror = mirror_of(manifest.dir)
    if mirror is None or not mirror.is_dir():
        out.problems.append(f"mutants: no solutions/ mirror for {manifest.dir}")
        return out
    sources: dict[str, str] = {}
    for f in manifest.files:
        path = mirror / f
        if path.is_file():
            sources[f] = path.read_text(encoding="utf-8")
    toml = load_mutants_toml(manifest)
    equivalents = toml.equivalents
    out.problems += toml.problems
    for e in stale_equivalents(equivalents, sources):
        out.problems.append(
            f"mutants.toml: the equivalent mutant of {e.file} line {e.line!r} no longer matches "
            "a line of the reference: update or delete it"
        )
    pools = {f: candidates(f, t) for f, t in sources.items()}
    skipped = sorted(f for f in manifest.files if f in sources and _rules_for(f) is None)
    if skipped:
        out.notes.append(f"mutants: no mutation rules for {', '.join(skipped)}")
    out.candidates = sum(len(p) for p in pools.values())
    if chosen is None:
        valid = Validity(sources, native_include_dirs(manifest))
        try:
            chosen = sample(pools, count, f"{seed}:{manifest.id}", valid)
        finally:
            valid.close()
    out.sampled = len(chosen)
    judged_by = {j.file: j for j in toml.judged_by}
    host = HostBuild(sources, native_include_dirs(manifest))
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kata-mutants-")))
        if reference is not None and _kata(reference, manifest.id) is not None:
            # the caller's run of the reference (kata verify's): its tests' time, and startup
            spent = sum(r.duration for t in _kata(reference, manifest.id).tasks for r in t.tests)
            baseline = Run(reference, "", STARTUP_S + spent)
        else:
            baseline = run_kata(manifest.dir, root, "solution", workdir / "reference", None, extra)
        if baseline.result is None:
            out.problems.append(
                f"mutants: the reference run produced no results:\n{baseline.output[-2000:]}"
            )
            return out
        limit = timeout if timeout is not None else max(60.0, 3 * baseline.seconds)

        def one(i: int, m: Mutant) -> MutantResult:
            diff = m.diff(sources[m.file])
            known = next((e for e in equivalents if e.matches(m)), None)
            if known is not None:
                return MutantResult(m, EQUIVALENT, diff=diff, reason=known.reason)
            if not host.compiles(m):
                return MutantResult(m, UNJUDGED, diff=diff, reason=NOT_COMPILED_HERE)
            where = workdir / f"m{i:03d}-{m.id}"
            where.mkdir(parents=True, exist_ok=True)
            impl = impl_for(manifest, diff, where)
            res = classify(m, baseline.result, run_kata(manifest.dir, root, impl, where, limit, extra),
                           manifest.id)  # fmt: skip
            res.diff = diff
            return untested_here(res, judged_by.get(m.file))

        workers = max(1, jobs or default_jobs())
        with ThreadPoolExecutor(max_workers=workers) as pool:
            out.results = list(pool.map(one, range(len(chosen)), chosen))
    for r in out.results:
        if r.verdict == UNJUDGED:
            out.notes.append(f"mutant {r.mutant.where} ({r.mutant.id}) not judged: {r.reason}")
    out.seconds = time.monotonic() - start
    return out


def default_jobs() -> int:
    """Half the CPUs this process may use (each mutant's run is one pytest process)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus // 2)


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


# --------------------------------------------------------------------------- reports
def mutant_line(r: MutantResult) -> str:
    """One mutant: id, where, the mutation, its verdict and the points of each task it changed
    (earned / points, the reference's when that is not full)."""
    m = r.mutant
    changed = [t for t in r.tasks if t.earned != t.reference]
    if r.verdict in (CAUGHT, DENTED):
        points = ", ".join(
            f"{t.task} {fmt_points(t.earned)}/{t.points}"
            + (f" (reference {fmt_points(t.reference)})" if t.reference != t.points else "")
            for t in changed
        )
    elif r.verdict == UNNOTICED:
        points = "every task as the reference"
    else:
        points = r.reason or "killed by the wall limit"
    return (
        f"[{m.id}] {m.where}{m.which}: `{m.original.strip()}` → `{m.replacement.strip()}`: "
        f"{r.verdict}: {points}{r.honest_note()}"
    )


def survivor_text(kata: str, r: MutantResult) -> str:
    """A survivor for its kata's owners: where, the mutation, the tasks and points it kept."""
    m = r.mutant
    kept = ", ".join(f"{t.task} {fmt_points(t.earned)}/{t.points}" for t in r.kept())
    skipped = f" (not run here: {', '.join(r.not_run)})" if r.not_run else ""
    return (
        f"{kata} {m.where}{m.which} [{m.id}] {r.verdict}: `{m.original.strip()}` → "
        f"`{m.replacement.strip()}`; kept {kept}{skipped}{r.honest_note()}"
    )


def table(katas: list[KataMutation], markdown: bool = False) -> list[str]:
    """One row per kata: sampled, caught, survived, equivalent, unjudged, score, seconds."""
    head = ("kata", "sampled", "caught", "survived", "equivalent", "unjudged", "score", "seconds")
    rows = []
    for k in katas:
        s = k.score
        rows.append((
            k.kata, str(k.sampled), str(k.count(CAUGHT, TIMEOUT)), str(k.count(*SURVIVED)),
            str(k.count(EQUIVALENT)), str(k.count(UNJUDGED)),
            "-" if s is None else f"{s:.0%}", f"{k.seconds:.0f}",
        ))  # fmt: skip
    if markdown:
        return [
            "| " + " | ".join(head) + " |",
            "|" + "|".join("---" for _ in head) + "|",
            *("| " + " | ".join(r) + " |" for r in rows),
        ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in [head, *rows]]  # fmt: skip


__all__ = [
    "DEFAULT_COUNT",
    "MUTANTS_TOML",
    "Equivalent",
    "KataMutation",
    "Mutant",
    "MutantOptions",
    "MutantResult",
    "MutantsError",
    "candidates",
    "judge",
    "mutant_line",
    "load_equivalents",
    "load_mutants_toml",
    "mutate_kata",
    "sample",
    "score",
    "table",
]
