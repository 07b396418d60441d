"""Hidden tests of release-engineering, tasks "semver" and "compat": versions, ranges, builds,
nodes and fleets drawn from the run seed, against oracles written here from the spec's rules and
CUDA's (never the learner's or the reference's code)."""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest

from harness.testing import raises, random_for

# ------------------------------------------------------------------------- semver oracle
ALNUM = set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
DIGITS = set("0123456789")


def _numeric_ok(s: str) -> bool:
    return bool(s) and set(s) <= DIGITS and (s == "0" or s[0] != "0")


def oracle_parse(text: str) -> tuple | None:
    """(major, minor, patch, pre, build) by the spec's rules, read character by character; None
    for what is not a version."""
    core, plus, build = text.partition("+")
    if plus and (not build or any(not i or not set(i) <= ALNUM for i in build.split("."))):
        return None
    core, dash, pre = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3 or not all(_numeric_ok(p) for p in parts):
        return None
    ids = pre.split(".") if dash else []
    for i in ids:
        if not i or not set(i) <= ALNUM or (set(i) <= DIGITS and not _numeric_ok(i)):
            return None
    return (*(int(p) for p in parts), tuple(ids), tuple(build.split(".")) if plus else ())


def oracle_cmp(a: str, b: str) -> int:
    """The spec's item 11, step by step."""
    x, y = oracle_parse(a), oracle_parse(b)
    assert x is not None and y is not None, f"the test compares only versions: {a!r}, {b!r}"
    if x[:3] != y[:3]:
        return -1 if x[:3] < y[:3] else 1
    pa, pb = x[3], y[3]
    if not pa or not pb:
        return (len(pa) == 0) - (len(pb) == 0)  # the release is higher
    for i, j in zip(pa, pb, strict=False):
        if i == j:
            continue
        ni, nj = set(i) <= DIGITS, set(j) <= DIGITS
        if ni and nj:
            return -1 if int(i) < int(j) else 1
        if ni != nj:
            return -1 if ni else 1
        return -1 if i < j else 1
    return (len(pa) > len(pb)) - (len(pa) < len(pb))


PRE_POOL = [
    "alpha",
    "beta",
    "rc",
    "0",
    "1",
    "2",
    "9",
    "10",
    "11",
    "x-y",
    "-",
    "a1",
    "1a",
    "--",
    "RC",
    "Beta",
]
NUMS = [0, 1, 2, 9, 10, 11, 99, 100, 12, 13]


def random_version(r: random.Random, pre: float = 0.5, build: float = 0.3) -> str:
    text = ".".join(str(r.choice(NUMS)) for _ in range(3))
    if r.random() < pre:
        ids = [r.choice(PRE_POOL + [str(r.randint(0, 300))]) for _ in range(r.randint(1, 3))]
        text += "-" + ".".join(ids)
    if r.random() < build:
        text += "+" + ".".join(
            r.choice(["001", "build", "7", "sha-1f3", "x"]) for _ in range(r.randint(1, 2))
        )
    return text


def malformed(r: random.Random) -> str:
    """A valid version broken in one of the ways a regex without anchors or ASCII misses."""
    v = random_version(r, pre=0.6, build=0.3)
    core_end = len(v.split("-")[0].split("+")[0])
    how = r.randrange(12)
    if how == 0:
        return v + "\n"
    if how == 1:
        return "0" + v if not v.startswith("0.") else "00" + v[1:]
    if how == 2:
        i = r.choice([k for k in range(core_end) if v[k] in DIGITS])
        return v[:i] + "\u0663" + v[i + 1 :]  # ARABIC-INDIC DIGIT THREE: str.isdigit() says yes
    if how == 3:
        return (
            v[:core_end]
            + "-"
            + r.choice(["01", "a..b", "", "a.", ".a", "a_b", "é"])
            + v[core_end:].split("+")[0]
        )
    if how == 4:
        return v.split("+")[0] + "+" + r.choice(["", "a..b", "a+b", "ü", "."])
    if how == 5:
        return v.replace(".", "..", 1)
    if how == 6:
        return ".".join(v.split(".")[:2]) if "-" not in v and "+" not in v else "1.2"
    if how == 7:
        return v[:core_end] + ".4" + v[core_end:]
    if how == 8:
        return r.choice(["v", "=", " ", "V", "\t"]) + v
    if how == 9:
        return v + r.choice([" ", "\t", "\r\n", "-"]) if "+" in v or r.random() < 0.5 else v + "+"
    if how == 10:
        return v[:core_end] + "-" + r.choice(["00", "007", "01.alpha"])
    return r.choice(["", ".", "1", "1..2", "-1.2.3", "+1.2.3", "1.2.-3", "1.2.3-+", "\uff11.2.3"])


