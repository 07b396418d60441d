"""The harness's import graph: no cycles, and no module uses another's private names.

The graph is read from the source (ast), never by importing, so it sees every import:

- at module level, inside functions (lazy imports), under ``if TYPE_CHECKING:`` and in
  ``try/except ImportError``. A lazy import breaks a cycle at import time only: the two modules
  still need each other, so it counts. So does a type-only import (a type is a dependency);
- a module's ``pytest_plugins`` strings (``harness.plugin`` loads its sub-plugins by name);
- ``from pkg import name`` is an edge to the submodule ``pkg.name`` when there is one, else to
  ``pkg`` itself (a name its ``__init__`` defines). Importing ``a.b.c`` also runs ``a`` and
  ``a.b``, as every Python import does: that is not counted, or every package whose
  ``__init__`` imports its own submodules would look cyclic.

Not seen: modules named at run time (``importlib.import_module(f"...{name}")``), and attribute
access through a module object (``mod._name``) unless the module was imported by name.

harness/tests/ is left out: the tests import the harness (never the reverse) and may test
private functions. docs/harness-map.md draws the graph this test keeps acyclic.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"

# Cycles that other work of issue 13 removes, each with who. An entry that is no longer a cycle
# fails the test too: delete it when its cycle is gone, so the list only shrinks.
KNOWN_CYCLES: dict[frozenset[str], str] = {}
# The same for private names: "file: name" -> who removes it.
KNOWN_PRIVATE: dict[str, str] = {}


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    where: str  # "harness/x.py:12"
    lazy: bool  # inside a function or under TYPE_CHECKING: runs later, or never


def harness_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of harness/ outside harness/tests/."""
    out = {}
    for path in sorted((root / "harness").rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        if "tests" in rel.parts or "__pycache__" in rel.parts:
            continue
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def _base(module: str, path: Path) -> str:
    """The package a relative import in `module` starts from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    pkg = _base(module, path).split(".")
    pkg = pkg[: len(pkg) - (node.level - 1)]
    return ".".join(pkg + ([node.module] if node.module else []))


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The harness module that `name` (a module, or a name inside one) lives in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, and whether it is lazy (in a function, or type-only)."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def walk(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, inner))
            walk(child, inner or _is_type_checking(child))

    walk(tree, False)
    return found


def _plugin_names(tree: ast.Module) -> list[tuple[str, int]]:
    """The harness modules a module's ``pytest_plugins`` names (strings anywhere in it)."""
    out = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in targets):
            for const in ast.walk(node.value):
                if isinstance(const, ast.Constant) and isinstance(const.value, str):
                    if const.value.startswith("harness."):
                        out.append((const.value, node.lineno))
    return out


