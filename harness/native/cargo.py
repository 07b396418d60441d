"""Build a dependency-free Rust crate (a `cdylib` with a C ABI) into the artefact cache.

The crate is assembled from files, not built in place: the kata's `Cargo.toml` and the `.rs`
files (learner's or reference's, resolved through the kata's search path) are copied into a
fresh directory as `Cargo.toml` and `src/<name>.rs`, and `cargo build --release --offline` runs
there. So the learner's tree gets no `target/` or `Cargo.lock`, and the same cache key rules as
the C builds apply: Cargo.toml, every source and `cargo --version`/`rustc --version`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.native import includes
from harness.native.build import BuildError, BuildResult, default_cache
from harness.native.cache import ArtefactCache, hash_parts
from harness.native.diagnostics import relativise
from harness.toolchain import require_tool, tool_version_text

__all__ = ["build_cargo_cdylib", "trim_cargo_output"]

FORMAT_VERSION = "cargo-build-1"
_BUILD_TIMEOUT_S = 300
_KEEP_ERRORS = 3


def trim_cargo_output(log: str) -> str:
    """The first few `error` blocks of rustc's output (each with its source excerpt)."""
    blocks: list[list[str]] = []
    for line in log.splitlines():
        if line.startswith("error"):
            if len(blocks) == _KEEP_ERRORS or line.startswith("error: could not compile"):
                break
            blocks.append([line])
        elif blocks and not line.startswith("warning"):
            blocks[-1].append(line)
    return "\n".join("\n".join(b).rstrip() for b in blocks) or log.strip()[-4000:]


def _rustc_version(cargo: Path) -> str:
    rustc = cargo.parent / "rustc"
    exe = str(rustc) if rustc.exists() else "rustc"
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"rustc --version failed: {exc}"
    return out.stdout.strip()


def build_cargo_cdylib(
    cargo_toml: Path | str,
    sources: Sequence[Path | str],
    *,
    cache: ArtefactCache | None = None,
) -> BuildResult:
    """`cargo build --release --offline` of a crate made of `cargo_toml` and `sources`.

    Each source lands in `src/` under its own file name (`lib.rs`, `allocator.rs` ...); the
    Cargo.toml must say `crate-type = ["cdylib"]`. Returns the cached `lib.so`; raises
    BuildError with rustc's first errors (paths shown as `src/<name>.rs`), and
    ToolNotFoundError (with install advice) when cargo is missing.
    """
    cargo = require_tool("cargo")
    toml = Path(cargo_toml).resolve()
    srcs = [Path(s).resolve() for s in sources]
    if not srcs:
        raise ValueError("no Rust sources to build")
    names = [s.name for s in srcs]
    if len(set(names)) != len(names):
        raise ValueError(f"two sources share a file name: {names}")
    for s in [toml, *srcs]:
        if not s.is_file():
            raise FileNotFoundError(f"file not found: {s}")
    refused = includes.refusal(srcs)
    if refused:  # include!("/.../solutions/...") would compile the reference as the submission
        raise BuildError(refused, log=refused, command=())
    parts: list[bytes | str] = [FORMAT_VERSION, str(cargo), tool_version_text("cargo")]
    parts += [_rustc_version(cargo), "toml", toml.read_bytes()]
    for s in sorted(srcs, key=lambda p: p.name):
        parts += ["src", s.name, s.read_bytes()]
    key = hash_parts(parts)
    store = cache if cache is not None else default_cache()
    command = [str(cargo), "build", "--release", "--offline", "--quiet", "--color", "never"]

    def produce(tmp: Path) -> None:
        crate = tmp / "crate"
        (crate / "src").mkdir(parents=True)
        shutil.copyfile(toml, crate / "Cargo.toml")
        for s in srcs:
            shutil.copyfile(s, crate / "src" / s.name)
        env = {**os.environ, "CARGO_TARGET_DIR": str(tmp / "target"), "LC_ALL": "C"}
        env.pop("RUSTFLAGS", None)  # the same flags for the learner and the reference
        proc = subprocess.run(
            command,
            cwd=crate,
            capture_output=True,
            text=True,
            env=env,
            timeout=_BUILD_TIMEOUT_S,
            check=False,
        )
        log = relativise(proc.stdout + proc.stderr, crate).replace(str(tmp) + "/", "")
        built = sorted((tmp / "target" / "release").glob("lib*.so"))
        ok = proc.returncode == 0 and bool(built)
        if ok:
            shutil.copyfile(built[0], tmp / "lib.so")
        shutil.rmtree(tmp / "target", ignore_errors=True)  # the cache keeps only lib.so
        shutil.rmtree(crate, ignore_errors=True)
        meta = {"ok": ok, "returncode": proc.returncode, "command": command}
        (tmp / "build.log").write_text(log, encoding="utf-8")
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    entry = store.get_or_create(key, produce, label=f"cargo {' '.join(sorted(names))}")
    meta = json.loads((entry.path / "meta.json").read_text(encoding="utf-8"))
    log = (entry.path / "build.log").read_text(encoding="utf-8")
    if not meta["ok"]:
        message = trim_cargo_output(log) or f"cargo exited with {meta['returncode']}"
        raise BuildError(message, log=log, command=tuple(meta["command"]))
    return BuildResult(
        path=entry.path / "lib.so",
        key=key,
        compiled=entry.created,
        command=tuple(meta["command"]),
        warnings=log.strip(),
        kind="cargo",
    )
