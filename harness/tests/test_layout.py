"""harness.layout: the tree's geography, the one place that maps katas/ to solutions/."""

from __future__ import annotations

from pathlib import Path

from harness import layout


def test_mirror_and_back(tmp_path: Path) -> None:
    kata = tmp_path / "katas" / "phase05" / "caching-allocator"
    mirror = tmp_path / "solutions" / "phase05" / "caching-allocator"
    assert layout.mirror_of(kata) == mirror
    assert layout.solution_dir(kata) is None, "no mirror on disk yet"
    (mirror / "tests").mkdir(parents=True)
    kata.mkdir(parents=True)
    assert layout.solution_dir(kata) == mirror
    assert layout.hidden_tests_dir(kata) == mirror / "tests"
    assert layout.shortcut_dir(kata, "naive") == mirror / "shortcuts" / "naive"
    hidden = mirror / "tests" / "test_hidden_caching_allocator.py"
    assert layout.kata_of_mirror_path(hidden) == kata / "tests" / hidden.name
    assert layout.in_mirror(hidden, kata) and not layout.in_mirror(kata / "x.py", kata)
    assert layout.mirror_of(tmp_path / "elsewhere" / "k") is None


def test_paths_relative_to_the_root_and_hidden_node_ids(tmp_path: Path) -> None:
    assert layout.rel(tmp_path / "katas" / "phase01", tmp_path) == "katas/phase01"
    assert layout.rel(Path("/outside/x"), tmp_path) == "/outside/x"
    assert layout.is_hidden_path("solutions/phase01/simt/tests/test_hidden_simt.py::test_a")
    assert not layout.is_hidden_path("katas/phase01/simt/tests/test_simt.py::test_a")


def test_results_dir_and_root(tmp_path: Path) -> None:
    assert layout.results_dir(tmp_path) == tmp_path / ".kata"
    assert layout.results_dir(tmp_path, "/r") == Path("/r")
    (tmp_path / "katas" / "phase01").mkdir(parents=True)
    assert layout.find_root(tmp_path / "katas" / "phase01") == tmp_path.resolve()
    assert layout.find_root(Path("/")) is None
