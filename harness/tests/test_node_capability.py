"""The `node` capability (phase 12's TypeScript CLI): Node.js >= 20.15 and a tsc of the `typescript`
npm package, found on PATH or in the repository's node_modules/ after `npm ci`; how graders and
CI install it (the root package.json pins typescript; install.sh runs `npm ci`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import tiers, toolchain
from harness.capabilities import GPU_IMAGE_LACKS, INSTALL, main, npm_plan

from .conftest import DEMO_MANIFEST

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A private probe cache and no memoised tool look-ups, before and after."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    toolchain.clear_caches()
    yield tmp_path
    toolchain.clear_caches()


def _node(tmp: Path, version: str) -> Path:
    exe = tmp / f"node-{version}"
    exe.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo {version} && exit 0\nexit 9\n')
    exe.chmod(0o755)
    return exe


def _tsc(tmp: Path, name: str, version: str) -> Path:
    """A package laid out as npm does: <pkg>/bin/tsc and <pkg>/package.json, reached through a
    node_modules/.bin symlink."""
    pkg = tmp / f"pkg-{name}-{version}"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": name, "version": version}))
    (pkg / "bin" / "tsc").write_text("#!/usr/bin/env node\n")
    (pkg / "bin" / "tsc").chmod(0o755)
    link = tmp / f"bin-{name}-{version}" / "tsc"
    link.parent.mkdir()
    link.symlink_to(pkg / "bin" / "tsc")
    return link


def test_node_needs_version_20_15_or_later(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """20.15 brought --disable-wasm-trap-handler, without which fetch fails under RLIMIT_AS."""
    monkeypatch.setenv("KATA_TOOL_TSC", str(_tsc(fresh, "typescript", "5.9.3")))
    for version in ("v16.20.2", "v18.19.0", "v20.14.0"):
        old = tiers._probe_node(_node(fresh, version))
        assert old is not None and f"node {version} is too old" in old and ">= 20.15" in old, old
        assert "apt-get install -y nodejs npm" in old, "the sentence says how to get a newer one"
    for version in ("v20.15.0", "v20.20.2", "v22.2.0", "v24.1.0"):
        assert tiers._probe_node(_node(fresh, version)) is None, version
    garbage = _node(fresh, "hello")
    why = tiers._probe_node(garbage)
    assert why is not None and "not a Node.js version" in why, why


def test_node_needs_the_typescript_packages_tsc(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    node = _node(fresh, "v20.18.0")
    monkeypatch.setenv("PATH", str(fresh / "empty"))  # no tsc on PATH
    monkeypatch.chdir(fresh)  # no repository around the working directory
    monkeypatch.setattr(toolchain, "_node_modules_bins", lambda: [])
    why = tiers._probe_node(node)
    assert why is not None and why.startswith("node is here but tsc was not found"), why
    assert "npm ci" in why and "npm install -g typescript@5" in why, why
    for name, version, said in (
        ("not-typescript", "5.0.0", "is not the typescript npm package's tsc"),
        ("typescript", "4.9.5", "typescript 4.9.5"),
    ):
        monkeypatch.setenv("KATA_TOOL_TSC", str(_tsc(fresh, name, version)))
        toolchain.clear_caches()
        why = tiers._probe_node(node)
        assert why is not None and said in why, why
    monkeypatch.setenv("KATA_TOOL_TSC", str(_tsc(fresh, "typescript", "5.0.4")))
    toolchain.clear_caches()
    assert tiers._probe_node(node) is None


def test_the_node_version_is_asked_once_per_binary(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("KATA_TOOL_TSC", str(_tsc(fresh, "typescript", "5.9.3")))
    runs = fresh / "runs"
    node = fresh / "node"
    node.write_text(f"#!/bin/sh\necho run >> {runs}\necho v22.0.0\n")
    node.chmod(0o755)
    assert tiers._probe_node(node) is None and tiers._probe_node(node) is None
    assert runs.read_text() == "run\n", "the second probe used the kept answer"
    node.write_text(f"#!/bin/sh\necho run >> {runs}\necho v20.9.1\n# another build\n")
    why = tiers._probe_node(node)
    assert why is not None and "v20.9.1 is too old" in why and runs.read_text() == "run\nrun\n"


def test_tsc_is_found_in_the_repositorys_node_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    repo = tmp_path / "course"
    (repo / "katas").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    bin_dir = repo / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    real = _tsc(tmp_path, "typescript", "5.9.3")
    (bin_dir / "tsc").symlink_to(real.resolve())
    (repo / "katas" / "deep").mkdir()
    monkeypatch.chdir(repo / "katas" / "deep")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("KATA_TOOL_TSC", raising=False)
    toolchain.clear_caches()
    try:
        assert bin_dir in toolchain.search_dirs("tsc")
        assert toolchain.find_tool("tsc") == bin_dir / "tsc"
        assert toolchain.typescript_version(bin_dir / "tsc") == "5.9.3"
    finally:
        toolchain.clear_caches()


def test_the_probe_names_node_with_a_reason_when_it_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.setattr(tiers, "_find_tool", lambda cap: None)
    monkeypatch.setattr(tiers, "_probe_os", lambda: {})
    monkeypatch.setattr(tiers, "_probe_gpu", lambda: "no gpu")
    caps = tiers.probe()
    assert not caps.has("node")
    assert caps.why_not("node").startswith("node was not found: install Node.js >= 20.15"), caps.why_not("node")  # fmt: skip


# --------------------------------------------------------------------------- installing it
def test_the_install_map_pins_every_npm_package_in_the_lock_file() -> None:
    assert INSTALL["node"].npm == ("typescript",)
    assert INSTALL["node"].apt == ("nodejs", "npm")
    package = json.loads((ROOT / "package.json").read_text())
    lock = json.loads((ROOT / "package-lock.json").read_text())
    for name in {p for inst in INSTALL.values() for p in inst.npm}:
        pinned = package["devDependencies"][name]
        assert pinned[0].isdigit(), f"{name} is pinned to one version in package.json, not {pinned}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == pinned, name
        assert lock["packages"][""]["devDependencies"][name] == pinned, "npm ci would refuse"
    major = int(package["devDependencies"]["typescript"].split(".")[0])
    assert major >= tiers.MIN_TYPESCRIPT
    assert "node" in GPU_IMAGE_LACKS, "the gpu-tier image has no package registry for typescript"


def _source(tmp: Path, capabilities: str) -> Path:
    """A course tree whose one kata needs `capabilities`, with this harness."""
    src = tmp / "course"
    kata = src / "katas" / "phase01" / "demo"
    kata.mkdir(parents=True)
    manifest = DEMO_MANIFEST.format(id="demo", time_limit=10)
    (kata / "kata.toml").write_text(manifest + f"\n[requires]\ncapabilities = [{capabilities}]\n")
    (kata / "calc.py").write_text("")
    (src / "harness").symlink_to(ROOT / "harness")
    return src


def test_npm_plan_and_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from harness.capabilities import manifests

    with_node = _source(tmp_path / "a", '"node"')
    without = _source(tmp_path / "b", "")
    assert npm_plan(manifests(with_node)) == ["typescript"]
    assert npm_plan(manifests(without)) == []
    assert main(["npm", str(with_node)]) == 0
    assert capsys.readouterr().out.strip() == "typescript"


@pytest.mark.parametrize("node_on_path", [True, False])
def test_install_sh_runs_npm_ci_in_the_course(tmp_path: Path, node_on_path: bool) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("install.sh installs apt packages only as root on a Debian-like system")
    src = _source(tmp_path, '"node"')
    env = dict(os.environ, KATA_INSTALL_DRY_RUN="1", KATA_SETUP_PYTHON=sys.executable)
    if not node_on_path:  # only the commands install.sh runs, and no node
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        for tool in ("apt-get", "id", "grep", "paste"):
            (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
        env["PATH"] = str(bin_dir)
    proc = subprocess.run(
        [shutil.which("bash") or "bash", str(ROOT / "harness/graders/install.sh"), str(src), "-"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"+ npm ci --prefix {src} " in out, out
    apt = [ln for ln in out.splitlines() if ln.startswith("+ ") and "apt-get install" in ln]
    if node_on_path:
        assert shutil.which("node"), "this machine has a node"
        assert not any("nodejs" in ln for ln in apt), "a node on PATH is kept: " + out
    else:
        assert apt and apt[0].endswith("nodejs npm"), out


def test_ci_installs_typescript_with_npm_ci() -> None:
    text = (ROOT / ".ci" / "run").read_text()
    assert "npm ci" in text and "apt-get install -y -qq nodejs npm" in text
    assert "node_modules/" in (ROOT / ".gitignore").read_text().splitlines()


# --------------------------------------------------------------------------- building with tsc
def _has_node() -> bool:
    return tiers.probe().has("node")


@pytest.mark.skipif(not _has_node(), reason="needs the node capability (Node.js and tsc)")
def test_build_typescript_compiles_into_the_cache_and_reports_errors(tmp_path: Path) -> None:
    from harness.native.build import BuildError
    from harness.native.cache import ArtefactCache
    from harness.native.typescript import build_typescript, node_command, trim_tsc_output

    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    config = project / "tsconfig.json"
    config.write_text(json.dumps({"compilerOptions": {
        "target": "ES2022", "module": "commonjs", "strict": True, "types": [],
        "lib": ["ES2022"], "rootDir": "src", "outDir": "dist"}}))  # fmt: skip
    (project / "src" / "env.d.ts").write_text("declare const console: { log(x: unknown): void };\n")
    main = project / "src" / "main.ts"
    main.write_text("const n: number = 6 * 7;\nconsole.log(n);\n")
    cache = ArtefactCache(tmp_path / "cache")
    sources = [main, project / "src" / "env.d.ts"]
    built = build_typescript(config, sources, cache=cache)
    assert built.compiled and built.kind == "tsc" and built.path.name == "dist"
    assert not (project / "dist").exists(), "the build never writes into the source tree"
    out = subprocess.run([*node_command(), str(built.path / "main.js")], capture_output=True,
                         text=True, timeout=60, check=True)  # fmt: skip
    assert out.stdout == "42\n"
    again = build_typescript(config, sources, cache=cache)
    assert not again.compiled and again.path == built.path, "the same inputs come from the cache"

    main.write_text('const n: number = "forty-two";\nconsole.log(n);\n')
    with pytest.raises(BuildError) as err:
        build_typescript(config, sources, cache=cache)
    assert str(err.value).startswith("src/main.ts(1,7): error TS2322:"), str(err.value)
    assert str(tmp_path) not in str(err.value), "paths are shown relative to the project"
    log = "src/a.ts(1,1): error TS1: one\n  more\nwarning\nsrc/b.ts(2,2): error TS2: two\n"
    assert (
        trim_tsc_output(log)
        == "src/a.ts(1,1): error TS1: one\n  more\nsrc/b.ts(2,2): error TS2: two"
    )


@pytest.mark.skipif(not _has_node(), reason="needs the node capability (Node.js and tsc)")
def test_typescript_mutants_are_made_and_checked_by_tsc(tmp_path: Path) -> None:
    """.ts learner files get JavaScript's rules; a mutant that tsc rejects is not run."""
    from harness import mutants

    kata, ref = tmp_path / "kata", tmp_path / "ref"
    (kata / "cli" / "src").mkdir(parents=True)
    (ref / "cli" / "src").mkdir(parents=True)
    (kata / "cli" / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "strict": True, "types": [], "lib": ["ES2022"], "target": "ES2022"},
        "include": ["src/*.ts"]}))  # fmt: skip
    text = "export function f(a: number, b: number): number {\n  return a < b ? a : b;\n}\n"
    (ref / "cli" / "src" / "f.ts").write_text(text)
    made = mutants.candidates("cli/src/f.ts", text)
    assert any(m.replacement.strip() == "return a <= b ? a : b;" for m in made), made
    valid = mutants.Validity({"cli/src/f.ts": text}, [ref, kata])
    try:
        ok = next(m for m in made if m.replacement.strip() == "return a <= b ? a : b;")
        assert valid(ok), "a mutant tsc accepts is run"
        bad = mutants.Mutant(
            "cli/src/f.ts", 2, "  return a < b ? a : b;", '  return "a";', "x", 1, 1
        )
        assert not valid(bad), "a mutant that does not type-check (string for number) is not run"
    finally:
        valid.close()