def test_semver_refuses_any_malformed(semver: Any) -> None:
    r = random_for()
    fixed = ["1.2.3\n", "1.2.3-\u0663", "\u0663.1.1", "1.2.3-01", "1.2.3+", "1.2.3-a..b",
             "01.1.1", "1.1.1-", "1.1.1+a+b", "1.2.3-rc.1\n", "１.2.3", "1.2.3-α"]  # fmt: skip
    cases = fixed + [malformed(r) for _ in range(300)]
    for text in cases:
        if oracle_parse(text) is not None:
            continue  # a break that happened to leave a valid version
        with raises(ValueError, f"semver.parse({text!r}) must refuse what is not a version"):
            semver.parse(text)


@pytest.mark.kata_gate(
    "semver.parse accepts a string that is not a semantic version (a trailing newline, a leading "
    "zero, a non-ASCII digit, an empty identifier)"
)
def test_semver_parse_gate_on_tricky_strings(semver: Any) -> None:
    for text in ["1.2.3\n", "\u0663.1.1", "1.2.3-01", "1.2.3-a..b", "01.1.1", "1.2.3-rc.1\n"]:
        try:
            got = semver.parse(text)
        except ValueError:
            continue
        raise AssertionError(
            f"semver.parse({text!r}) returned {got!r}: it is not a semantic version"
        )


def test_semver_parse_any_version(semver: Any, release: Any) -> None:
    r = random_for()
    for _ in range(300):
        text = random_version(r)
        want = oracle_parse(text)
        assert want is not None, f"the test drew a version: {text!r}"
        got = semver.parse(text)
        expect = release.Version(*want)
        assert got == expect, f"semver.parse({text!r}): expected {expect!r}, got {got!r}"


@pytest.mark.kata_gate(
    "semver.compare disagrees with the spec's precedence on random versions (numeric vs "
    "alphanumeric pre-release identifiers, a shorter identifier list, a release above its "
    "pre-releases, numbers as numbers)"
)
def test_semver_any_versions_in_order(semver: Any) -> None:
    r = random_for()
    for _ in range(400):
        a, b = random_version(r, pre=0.7), random_version(r, pre=0.7)
        if r.random() < 0.4:  # same core: the pre-release rules decide
            b = a.split("-")[0].split("+")[0] + b[len(b.split("-")[0].split("+")[0]) :]
        want = oracle_cmp(a, b)
        got = semver.compare(a, b)
        assert got == want, f"semver.compare({a!r}, {b!r}): expected {want}, got {got!r}"
    pool = [random_version(r, pre=0.7) for _ in range(40)]
    want = sorted(pool, key=functools.cmp_to_key(oracle_cmp))
    got = sorted(pool, key=functools.cmp_to_key(semver.compare))
    keys = [oracle_parse(v)[:4] for v in got]  # type: ignore[index]
    assert keys == [oracle_parse(v)[:4] for v in want], (  # type: ignore[index]
        f"sorting {pool} with semver.compare gave {got}, expected {want}"
    )


