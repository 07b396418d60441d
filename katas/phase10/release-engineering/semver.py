"""Semantic Versioning 2.0.0 (https://semver.org): parse, order, and ranges (task `semver`)."""

from __future__ import annotations

from harness import todo

from .release import Version


def parse(text: str) -> Version:
    """The Version that `text` spells, exactly as the spec's grammar allows; ValueError naming
    the text for anything else."""
    todo("parse")


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as version `a` has lower, equal or higher precedence than `b`."""
    todo("compare")


def satisfies(version: str, spec: str) -> bool:
    """Whether `version` is in the range `spec` (comparators joined by ",", all must hold):
    >=, >, <=, <, = (or none) with a full or partial version, ^ (caret) and ~ (tilde). A
    pre-release version matches only if some comparator names a pre-release of the same
    major.minor.patch."""
    todo("satisfies")


def max_satisfying(versions: list[str], spec: str) -> str | None:
    """The version of highest precedence in `versions` that satisfies `spec` (the first one
    listed among equals), or None."""
    todo("max_satisfying")
