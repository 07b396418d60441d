"""Semantic Versioning 2.0.0 (https://semver.org): parse, order, and ranges (task `semver`)."""

from __future__ import annotations

import re

from .release import Version

# The spec's grammar in ASCII only (str's \d also matches "٣"): numeric identifiers without
# leading zeros, alphanumeric ones with at least one non-digit, build identifiers anything.
_NUM = r"0|[1-9][0-9]*"
_PRE_ID = rf"(?:{_NUM}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_VERSION = re.compile(
    rf"({_NUM})\.({_NUM})\.({_NUM})"
    rf"(?:-({_PRE_ID}(?:\.{_PRE_ID})*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)
_PARTIAL = re.compile(rf"({_NUM})(?:\.({_NUM}))?")
_OPS = (">=", "<=", ">", "<", "=", "^", "~")


def parse(text: str) -> Version:
    """The Version that `text` spells, exactly as the spec's grammar allows; ValueError naming
    the text for anything else."""
    if not isinstance(text, str):
        raise ValueError(f"not a version: {text!r}")
    m = _VERSION.fullmatch(text)  # fullmatch: "$" would accept a trailing newline
    if m is None:
        raise ValueError(f"not a semantic version: {text!r}")
    major, minor, patch, pre, build = m.groups()
    return Version(
        int(major),
        int(minor),
        int(patch),
        tuple(pre.split(".")) if pre else (),
        tuple(build.split(".")) if build else (),
    )


def _key(v: Version) -> tuple:
    """A sort key with the spec's precedence: a release sorts after its pre-releases; numeric
    identifiers compare as numbers and below alphanumeric ones; a shorter set of equal leading
    identifiers sorts first; build metadata is ignored."""
    if not v.prerelease:
        return (v.major, v.minor, v.patch, 1, ())
    ids = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in v.prerelease)
    return (v.major, v.minor, v.patch, 0, ids)


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as version `a` has lower, equal or higher precedence than `b`."""
    ka, kb = _key(parse(a)), _key(parse(b))
    return (ka > kb) - (ka < kb)


def _comparators(spec: str) -> list[tuple[str, Version, Version | None]]:
    """Each comparator as (op, low, high): high is the exclusive end of a partial version's
    span (None for a full version)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty range: {spec!r}")
    out = []
    for part in spec.split(","):
        part = part.strip()
        op = next((o for o in _OPS if part.startswith(o)), "=")
        body = part[len(op) :].strip() if part.startswith(op) else part
        m = _PARTIAL.fullmatch(body)
        if m is not None:
            nums = [int(g) for g in m.groups() if g is not None]
            low = Version(nums[0], nums[1] if len(nums) > 1 else 0, 0)
        else:
            try:
                low = parse(body)
            except ValueError:
                raise ValueError(f"not a range: {spec!r} ({part!r})") from None
            nums = [low.major, low.minor, low.patch]
        if op == "^":
            given = nums
            i = next((k for k, n in enumerate(given) if n), len(given) - 1)
            high = _bump(low, i)
            out += [(">=", low, None), ("<", high, None)]
        elif op == "~":
            high = _bump(low, 1 if len(nums) >= 2 else 0)
            out += [(">=", low, None), ("<", high, None)]
        elif len(nums) < 3:
            out.append((op, low, _bump(low, len(nums) - 1)))
        else:
            out.append((op, low, None))
    return out


def _bump(v: Version, i: int) -> Version:
    parts = [v.major, v.minor, v.patch]
    parts[i] += 1
    for k in range(i + 1, 3):
        parts[k] = 0
    return Version(*parts)


def _holds(op: str, v: tuple, low: tuple, high: tuple | None) -> bool:
    if high is None:
        return {
            ">=": v >= low, ">": v > low, "<=": v <= low, "<": v < low, "=": v == low,
        }[op]  # fmt: skip
    return {
        ">=": v >= low, ">": v >= high, "<=": v < high, "<": v < low, "=": low <= v < high,
    }[op]  # fmt: skip


def satisfies(version: str, spec: str) -> bool:
    """Whether `version` is in the range `spec` (comparators joined by ",", all must hold):
    >=, >, <=, <, = (or none) with a full or partial version, ^ (caret) and ~ (tilde). A
    pre-release version matches only if some comparator names a pre-release of the same
    major.minor.patch."""
    v = parse(version)
    comps = _comparators(spec)
    key = _key(v)
    for op, low, high in comps:
        if not _holds(op, key, _key(low), None if high is None else _key(high)):
            return False
    if v.prerelease:
        core = (v.major, v.minor, v.patch)
        return any(
            low.prerelease and (low.major, low.minor, low.patch) == core for _, low, _ in comps
        )
    return True


def max_satisfying(versions: list[str], spec: str) -> str | None:
    """The version of highest precedence in `versions` that satisfies `spec` (the first one
    listed among equals), or None."""
    best: str | None = None
    for text in versions:
        if satisfies(text, spec) and (best is None or compare(text, best) > 0):
            best = text
    return best