def test_semver_spec_chain_and_build(semver: Any) -> None:
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]  # fmt: skip
    r = random_for()
    for _ in range(60):
        i, j = sorted(r.sample(range(len(chain)), 2))
        got = semver.compare(chain[i], chain[j])
        assert got == -1, f"semver.compare({chain[i]!r}, {chain[j]!r}) should be -1, got {got!r}"
    for _ in range(60):
        v = random_version(r, build=0.0)
        a, b = v + "+" + str(r.randint(0, 9)), v + "+z" + str(r.randint(0, 9))
        got = semver.compare(a, b)
        assert got == 0, f"semver.compare({a!r}, {b!r}) should be 0 (build metadata), got {got!r}"
    for a, b, want in [("1.0.0-2", "1.0.0-10", -1), ("1.0.0-a", "1.0.0-1", 1),
                       ("1.0.0-alpha", "1.0.0-alpha.0", -1), ("2.0.0", "10.0.0", -1),
                       ("1.0.0-rc.1", "1.0.0", -1), ("1.0.0-B", "1.0.0-a", -1)]:  # fmt: skip
        got = semver.compare(a, b)
        assert got == want, f"semver.compare({a!r}, {b!r}): expected {want}, got {got!r}"


# ------------------------------------------------------------------------- range oracle
def _ver(t: tuple) -> str:
    s = ".".join(map(str, t[:3]))
    return s + ("-" + ".".join(t[3]) if len(t) > 3 and t[3] else "")


def oracle_satisfies(version: str, spec: str) -> bool:
    """Each comparator as an interval test on precedence, written out case by case."""
    v = oracle_parse(version)
    assert v is not None, f"the test asks only about versions: {version!r}"
    named_pre = False
    for comp in spec.split(","):
        comp = comp.strip()
        op = comp[:2] if comp[:2] in (">=", "<=") else (comp[0] if comp[0] in "<>=^~" else "")
        body = comp[len(op) :].strip()
        op = op or "="
        nums = body.split("-")[0].split(".")
        full = len(nums) == 3
        lo = tuple(int(n) for n in nums) + (0,) * (3 - len(nums))
        lo_text = body if full else _ver(lo)
        if full and "-" in body:
            named_pre = named_pre or tuple(oracle_parse(body)[:3]) == tuple(v[:3])  # type: ignore[index]

        def up(i: int, lo: tuple = lo) -> str:
            t = list(lo[:3])
            t[i] += 1
            return _ver(tuple(t[: i + 1] + [0] * (2 - i)))

        c = lambda other: oracle_cmp(version, other)  # noqa: E731
        if op == "^":
            given = [int(n) for n in nums]
            i = next((k for k, n in enumerate(given) if n != 0), len(given) - 1)
            ok = c(lo_text) >= 0 and c(up(i)) < 0
        elif op == "~":
            ok = c(lo_text) >= 0 and c(up(1 if len(nums) >= 2 else 0)) < 0
        elif full:
            ok = {">=": c(body) >= 0, ">": c(body) > 0, "<=": c(body) <= 0, "<": c(body) < 0,
                  "=": c(body) == 0}[op]  # fmt: skip
        else:
            hi = up(len(nums) - 1)
            ok = {">=": c(lo_text) >= 0, ">": c(hi) >= 0, "<=": c(hi) < 0, "<": c(lo_text) < 0,
                  "=": c(lo_text) >= 0 and c(hi) < 0}[op]  # fmt: skip
        if not ok:
            return False
    return not v[3] or named_pre


def random_comparator(r: random.Random, near: str) -> str:
    p = oracle_parse(near)
    assert p is not None, f"the test centres ranges on versions: {near!r}"
    nums = [
        p[0] + r.choice([-1, 0, 0, 0, 1]),
        p[1] + r.choice([-1, 0, 0, 1]),
        p[2] + r.choice([-1, 0, 1]),
    ]
    nums = [max(0, n) for n in nums]
    if r.random() < 0.3:
        nums[r.randrange(3)] = 0
    k = r.choice([1, 2, 3, 3, 3])
    body = ".".join(map(str, nums[:k]))
    if k == 3 and r.random() < 0.3:
        body += "-" + r.choice(["alpha", "beta.2", "rc.1", "0", "rc.10"])
    op = r.choice([">=", ">", "<=", "<", "=", "", "^", "^", "~"])
    return op + r.choice(["", " "]) * (op != "") + body


