"""Compile a small TypeScript program with `tsc` into the artefact cache, and run it with node.

Like the Rust builds (harness/native/cargo.py) the project is assembled from files, not built in
place: the kata's `tsconfig.json` (and `package.json`, which says how node loads the output) and
the `.ts` sources (the learner's or the reference's, resolved through the kata's search path)
are copied into a fresh directory as `tsconfig.json` and `src/<name>.ts`, and `tsc` (the
typescript npm package's, run by the node the `node` capability found) writes `dist/`. So the
learner's tree gets no `dist/` or `node_modules/`, and a build is cached under a key of every
input file and the node and typescript versions. A build is bounded in time (tsc's start is
about a second; 120 s is a hung one).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.native.build import BuildError, BuildResult, default_cache
from harness.native.cache import ArtefactCache, hash_parts
from harness.toolchain import require_tool, tool_version_text, typescript_version

__all__ = ["build_typescript", "node_command", "trim_tsc_output"]

FORMAT_VERSION = "tsc-build-1"
BUILD_TIMEOUT_S = 120
_KEEP_ERRORS = 5
_DIAGNOSTIC = re.compile(r"^\S.*\(\d+,\d+\): error TS\d+: |^error TS\d+: ")


def trim_tsc_output(log: str) -> str:
    """The first few diagnostics of `tsc --pretty false` (each with its continuation lines)."""
    blocks: list[list[str]] = []
    for line in log.splitlines():
        if _DIAGNOSTIC.match(line):
            if len(blocks) == _KEEP_ERRORS:
                break
            blocks.append([line])
        elif blocks and line.startswith(" "):
            blocks[-1].append(line)
    return "\n".join("\n".join(b).rstrip() for b in blocks) or log.strip()[-4000:]


def node_command() -> list[str]:
    """`node` as the `node` capability found it (raises ToolNotFoundError with advice), with
    --disable-wasm-trap-handler: fetch's HTTP parser is WebAssembly, whose memories V8 would
    reserve with ~10 GiB guard regions, refused under the sandbox's RLIMIT_AS (bounds checks
    instead cost nothing a CLI notices; Node.js >= 20.15, as the capability requires)."""
    return [str(require_tool("node")), "--disable-wasm-trap-handler"]


def _tsc_script() -> tuple[Path, str]:
    tsc = require_tool("tsc")
    version = typescript_version(tsc)
    if version is None:  # a tsc of another package would compile another language
        raise BuildError(
            f"{tsc} is not the typescript npm package's tsc",
            log=f"{tsc}: no typescript package.json beside it",
            command=(str(tsc),),
        )
    # Run its JavaScript with the node found, not the `#!/usr/bin/env node` of PATH.
    return Path(os.path.realpath(tsc)), version


def build_typescript(
    tsconfig: Path | str,
    sources: Sequence[Path | str],
    *,
    package_json: Path | str | None = None,
    cache: ArtefactCache | None = None,
) -> BuildResult:
    """`tsc -p tsconfig.json --outDir dist` of a project made of `tsconfig` and `sources`.

    Each source lands in `src/` under its own file name (`cli.ts`, `client.ts`, `env.d.ts`);
    the tsconfig should say `"rootDir": "src"` so `src/cli.ts` becomes `dist/cli.js`.
    Returns the cached `dist` directory (BuildResult.path); raises BuildError with tsc's first
    diagnostics (paths shown as `src/<name>.ts`), and ToolNotFoundError (with install advice)
    when node or tsc is missing.
    """
    node = node_command()
    script, ts_version = _tsc_script()
    config = Path(tsconfig).resolve()
    srcs = [Path(s).resolve() for s in sources]
    package = Path(package_json).resolve() if package_json is not None else None
    if not srcs:
        raise ValueError("no TypeScript sources to build")
    names = [s.name for s in srcs]
    if len(set(names)) != len(names):
        raise ValueError(f"two sources share a file name: {names}")
    for s in [config, *srcs, *([package] if package else [])]:
        if not s.is_file():
            raise FileNotFoundError(f"file not found: {s}")
    parts: list[bytes | str] = [FORMAT_VERSION, *node, tool_version_text("node")]
    parts += [str(script), ts_version, "tsconfig", config.read_bytes()]
    parts += ["package", package.read_bytes() if package else b""]
    for s in sorted(srcs, key=lambda p: p.name):
        parts += ["src", s.name, s.read_bytes()]
    key = hash_parts(parts)
    store = cache if cache is not None else default_cache()
    command = [*node, str(script), "-p", "tsconfig.json", "--outDir", "dist", "--pretty", "false"]

    def produce(tmp: Path) -> None:
        project = tmp / "project"
        (project / "src").mkdir(parents=True)
        shutil.copyfile(config, project / "tsconfig.json")
        if package is not None:
            shutil.copyfile(package, project / "package.json")
        for s in srcs:
            shutil.copyfile(s, project / "src" / s.name)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NODE_", "TS_"))}
        env["LC_ALL"] = "C"
        try:
            proc = subprocess.run(
                command, cwd=project, capture_output=True, text=True, env=env,
                timeout=BUILD_TIMEOUT_S, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as e:  # a busy machine, not the code: nothing cached
            raise BuildError(
                f"tsc did not finish within {BUILD_TIMEOUT_S} s", log=str(e), command=command
            ) from None
        returncode, log = proc.returncode, proc.stdout + proc.stderr
        log = log.replace(str(project) + "/", "")
        ok = returncode == 0 and (project / "dist").is_dir()
        if ok:
            shutil.copytree(project / "dist", tmp / "dist")
            if package is not None:  # "type": "module" or not: node reads it beside dist/
                shutil.copyfile(package, tmp / "package.json")
        shutil.rmtree(project, ignore_errors=True)
        meta = {"ok": ok, "returncode": returncode, "command": command}
        (tmp / "build.log").write_text(log, encoding="utf-8")
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    entry = store.get_or_create(key, produce, label=f"tsc {' '.join(sorted(names))}")
    meta = json.loads((entry.path / "meta.json").read_text(encoding="utf-8"))
    log = (entry.path / "build.log").read_text(encoding="utf-8")
    if not meta["ok"]:
        message = trim_tsc_output(log) or f"tsc exited with {meta['returncode']}"
        raise BuildError(message, log=log, command=tuple(meta["command"]))
    return BuildResult(
        path=entry.path / "dist",
        key=key,
        compiled=entry.created,
        command=tuple(meta["command"]),
        warnings=log.strip(),
        kind="tsc",
    )
