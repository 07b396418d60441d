"""harness.native.cargo: std-only Rust crates built by cargo into the artefact cache, loaded
with cffi; compile errors come back as rustc's first errors; a missing cargo says how to
install it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import toolchain
from harness.native.build import BuildError
from harness.native.cache import ArtefactCache
from harness.native.cargo import build_cargo_cdylib, trim_cargo_output
from harness.native.loader import load

CARGO_TOML = """\
[package]
name = "tiny"
version = "0.1.0"
edition = "2021"

[lib]
crate-type = ["cdylib"]
path = "src/lib.rs"
"""

LIB_RS = """\
mod helper;
#[no_mangle]
pub extern "C" fn tiny_add(a: u64, b: u64) -> u64 { helper::add(a, b) }
"""

HELPER_RS = "pub fn add(a: u64, b: u64) -> u64 { a + b }\n"

needs_cargo = pytest.mark.skipif(
    toolchain.find_tool("cargo") is None,
    reason="needs cargo (Rust): " + toolchain.install_advice("cargo"),
)


def _crate(tmp_path: Path, helper: str = HELPER_RS) -> tuple[Path, list[Path]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "Cargo.toml").write_text(CARGO_TOML)
    (tmp_path / "lib.rs").write_text(LIB_RS)
    (tmp_path / "helper.rs").write_text(helper)
    return tmp_path / "Cargo.toml", [tmp_path / "lib.rs", tmp_path / "helper.rs"]


@needs_cargo
def test_builds_loads_and_caches(tmp_path: Path) -> None:
    cache = ArtefactCache(tmp_path / "cache")
    toml, srcs = _crate(tmp_path / "src")
    first = build_cargo_cdylib(toml, srcs, cache=cache)
    assert first.compiled and first.path.name == "lib.so"
    lib = load("uint64_t tiny_add(uint64_t a, uint64_t b);", first)
    assert lib.tiny_add(2, 40) == 42
    again = build_cargo_cdylib(toml, srcs, cache=cache)
    assert not again.compiled and again.path == first.path, "a warm rerun runs no cargo"
    assert not (tmp_path / "src" / "target").exists(), "the learner's tree gets no target/"
    (tmp_path / "src" / "helper.rs").write_text(HELPER_RS.replace("a + b", "a * b"))
    changed = build_cargo_cdylib(toml, srcs, cache=cache)
    assert changed.compiled and changed.key != first.key


@needs_cargo
def test_compile_errors_are_rustc_messages(tmp_path: Path) -> None:
    toml, srcs = _crate(tmp_path / "src", helper="pub fn add(a: u64, b: u64) -> u64 { a + }\n")
    with pytest.raises(BuildError) as err:
        build_cargo_cdylib(toml, srcs, cache=ArtefactCache(tmp_path / "cache"))
    assert "error" in str(err.value) and "src/helper.rs" in str(err.value)


def test_trim_keeps_the_first_errors() -> None:
    log = "warning: unused\n  --> a\nerror[E0308]: mismatched\n  --> src/x.rs:1:1\n" + "".join(
        f"error: e{i}\n" for i in range(5)
    )
    trimmed = trim_cargo_output(log)
    assert trimmed.startswith("error[E0308]") and "e1" in trimmed and "e3" not in trimmed
    assert "warning" not in trimmed


def test_missing_cargo_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "no-cargo"))
    monkeypatch.delenv("KATA_TOOL_CARGO", raising=False)
    toolchain.clear_caches()
    try:
        toml, srcs = _crate(tmp_path / "src")
        with pytest.raises(toolchain.ToolNotFoundError, match="rustup"):
            build_cargo_cdylib(toml, srcs, cache=ArtefactCache(tmp_path / "cache"))
    finally:
        toolchain.clear_caches()