def random_range(r: random.Random) -> tuple[str, list[str]]:
    centre = random_version(r, pre=0.0, build=0.0)
    spec = ",".join(random_comparator(r, centre) for _ in range(r.randint(1, 3)))
    versions = [centre]
    for _ in range(12):
        p = oracle_parse(centre)
        assert p is not None, f"the test centres ranges on versions: {centre!r}"
        nums = [max(0, p[i] + r.choice([-1, 0, 0, 1, 2])) for i in range(3)]
        v = ".".join(map(str, nums))
        if r.random() < 0.35:
            v += "-" + r.choice(["alpha", "beta.2", "rc.1", "0", "rc.10", "beta.11"])
        versions.append(v)
    return spec.replace(",", r.choice([",", ", "])), versions


@pytest.mark.kata_gate(
    "semver.satisfies disagrees with the range's bounds on random ranges and versions (partial "
    "versions, carets, tildes, pre-releases)"
)
def test_ranges_any(semver: Any) -> None:
    r = random_for()
    for _ in range(250):
        spec, versions = random_range(r)
        for v in versions:
            want = oracle_satisfies(v, spec)
            got = semver.satisfies(v, spec)
            assert got is want, f"semver.satisfies({v!r}, {spec!r}): expected {want}, got {got!r}"


@pytest.mark.kata_gate(
    "semver.satisfies lets a pre-release into a range none of whose comparators names a "
    "pre-release of its major.minor.patch"
)
def test_ranges_keep_prereleases_out(semver: Any) -> None:
    r = random_for()
    for _ in range(40):
        major = r.randint(1, 20)
        spec = r.choice(
            [f">={major}.0,<{major + 1}", f"^{major}.0.0", f"<{major + 1}.0.0", f"<={major}"]
        )
        v = f"{major + 1}.0.0-{r.choice(['rc.1', 'alpha', 'beta.3'])}"
        got = semver.satisfies(v, spec)
        assert got is False, f"semver.satisfies({v!r}, {spec!r}) should be False, got {got!r}"
        inside = f"{major}.{r.randint(1, 5)}.0-rc.1"
        got = semver.satisfies(inside, spec)
        assert got is False, f"semver.satisfies({inside!r}, {spec!r}) should be False, got {got!r}"
        named = f">={major}.3.0-rc.0,<{major + 1}"
        got = semver.satisfies(f"{major}.3.0-rc.2", named)
        assert got is True, (
            f"semver.satisfies({major}.3.0-rc.2, {named!r}) should be True, got {got!r}"
        )


@pytest.mark.kata_gate(
    "semver.max_satisfying does not return the matching version of highest precedence on random "
    "lists (numbers as numbers, releases above their pre-releases)"
)
def test_ranges_max_satisfying_any(semver: Any) -> None:
    r = random_for()
    cases = [(["12.9.1", "12.10.0", "12.10.0-rc.1", "13.0.0-rc.1"], ">=12.2,<13"),
             (["2.0.0-rc.2", "2.0.0-rc.10", "1.9.0"], ">=2.0.0-rc.1"),
             (["0.9.0", "0.10.0", "0.10.1"], "^0.9 , >=0.1")]  # fmt: skip
    for _ in range(80):
        spec, versions = random_range(r)
        r.shuffle(versions)
        cases.append((versions, spec))
    for versions, spec in cases:
        ok = [v for v in versions if oracle_satisfies(v, spec)]
        got = semver.max_satisfying(versions, spec)
        if not ok:
            assert got is None, (
                f"semver.max_satisfying({versions}, {spec!r}): expected None, got {got!r}"
            )
            continue
        best = max(ok, key=functools.cmp_to_key(oracle_cmp))
        assert got is not None and oracle_cmp(got, best) == 0 and got in ok, (
            f"semver.max_satisfying({versions}, {spec!r}): expected {best!r}, got {got!r}"
        )


