"""Native sources cannot include files from outside the kata: the reference, by any path."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.native import includes
from harness.native.build import BuildError, build_shared_library


@pytest.mark.parametrize(
    "name, text, why",
    [
        ("s.cpp", '#include "../../scheduler.cpp"\n', "out of its directory"),
        ("s.cpp", "#include </work/solutions/p/k/scheduler.h>\n", "an absolute path"),
        ("s.cpp", "  #  include R_HEADER\n", "a computed path"),
        ("s.cpp", "#include_next <scheduler.cpp>\n", "#include_next"),
        ("s.cpp", "#include <scheduler.cpp>\n", "another source file"),
        ("k.cu", '#import "../k.cu"\n', "#import"),
        ("a.rs", 'include!("/repo/solutions/phase05/k/allocator.rs");\n', "an absolute path"),
        ("a.rs", 'include!(concat!(env!("PWD"), "/x.rs"));\n', "a computed path"),
        ("a.rs", '#[path = "ref.rs"]\nmod r;\n', "a module from a path"),
    ],
)
def test_includes_out_of_the_kata_are_refused(tmp_path: Path, name: str, text: str, why: str):
    (tmp_path / name).write_text("// a submission\n" + text)
    found = includes.problems(tmp_path / name)
    assert len(found) == 1 and why in found[0], found
    assert found[0].startswith(f"{name}:2: `"), found


def test_headers_by_name_are_fine(tmp_path: Path) -> None:
    (tmp_path / "a.cpp").write_text(
        '#include "scheduler.h"\n#include <vector>\n# include <sys/mman.h>\n'
    )
    (tmp_path / "b.rs").write_text(
        'use std::io;\nmod api;\nconst S: &str = include_str!("t.txt");\n'
    )
    assert includes.refusal([tmp_path / "a.cpp", tmp_path / "b.rs"]) is None


def test_the_build_refuses_before_compiling(tmp_path: Path) -> None:
    (tmp_path / "ref.c").write_text("int answer(void) { return 42; }\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.c").write_text('#include "../ref.c"\n')
    with pytest.raises(BuildError, match=r"a.c:1: `#include \"../ref.c\"` includes a path out"):
        build_shared_library([tmp_path / "sub" / "a.c"])