def import_graph(root: Path = ROOT) -> list[Edge]:
    modules = harness_modules(root)
    edges = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        where = lambda line: f"{path.relative_to(root).as_posix()}:{line}"  # noqa: B023
        targets: list[tuple[str, int, bool]] = []
        for node, lazy in _imports(tree):
            if isinstance(node, ast.Import):
                targets += [(a.name, node.lineno, lazy) for a in node.names]
                continue
            base = _absolute(module, path, node)
            for a in node.names:
                sub = f"{base}.{a.name}"
                targets.append((sub if sub in modules else base, node.lineno, lazy))
        targets += [(name, line, False) for name, line in _plugin_names(tree)]
        for name, line, lazy in targets:
            dst = _owner(name, modules) if name.startswith("harness") else None
            if dst is not None and dst != module:
                edges.append(Edge(module, dst, where(line), lazy))
    return edges


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.src, set()).add(e.dst)
        graph.setdefault(e.dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def describe(component: list[str], edges: list[Edge]) -> str:
    inside = [e for e in edges if e.src in component and e.dst in component]
    lines = [f"  {e.src} -> {e.dst}  ({e.where}{', lazy' if e.lazy else ''})" for e in inside]
    return " <-> ".join(component) + "\n" + "\n".join(sorted(set(lines)))


def test_the_harness_has_no_import_cycles() -> None:
    edges = import_graph()
    found = cycles(edges)
    new = [c for c in found if frozenset(c) not in KNOWN_CYCLES]
    assert not new, (
        "import cycles in harness/ (move what both need into a module of its own):\n"
        + ("\n".join(describe(c, edges) for c in new))
    )
    gone = [f"{sorted(c)} ({who})" for c, who in KNOWN_CYCLES.items() if sorted(c) not in found]
    assert not gone, f"no longer cycles: delete them from KNOWN_CYCLES: {gone}"


def private_imports(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """`from harness.x import _name` (and `harness.x._name` through an imported module) where
    `_name` is private to another module. A package's private submodule (``harness._lazy``) is
    its own to use: any module inside that package may import it. Each is (file, name, what)."""
    modules = harness_modules(root)
    found = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        rel = path.relative_to(root).as_posix()
        aliases: dict[str, str] = {}  # local name -> harness module imported under it
        for node, _lazy in _imports(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in modules:
                        aliases[a.asname or a.name.split(".")[0]] = (
                            a.name if a.asname else a.name.split(".")[0]
                        )
                continue
            base = _absolute(module, path, node)
            if not base.startswith("harness"):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in modules:
                    aliases[a.asname or a.name] = sub
                    if _private(a.name) and not module.startswith(base + "."):
                        found.append((rel, a.name, f"{rel}:{node.lineno}: imports module {sub}"))
                elif _private(a.name) and base != module:
                    found.append(
                        (rel, a.name, f"{rel}:{node.lineno}: imports {a.name} from {base}")
                    )
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _private(node.attr)
                and aliases[node.value.id] != module
                and f"{aliases[node.value.id]}.{node.attr}" not in modules
            ):
                used = f"{aliases[node.value.id]}.{node.attr}"
                found.append((rel, node.attr, f"{rel}:{node.lineno}: uses {used}"))
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_modules_private_names() -> None:
    keys = {f"{path}: {name}": text for path, name, text in private_imports()}
    found = [text for key, text in keys.items() if key not in KNOWN_PRIVATE]
    gone = [key for key in KNOWN_PRIVATE if key not in keys]
    assert not gone, f"no longer used: delete them from KNOWN_PRIVATE: {gone}"
    assert not found, (
        "private names used across harness modules (make them public, or move "
        "the code that needs them):\n" + "\n".join(found)
    )


# --------------------------------------------------------------------------- the checks have teeth
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "harness" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    "a_imports",
    [
        "from . import b",  # module level
        "def f():\n    from .b import g\n",  # lazy, to break the cycle at import time
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.b import T\n",
        "try:\n    import harness.b\nexcept ImportError:\n    pass\n",
    ],
)
def test_a_cycle_is_found_however_its_import_is_written(tmp_path: Path, a_imports: str) -> None:
    root = _tree(tmp_path, {"__init__.py": "", "a.py": a_imports, "b.py": "from .a import x\n"})
    assert cycles(import_graph(root)) == [["harness.a", "harness.b"]]


def test_pytest_plugins_and_package_names_are_edges(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "plugin.py": 'pytest_plugins = [n for n in ("harness.sub",)]\n',
            "sub/__init__.py": "from ..plugin import STATE\n",
            "pkg/__init__.py": "from .w import write\nOPTIONS = 1\n",
            "pkg/w.py": "from . import OPTIONS\n",  # a name of the package: a real cycle
            "ok/__init__.py": "from .m import f\n",
            "ok/m.py": "from . import n\n",  # a submodule: no edge to the package
            "ok/n.py": "",
        },
    )
    assert cycles(import_graph(root)) == [
        ["harness.pkg", "harness.pkg.w"],
        ["harness.plugin", "harness.sub"],
    ]


def test_private_names_across_modules_are_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "_lazy.py": "",
            "plugin.py": "_context = 1\nfrom . import _lazy\n",  # the package's own: fine
            "a.py": "from .plugin import _context\n",
            "b.py": "from harness import plugin\nx = plugin._context\n",
            "c.py": "from . import plugin\ny = plugin.__name__\n",  # dunder: public
        },
    )
    assert [text for _, _, text in private_imports(root)] == [
        "harness/a.py:1: imports _context from harness.plugin",
        "harness/b.py:2: uses harness.plugin._context",
    ]


# --------------------------------------------------------------------------- the map stays whole
def test_the_harness_map_names_every_top_level_module_and_package() -> None:
    """docs/harness-map.md says who owns what: a new module of harness/ gets its line there."""
    text = (ROOT / "docs" / "harness-map.md").read_text(encoding="utf-8")
    names = {p.name for p in HARNESS.glob("*.py") if p.name != "__init__.py"}
    names |= {f"{p.name}/" for p in HARNESS.iterdir() if (p / "__init__.py").is_file()}
    missing = sorted(n for n in names - {"tests/"} if f"`{n}`" not in text)
    assert not missing, f"docs/harness-map.md does not name {missing}: add each to its part's row"