@pytest.mark.kata_gate(
    "semver.compare does not compare numbers as exact integers (major, minor, patch or a "
    "numeric pre-release identifier above 2**53, where floats round)"
)
def test_semver_big_numbers_exact(semver: Any) -> None:
    r = random_for()
    for _ in range(12):
        big = r.randint(2**53, 2**70)
        parts = [str(r.randint(0, 9)) for _ in range(3)]
        where = r.randrange(4)
        lo, hi = list(parts), list(parts)
        if where < 3:
            lo[where], hi[where] = str(big), str(big + 1)
            a, b = ".".join(lo), ".".join(hi)
        else:
            a, b = ".".join(parts) + f"-rc.{big}", ".".join(parts) + f"-rc.{big + 1}"
        assert semver.compare(a, b) == -1, (
            f"semver.compare({a!r}, {b!r}): expected -1 (numbers as numbers, exactly)"
        )
        assert semver.compare(b, a) == 1, (
            f"semver.compare({b!r}, {a!r}): expected 1 (numbers as numbers, exactly)"
        )


@pytest.mark.kata_gate(
    "semver.parse accepts an identifier with a character outside ASCII [0-9A-Za-z-] (a "
    "non-ASCII letter or digit, an underscore)"
)
def test_semver_refuses_non_ascii_identifiers(semver: Any) -> None:
    r = random_for()
    bad = ["ü", "é", "ß", "_", "İ", "ａ", "٣", "ⅷ", "µ"]
    for _ in range(12):
        ch = r.choice(bad)
        word = "".join(r.choice("abcXYZ019-") for _ in range(r.randint(0, 3)))
        ident = word[: r.randint(0, len(word))] + ch + word
        core = f"{r.randint(0, 20)}.{r.randint(0, 20)}.{r.randint(0, 20)}"
        text = r.choice(
            [f"{core}-{ident}", f"{core}+{ident}", f"{core}-rc.1+{ident}", f"{core}-{ident}.1"]
        )
        with raises(
            ValueError, f"semver.parse({text!r}) must refuse a non-ASCII or '_' identifier"
        ):
            semver.parse(text)


@pytest.mark.kata_gate(
    "semver.satisfies reads a caret on a zero partial version wrong: ^0 is [0.0.0, 1.0.0), "
    "^0.0 is [0.0.0, 0.1.0), ^0.0.P is [0.0.P, 0.0.P+1)"
)
def test_ranges_caret_on_zero(semver: Any) -> None:
    r = random_for()
    for _ in range(10):
        mi, pa = r.randint(1, 30), r.randint(1, 30)
        cases = [
            (f"0.0.{pa}", "^0.0", True), (f"0.{mi}.{pa}", "^0.0", False),
            (f"0.{mi}.{pa}", "^0", True), (f"1.0.{pa}", "^0", False),
            (f"0.0.{pa}", f"^0.0.{pa}", True), (f"0.0.{pa + 1}", f"^0.0.{pa}", False),
            (f"0.{mi}.{pa}", f"^0.{mi}", True), (f"0.{mi + 1}.0", f"^0.{mi}", False),
        ]  # fmt: skip
        for version, spec, want in cases:
            got = semver.satisfies(version, spec)
            assert got is want, (
                f"semver.satisfies({version!r}, {spec!r}): expected {want}, got {got!r}"
            )


@pytest.mark.kata_gate(
    "semver.max_satisfying does not return the first listed of versions of equal precedence "
    "(they differ only in build metadata)"
)
def test_ranges_max_satisfying_first_of_equals(semver: Any) -> None:
    r = random_for()
    for _ in range(10):
        core = f"{r.randint(0, 9)}.{r.randint(0, 20)}.{r.randint(0, 20)}"
        builds = r.sample(["a", "b.1", "cu.12", "sha-1f3", "001", "x-y"], 3)
        same = [f"{core}+{b}" for b in builds]
        lower = f"{core}-rc.1"
        versions = [lower, *same]
        r.shuffle(versions)
        want = next(v for v in versions if v != lower)
        got = semver.max_satisfying(versions, f">={core}")
        assert got == want, (
            f"semver.max_satisfying({versions!r}, '>={core}'): expected {want!r} (the first "
            f"listed among equals), got {got!r}"
        )


