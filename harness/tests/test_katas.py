"""Every kata in this repository holds its promises (`kata verify`, one kata per test so that
xdist spreads them): the manifest is valid, the reference passes every public and hidden test,
and the stubs are not started on every test they run (never passing, never failing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import seeds
from harness.manifest import discover
from harness.verify import ShortcutSample, verify

ROOT = Path(__file__).resolve().parents[2]
KATAS = discover(ROOT) if (ROOT / "katas").is_dir() else []


# The suite runs a fresh sample of each kata's regression shortcuts (over 500 of them at ~3 s of
# CPU each would be most of CI's 20 minutes on 2 cores); `kata verify` runs every one, and so does
# KATA_VERIFY_SHORTCUTS=all. Over successive runs every shortcut is drawn. 4, not 6, since phase 12
# and the tracks: 36 katas x 2 fewer pytest runs is ~3 minutes of CI on 2 cores.
SHORTCUTS_PER_KATA = 4


def _sample() -> ShortcutSample | None:
    """KATA_VERIFY_SHORTCUTS=N runs N of each kata's shortcuts (drawn fresh each run, named in
    the failure); "all", every one of them."""
    want = os.environ.get("KATA_VERIFY_SHORTCUTS", str(SHORTCUTS_PER_KATA))
    return None if want == "all" else ShortcutSample(int(want), seeds.fresh())


def test_the_repository_has_katas() -> None:
    assert KATAS, f"no katas found under {ROOT / 'katas'}"


# A kata's verify runs its reference, stubs and every shortcut (up to ~20 pytest runs, native
# builds): minutes on a loaded 2-core runner. The hang guard for it is wider than conftest's 300 s.
@pytest.mark.timeout(1200, method="thread")
@pytest.mark.parametrize("kata_dir", KATAS, ids=[str(k.relative_to(ROOT / "katas")) for k in KATAS])
def test_kata_verifies(kata_dir: Path) -> None:
    (verdict,) = verify([kata_dir], ROOT, shortcut_sample=_sample())
    assert verdict.ok, f"kata verify {verdict.path}:\n  " + "\n  ".join(
        verdict.problems + verdict.notes
    )
