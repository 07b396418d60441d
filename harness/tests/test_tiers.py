"""The tier probes: what they accept and the sentence they give for what is missing."""

from __future__ import annotations

import shutil

import pytest

from harness import tiers

FULL = "Name:\tpython\nCapEff:\t000001ffffffffff\n"
DOCKER_DEFAULT = "CapEff:\t00000000a80425fb\n"  # docker's default set: no SYS_ADMIN, no NET_ADMIN
NET_ONLY = "CapEff:\t0000000000001000\n"


def test_effective_capabilities_reads_the_mask() -> None:
    assert tiers.effective_capabilities(FULL) == 0x1FFFFFFFFFF
    assert tiers.effective_capabilities("Name:\tx\n") == 0


@pytest.mark.skipif(shutil.which("ip") is None, reason="iproute2 is not installed here")
def test_netns_needs_both_capabilities_not_only_root() -> None:
    assert tiers._probe_netns(True, FULL) is None
    docker = tiers._probe_netns(True, DOCKER_DEFAULT)
    assert docker is not None and "CAP_SYS_ADMIN and CAP_NET_ADMIN" in docker, docker
    net_only = tiers._probe_netns(True, NET_ONLY)
    assert net_only is not None and "CAP_SYS_ADMIN" in net_only, net_only
    assert "CAP_NET_ADMIN" not in net_only, net_only


def test_netns_without_root_says_so() -> None:
    why = tiers._probe_netns(False, FULL)
    assert why is not None and "root" in why, why
