"""Public tests of release-engineering, tasks "semver" (semver.py) and "compat" (compat.py).

The hidden tests check the same properties on versions, ranges, builds, nodes and fleets drawn
fresh each run, against oracles of their own (the spec's rules, CUDA's table and rules)."""

from __future__ import annotations

from typing import Any

import pytest

# The spec's own example (semver.org, item 11): each lower than the next.
SPEC_CHAIN = [
    "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
    "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0",
]  # fmt: skip


# --------------------------------------------------------------------------- semver
def test_semver_parse_the_parts(semver: Any, release: Any) -> None:
    V = release.Version
    assert semver.parse("1.2.3") == V(1, 2, 3)
    assert semver.parse("12.8.1-rc.1+build.7") == V(12, 8, 1, ("rc", "1"), ("build", "7"))
    assert semver.parse("1.0.0-x-y-z.--") == V(1, 0, 0, ("x-y-z", "--"))
    assert semver.parse("1.0.0+0001.007") == V(1, 0, 0, (), ("0001", "007")), (
        "build may lead with 0"
    )
    assert semver.parse("1.0.0-0A.is.legal") == V(1, 0, 0, ("0A", "is", "legal"))
    assert semver.parse("99999999999999999999.0.0").major == 99999999999999999999


NOT_VERSIONS = [
    "1.2", "1.2.3.4", "01.2.3", "1.02.3", "1.2.03", "v1.2.3", "1.2.3-", "1.2.3+", "1.2.3-01",
    "1.2.3-a..b", "1.2.3-a_b", " 1.2.3", "1.2.3 ", "1.2.3\n", "-1.2.3", "1.2.3-rc.1+", "",
]  # fmt: skip


def test_semver_refuses_what_is_not_a_version(semver: Any) -> None:
    for text in NOT_VERSIONS:
        with pytest.raises(ValueError):
            semver.parse(text)


def test_semver_precedence_spec_chain(semver: Any) -> None:
    for a, b in zip(SPEC_CHAIN, SPEC_CHAIN[1:], strict=False):
        assert semver.compare(a, b) == -1, f"{a} < {b}"
        assert semver.compare(b, a) == 1, f"{b} > {a}"
    assert semver.compare("1.0.0+build.1", "1.0.0+build.2") == 0, "build metadata is ignored"
    assert semver.compare("1.10.0", "1.9.0") == 1, "numbers, not strings"
    assert semver.compare("2.0.0", "11.0.0") == -1


def test_ranges_examples(semver: Any) -> None:
    assert semver.satisfies("12.4.1", ">=12.2,<13")
    assert not semver.satisfies("12.1.0", ">=12.2,<13")
    assert not semver.satisfies("13.0.0", ">=12.2,<13")
    assert not semver.satisfies("13.0.0-rc.1", ">=12.2,<13"), "no pre-release unless asked for"
    assert semver.satisfies("1.9.9", "^1.2.3") and not semver.satisfies("2.0.0", "^1.2.3")
    assert semver.satisfies("0.2.9", "^0.2.3") and not semver.satisfies("0.3.0", "^0.2.3")
    assert not semver.satisfies("0.0.4", "^0.0.3")
    assert semver.satisfies("1.2.4-beta.1", "^1.2.4-beta.0")
    assert not semver.satisfies("1.2.5-beta.1", "^1.2.4-beta.0")
    assert semver.satisfies("1.2.9", "~1.2.3") and not semver.satisfies("1.3.0", "~1.2.3")
    assert semver.satisfies("12.2.7", "<=12.2") and not semver.satisfies("12.2.7", ">12.2")
    with pytest.raises(ValueError):
        semver.satisfies("1.0.0", ">=1.0.0,,<2")
    versions = ["12.2.0", "12.10.0", "12.9.1", "13.0.0-rc.1", "12.9.1+cu.1"]
    assert semver.max_satisfying(versions, ">=12.2,<13") == "12.10.0"
    assert semver.max_satisfying(versions, "^14") is None


# --------------------------------------------------------------------------- compat
def test_compat_driver_versions(compat: Any) -> None:
    assert compat.driver_version("535.104.05") == (535, 104, 5)
    assert compat.driver_version("535.104.05") > compat.driver_version("535.54.03")
    assert compat.driver_version("570.26") < compat.driver_version("570.124.06")
    for bad in ["535", "535.x.1", "v535.54.03", "535.54.03.1", ""]:
        with pytest.raises(ValueError):
            compat.driver_version(bad)
    assert compat.min_driver("12.0.0") == "525.60.13"
    assert compat.min_driver("13.0.0") == "580.65.06"
    with pytest.raises(ValueError):
        compat.min_driver("12.7.0")  # there was no CUDA 12.7


def test_compat_kernels(compat: Any, release: Any) -> None:
    b = release.Build("svc", "12.8.1", cubins=("sm_80", "sm_90"), ptx=("compute_90",))
    assert compat.needs_jit(b, "sm_90") is False
    assert compat.needs_jit(b, "sm_86") is False  # sm_80 cubins run on sm_86
    assert compat.needs_jit(b, "sm_100") is True  # Blackwell: only the PTX
    assert compat.needs_jit(b, "sm_75") is None
    assert compat.needs_jit(release.Build("x", "12.8.1", cubins=("sm_90",)), "sm_100") is None


def test_compat_check(compat: Any, release: Any) -> None:
    r = release
    b = r.Build("svc", "12.8.1", cubins=("sm_80", "sm_90"), ptx=("compute_90",))
    h100 = lambda d: r.Node("n", d, "sm_90")  # noqa: E731
    assert compat.check(b, h100("570.124.06")) == r.Verdict(True, r.OK, "570.124.06")
    assert compat.check(b, h100("535.104.05")) == r.Verdict(True, r.OK_MINOR, "535.104.05")
    assert compat.check(b, h100("470.82.01")) == r.Verdict(False, r.DRIVER_TOO_OLD, "470.82.01")
    b200 = r.Node("b", "535.104.05", "sm_100")
    assert compat.check(b, b200) == r.Verdict(False, r.PTX_NEEDS_DRIVER, "535.104.05")
    uses_new = r.Build("svc", "12.8.1", cubins=("sm_90",), new_apis=True)
    assert compat.check(uses_new, h100("550.54.15")).reason == r.API_NEEDS_DRIVER
    ngc = r.Build("ngc", "13.0.1", cubins=("sm_90",), compat="580.82.07")
    assert compat.check(ngc, h100("535.104.05")) == r.Verdict(True, r.OK_FORWARD, "580.82.07")
    rtx = r.Node("ws", "535.104.05", "sm_89", datacenter=False)
    ngc89 = r.Build("ngc", "13.0.1", cubins=("sm_89",), compat="580.82.07")
    assert compat.check(ngc89, rtx) == r.Verdict(False, r.COMPAT_NOT_ON_THIS_GPU, "535.104.05")
    assert compat.check(ngc, h100("545.23.06")).reason == r.COMPAT_NOT_ON_THIS_DRIVER


def test_rollout_drivers_first(compat: Any, release: Any) -> None:
    r = release
    fleet = [
        r.Node("a", "535.104.05", "sm_90"),
        r.Node("b", "575.51.03", "sm_90"),
        r.Node("c", "560.35.05", "sm_75"),
    ]
    b = r.Build("svc", "12.9.0", cubins=("sm_90",))
    plan = compat.rollout(fleet, b, "570.124.06")
    S = r.Step
    assert plan.steps == [S("driver", "a"), S("driver", "c"), S("deploy", "a"), S("deploy", "b")]
    assert plan.blocked == {"c": r.NO_KERNEL_IMAGE}