@pytest.mark.kata_gate(
    "semver.satisfies reads a range it cannot read as another one instead of refusing it (a "
    "hyphen range, four parts, a leading zero, x wildcards)"
)
def test_ranges_refuse_bad_specs(semver: Any) -> None:
    for spec in [
        "",
        ">=",
        ">=1.0.0,",
        "=>1.0.0",
        "1.0.0 - 2.0.0",
        ">=01.2",
        ">=1.2.3.4",
        "^v1",
        "~>1.2",
        "1.x",
    ]:
        with raises(
            ValueError, f"semver.satisfies('1.0.0', {spec!r}) must refuse a range it cannot read"
        ):
            semver.satisfies("1.0.0", spec)


# ------------------------------------------------------------------------- compat oracle
def dv(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def arch_num(text: str) -> int:
    return int(text.split("_")[1])  # sm_90 -> 90, sm_100 -> 100: major * 10 + minor


def oracle_check(release: Any, build: Any, node: Any) -> tuple[bool, str, str]:
    """CUDA's rules as the README states them, restated."""
    gpu = arch_num(node.arch)
    cubin = any(arch_num(c) // 10 == gpu // 10 and arch_num(c) <= gpu for c in build.cubins)
    ptx = any(arch_num(p) <= gpu for p in build.ptx)
    if not cubin and not ptx:
        return False, release.NO_KERNEL_IMAGE, node.driver
    reached, refused = node.driver, None
    if build.compat and dv(build.compat) > dv(node.driver):
        if not node.datacenter:
            refused = release.COMPAT_NOT_ON_THIS_GPU
        elif dv(node.driver)[0] not in release.FORWARD_COMPAT_BRANCHES:
            refused = release.COMPAT_NOT_ON_THIS_DRIVER
        else:
            reached = build.compat
    need = dv(release.TOOLKIT_MIN_DRIVER[build.runtime])
    floor = dv(release.MINOR_VERSION_FLOOR[int(build.runtime.split(".")[0])])
    if dv(reached) >= need:
        return True, (release.OK if reached == node.driver else release.OK_FORWARD), reached
    if dv(reached) < floor:
        return False, refused or release.DRIVER_TOO_OLD, reached
    if not cubin:
        return False, refused or release.PTX_NEEDS_DRIVER, reached
    if build.new_apis:
        return False, refused or release.API_NEEDS_DRIVER, reached
    return True, release.OK_MINOR, reached


DRIVERS = ["450.80.02", "470.82.01", "470.256.02", "525.60.13", "525.147.05", "535.54.03",
           "535.104.05", "535.261.03", "545.23.06", "550.54.14", "550.54.15", "550.163.01",
           "560.35.05", "570.26", "570.124.06", "570.195.03", "575.51.03", "575.57.08",
           "580.65.06", "580.82.07", "580.95.05", "590.44.01"]  # fmt: skip
ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120"]


def random_driver(r: random.Random) -> str:
    if r.random() < 0.7:
        return r.choice(DRIVERS)
    branch = r.choice([450, 470, 525, 535, 545, 550, 560, 570, 575, 580, 590])
    return f"{branch}.{r.randint(2, 300)}" + (
        f".{r.randint(1, 20):02d}" if r.random() < 0.8 else ""
    )


def random_build(r: random.Random, release: Any) -> Any:
    runtime = r.choice(sorted(release.TOOLKIT_MIN_DRIVER))
    cubins = tuple(r.sample(ARCHS, r.randint(0, 3)))
    ptx = tuple(a.replace("sm_", "compute_") for a in r.sample(ARCHS, r.randint(0, 2)))
    compat = r.choice([None, None, r.choice(DRIVERS[8:])])
    return release.Build(f"b{r.randint(0, 999)}", runtime, cubins, ptx, r.random() < 0.3, compat)


def random_node(r: random.Random, release: Any) -> Any:
    return release.Node(
        f"n{r.randint(0, 9999)}", random_driver(r), r.choice(ARCHS), r.random() < 0.75
    )


@pytest.mark.kata_gate(
    "compat.check gives another verdict than CUDA's rules for random builds on random nodes"
)
def test_compat_any_build_on_any_node(compat: Any, release: Any) -> None:
    r = random_for()
    for _ in range(600):
        build, node = random_build(r, release), random_node(r, release)
        want = release.Verdict(*oracle_check(release, build, node))
        got = compat.check(build, node)
        assert got == want, f"compat.check({build}, {node}): expected {want}, got {got}"


@pytest.mark.kata_gate(
    "compat.check gives another verdict than CUDA's rules on fixed builds and nodes: driver versions "
    "and architectures compared as numbers (535.104.05 after 535.54.03, 570.124.06 after 570.26, "
    "sm_100 after sm_90), a build with new APIs on an older driver of its major, minor-version "
    "compatibility of CUDA 11 and 13"
)
def test_compat_versions_are_numbers(compat: Any, release: Any) -> None:
    R = release
    num = "driver versions compared as numbers"
    arch = "architectures compared as numbers, a cubin only within its major"
    cases = [
        (R.Build("a", "12.2.2", ("sm_90",)), R.Node("n", "535.104.05", "sm_90"), (True, R.OK), num),
        (R.Build("a", "12.2.0", ("sm_90",)), R.Node("n", "535.104.05", "sm_90"), (True, R.OK), num),
        (R.Build("a", "12.8.1", ("sm_90",)), R.Node("n", "570.26", "sm_90"), (True, R.OK_MINOR), num),
        (R.Build("a", "12.8.1", ("sm_90",), new_apis=True), R.Node("n", "570.26", "sm_90"),
         (False, R.API_NEEDS_DRIVER), "new APIs need the toolkit's driver"),
        (R.Build("a", "12.8.0", (), ("compute_90",)), R.Node("n", "580.65.06", "sm_100"), (True, R.OK), arch),
        (R.Build("a", "12.8.0", ("sm_100",)), R.Node("n", "580.65.06", "sm_90"),
         (False, R.NO_KERNEL_IMAGE), arch),
        (R.Build("a", "12.8.0", (), ("compute_100",)), R.Node("n", "580.65.06", "sm_90"),
         (False, R.NO_KERNEL_IMAGE), arch),
        (R.Build("a", "12.8.0", ("sm_90",)), R.Node("n", "580.65.06", "sm_100"),
         (False, R.NO_KERNEL_IMAGE), arch),
        (R.Build("a", "11.8.0", ("sm_80",)), R.Node("n", "450.80.02", "sm_86"), (True, R.OK_MINOR),
         "minor-version compatibility of CUDA 11"),
        (R.Build("a", "13.0.1", ("sm_90",)), R.Node("n", "575.57.08", "sm_90"),
         (False, R.DRIVER_TOO_OLD), "CUDA 13's floor"),
        (R.Build("a", "13.0.1", ("sm_90",)), R.Node("n", "580.65.06", "sm_90"), (True, R.OK_MINOR),
         "minor-version compatibility of CUDA 13"),
        (R.Build("a", "13.0.0", ("sm_90",)), R.Node("n", "580.100.1", "sm_90"), (True, R.OK), num),
    ]  # fmt: skip
    for build, node, want, rule in cases:
        got = compat.check(build, node)
        assert (got.runs, got.reason) == want, (
            f"compat.check({build}, {node}) ({rule}): expected {want}, got {got}"
        )


def test_compat_forward_compatibility(compat: Any, release: Any) -> None:
    R = release
    r = random_for()
    for _ in range(60):
        kmd = r.choice(["470.256.02", "535.261.03", "550.163.01", "470.82.01"])
        # below the major's floor, so that only the package can make it run
        runtime = r.choice(["13.0.0", "13.0.1"] + (["12.9.0", "12.8.1"] if kmd < "5" else []))
        pkg = R.TOOLKIT_MIN_DRIVER[runtime]
        arch = r.choice(["sm_80", "sm_90"])
        build = R.Build("ngc", runtime, (arch,), compat=pkg)
        dc = R.Node("dc", kmd, arch, True)
        got = compat.check(build, dc)
        want = R.Verdict(True, R.OK_FORWARD, pkg)
        assert got == want, f"compat.check({build}, {dc}): expected {want}, got {got}"
        ws = R.Node("ws", kmd, arch, False)
        got = compat.check(build, ws)
        want = R.Verdict(False, R.COMPAT_NOT_ON_THIS_GPU, kmd)
        assert got == want, f"compat.check({build}, {ws}): expected {want}, got {got}"
        odd = R.Node("odd", r.choice(["545.23.06", "560.35.05", "525.147.05"]), arch, True)
        build13 = R.Build("ngc", "13.0.1", (arch,), compat="580.82.07")  # 12.x would run (minor)
        got = compat.check(build13, odd)
        assert got.reason == R.COMPAT_NOT_ON_THIS_DRIVER, (
            f"compat.check({build13}, {odd}): expected {R.COMPAT_NOT_ON_THIS_DRIVER}, got {got}"
        )
        newer = R.Node("new", "590.44.01", arch, r.random() < 0.5)
        got = compat.check(build, newer)
        want = R.Verdict(True, R.OK, "590.44.01")
        assert got == want, (
            f"compat.check({build}, {newer}): the package is older, expected {want}, got {got}"
        )


@pytest.mark.kata_gate(
    "compat.driver_version, min_driver or needs_jit accepts a string that is not a driver "
    "version, a toolkit of the table or a GPU architecture"
)
def test_compat_refuses_bad_input(compat: Any, release: Any) -> None:
    for bad in ["535", "535..1", "535.54.03.7", "r535", " 535.54.03", "535.54.03\n", "٥35.54.03"]:
        with raises(
            ValueError, f"compat.driver_version({bad!r}) must refuse what is not a driver version"
        ):
            compat.driver_version(bad)
    for bad in ["12.7.0", "12.8", "12.10.0", "14.0.0"]:
        with raises(
            ValueError, f"compat.min_driver({bad!r}) must refuse a toolkit CUDA never shipped"
        ):
            compat.min_driver(bad)
    good = release.Build("b", "12.8.1", ("sm_90",), ("compute_90",))
    for build, arch in [(good, "sm90"), (good, "sm_9"), (good, "gfx90a"), (good, "compute_90"),
                        (good, "sm_90 "), (release.Build("b", "12.8.1", ("sm_9x",)), "sm_90"),
                        (release.Build("b", "12.8.1", (), ("sm_80",)), "sm_90")]:  # fmt: skip
        with raises(
            ValueError,
            f"compat.needs_jit({build}, {arch!r}) must refuse what is not an architecture",
        ):
            compat.needs_jit(build, arch)
    r = random_for()
    for runtime, driver in r.sample(sorted(release.TOOLKIT_MIN_DRIVER.items()), 6):
        got = compat.min_driver(runtime)
        assert got == driver, f"compat.min_driver({runtime!r}): expected {driver!r}, got {got!r}"


def oracle_rollout(release: Any, fleet: list, build: Any, target: str) -> tuple[list, dict]:
    steps, blocked, after = [], {}, []
    for n in fleet:
        if dv(n.driver) < dv(target):
            steps.append(release.Step("driver", n.name))
            n = release.Node(n.name, target, n.arch, n.datacenter)
        after.append(n)
    for n in after:
        runs, why, _ = oracle_check(release, build, n)
        if runs:
            steps.append(release.Step("deploy", n.name))
        else:
            blocked[n.name] = why
    return steps, blocked


@pytest.mark.kata_gate(
    "compat.rollout's steps differ from every driver upgrade first, then a deploy wherever the "
    "build runs on the upgraded node, on a random fleet"
)
def test_rollout_any_fleet(compat: Any, release: Any) -> None:
    r = random_for()
    for _ in range(80):
        fleet = [release.Node(f"gpu-{i:02d}", random_driver(r), r.choice(ARCHS), r.random() < 0.8)
                 for i in r.sample(range(60), r.randint(1, 12))]  # fmt: skip
        build = random_build(r, release)
        target = random_driver(r)
        steps, blocked = oracle_rollout(release, fleet, build, target)
        got = compat.rollout(fleet, build, target)
        assert got.steps == steps and got.blocked == blocked, (
            f"compat.rollout({fleet}, {build}, {target!r}): expected steps {steps} and blocked "
            f"{blocked}, got {got.steps} and {got.blocked}"
        )
