"""Hidden tests of device-plugin: preferred allocations against an exhaustive search on other
nodes, health-aware Allocate, replicas in any order, a kubelet that restarts twice.

Random nodes are drawn from seeds hypothesis picks (hidden_settings), plus fixed nodes where greedy
growth fails; a GPU that failed before the plugin started.
"""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.testing import hidden_settings, raises

UNHEALTHY = "Unhealthy"


def _score(node: Any, ids: list[str]) -> int:
    # The grader's own scorer, from node.link alone (README.md, "Preferred allocation").
    table = {"PIX": 50, "NODE": 10, "SYS": 1}
    total = 0
    for a, b in itertools.combinations(ids, 2):
        link = node.link(a, b)
        total += 100 * int(link[2:]) if link.startswith("NV") else table[link]
    return total


def _best(node: Any, available: list[str], must: list[str], size: int) -> int:
    rest = [u for u in available if u not in must]
    return max(_score(node, must + list(c)) for c in itertools.combinations(rest, size - len(must)))


def _lowest_best(node: Any, available: list[str], must: list[str], size: int) -> list[int]:
    """The sorted minors of the best-scoring set that the lowest minor numbers win ties for."""
    rest = [u for u in available if u not in must]
    sets = [must + list(c) for c in itertools.combinations(rest, size - len(must))]
    top = max(_score(node, x) for x in sets)
    return min(sorted(node.gpu(u).minor for u in x) for x in sets if _score(node, x) == top)


def _random_node(nodes: Any, rng: random.Random) -> Any:
    n = rng.randrange(4, 11)
    numa = sorted(rng.randrange(2) for _ in range(n))
    switches = [i // rng.choice([1, 2, 3]) for i in range(n)]
    links: dict[tuple[int, int], int] = {}
    for _ in range(rng.randrange(1, n + 2)):
        a, b = rng.sample(range(n), 2)
        links[(min(a, b), max(a, b))] = rng.choice([1, 2, 4, 6, 12])
    return nodes.custom_node(numa, switches, links)


@pytest.mark.kata_gate("the preferred allocation scores below the best set of GPUs on some nodes")
@pytest.mark.parametrize("seed", range(6))
def test_preferred_is_optimal_on_other_nodes(seed: int, nodes: Any, make_rig: Any) -> None:
    rng = random.Random(seed)
    node = _random_node(nodes, rng)
    ep = make_rig(node).start()
    g = [x.uuid for x in node.gpus]
    for _ in range(12):
        available = sorted(rng.sample(g, rng.randrange(2, len(g) + 1)), key=g.index)
        size = rng.randrange(1, len(available) + 1)
        must = rng.sample(available, rng.randrange(0, min(size, 2) + 1))
        ids = ep.preferred(available, must, size)
        assert len(ids) == len(set(ids)) == size, f"asked for {size} distinct GPUs, got {ids}"
        assert set(must) <= set(ids) <= set(available), (available, must, ids)
        best = _best(node, available, must, size)
        assert _score(node, ids) == best, (
            f"{[node.gpu(u).minor for u in ids]} scores {_score(node, ids)}; the best set of "
            f"{size} from {[node.gpu(u).minor for u in available]} scores {best}"
        )


@pytest.mark.kata_gate(
    "Allocate accepts a device ID the plugin never advertised (a replica suffix on a GPU"
    " without replicas, a replica number past the count, a bare UUID when replicas are on)"
)
@pytest.mark.parametrize("replicas", [1, 4])
def test_allocate_refuses_ids_never_advertised(rig: Any, replicas: int) -> None:
    ep = rig.start(replicas=replicas) if replicas > 1 else rig.start()
    ep.wait_devices(lambda ds: len(ds) == 8 * replicas, what=f"{8 * replicas} devices")
    u = rig.node.gpus[1].uuid
    bad = [f"{u}::{replicas + 95}"] + ([f"{u}::0"] if replicas == 1 else [u])
    for dev in bad:
        try:
            ep.allocate([dev])
            refused = ""
        except AssertionError as e:  # the kubelet's sentence for an Allocate error
            refused = str(e)
        assert u in refused, (
            f"Allocate must refuse {dev!r}: ListAndWatch (replicas={replicas}) never advertised"
            f" it (it answered {refused or 'with an allocation'})"
        )


@pytest.mark.kata_gate("Allocate gives a container a GPU the plugin advertises as Unhealthy")
def test_allocate_refuses_an_unhealthy_gpu(rig: Any) -> None:
    ep = rig.start()
    ep.wait_devices(lambda ds: len(ds) == 8, what="8 devices")
    bad = rig.node.gpus[2].uuid
    rig.node.set_health(bad, False, xid=79)
    ep.wait_devices(lambda ds: any(d.health == UNHEALTHY for d in ds), what="an Unhealthy GPU")
    with raises(AssertionError, "Allocate must refuse a GPU advertised Unhealthy", match=bad):
        ep.allocate([rig.node.gpus[1].uuid, bad])
    rig.node.set_health(bad, True)
    ep.wait_devices(lambda ds: all(d.health != UNHEALTHY for d in ds), what="all Healthy")
    (c,) = ep.allocate([bad]).container_responses
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == bad, (
        f"Allocate of a recovered GPU: NVIDIA_VISIBLE_DEVICES={c.envs['NVIDIA_VISIBLE_DEVICES']}, not {bad}"
    )


def test_allocate_three_containers_and_no_shared_state(rig: Any) -> None:
    ep = rig.start()
    g = [x.uuid for x in rig.node.gpus]
    resp = ep.allocate([g[7]], [g[0], g[4]], [g[3]])
    got = [
        (r.envs["NVIDIA_VISIBLE_DEVICES"], sorted(d.host_path for d in r.devices)[-1])
        for r in resp.container_responses
    ]
    assert [e for e, _ in got] == [g[7], f"{g[0]},{g[4]}", g[3]], got
    assert sum("/dev/nvidia7" == d.host_path for d in resp.container_responses[2].devices) == 0, (
        "Allocate: the third container (GPU 3) must not get /dev/nvidia7 of the first"
    )


@pytest.mark.kata_gate("a GPU appears twice when a container's replicas of it are not adjacent")
def test_sharing_replicas_in_any_order_give_each_gpu_once(rig: Any) -> None:
    ep = rig.start(replicas=3)
    g = [x.uuid for x in rig.node.gpus]
    (c,) = ep.allocate([f"{g[4]}::2", f"{g[1]}::0", f"{g[4]}::0", f"{g[1]}::2"]).container_responses
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == f"{g[4]},{g[1]}", dict(c.envs)
    nodes = [d.host_path for d in c.devices]
    assert nodes.count("/dev/nvidia4") == 1 and nodes.count("/dev/nvidia1") == 1, nodes


@pytest.mark.kata_gate(
    "GetPreferredAllocation with replicas drops a must_include replica or does not spread over GPUs"
)
def test_sharing_preferred_with_must_include(rig: Any) -> None:
    ep = rig.start(replicas=3)
    g = [x.uuid for x in rig.node.gpus]
    available = [f"{g[i]}::{k}" for i in (0, 1, 2) for k in range(3)]
    ids = ep.preferred(available, [f"{g[1]}::2"], 3)
    assert ids[0] == f"{g[1]}::2" or f"{g[1]}::2" in ids, (
        f"GetPreferredAllocation with replicas: must_include {g[1]}::2 is missing from {ids}"
    )
    assert {i.split("::")[0] for i in ids} == {g[0], g[1], g[2]}, ids


@pytest.mark.kata_gate("the plugin registers again after one kubelet restart, not after the next")
def test_restart_twice(rig: Any) -> None:
    rig.start()
    for n in (1, 2):
        rig.kubelet.restart()
        ep = rig.kubelet.wait_registered("nvidia.com/gpu", timeout=5, after=n)
        ep.wait_devices(lambda ds: len(ds) == 8, what=f"8 devices after restart {n}")
    rig.node.set_health(rig.node.gpus[0].uuid, False)
    ep.wait_devices(lambda ds: ds[0].health == UNHEALTHY, what="GPU 0 Unhealthy after 2 restarts")


@pytest.mark.kata_gate(
    "the plugin registers more than once per kubelet restart (it must register once when a new "
    "kubelet.sock appears, then wait for the next one), restarts drawn at random"
)
def test_restart_registers_once_per_kubelet(rig: Any, kata_random: random.Random) -> None:
    """1 to 3 kubelet restarts: after each, one registration, and none more while that
    kubelet runs (half a second: ten of the reference's ticks)."""
    rig.start()
    restarts = kata_random.randrange(1, 4)
    for n in range(1, restarts + 1):
        rig.kubelet.restart()
        rig.kubelet.wait_registered("nvidia.com/gpu", timeout=5, after=n)
        time.sleep(0.5)
        got = len(rig.kubelet.registrations)
        assert got == n + 1, (
            f"after kubelet restart {n} of {restarts}: {got} registrations accepted in all, "
            f"expected {n + 1} (one at start, one per restart)"
        )


@pytest.mark.kata_gate("ListAndWatch does not end in a GPU's last health state after it flaps")
def test_health_flapping_ends_in_the_last_state(rig: Any) -> None:
    ep = rig.start()
    ep.wait_devices(lambda ds: len(ds) == 8, what="8 devices")
    u = rig.node.gpus[6].uuid
    for healthy in (False, True, False, True, False):
        rig.node.set_health(u, healthy, xid=94)
    ds = ep.wait_devices(lambda ds: ds[6].health == UNHEALTHY, what="GPU 6 Unhealthy")
    assert sum(d.health == UNHEALTHY for d in ds) == 1, (
        f"ListAndWatch after GPU 6 flapped: {sum(d.health == UNHEALTHY for d in ds)} Unhealthy devices, not 1"
    )


# --------------------------------------------------------------------------- preferred: where greedy fails
def _greedy_every_start(node: Any, available: list[str], must: list[str], size: int) -> int:
    """The heuristic the fixed cases below are chosen against: from every start GPU, add the GPU
    that raises the score most; the best score over the starts."""
    rest = [u for u in available if u not in must]
    best = 0
    for start in rest:
        chosen = [*must, start]
        pool = [u for u in rest if u != start]
        while len(chosen) < size:
            u = max(pool, key=lambda u: _score(node, [*chosen, u]))
            chosen.append(u)
            pool.remove(u)
        best = max(best, _score(node, chosen))
    return best


# (numa, pcie switches, NVLinks, available minors, must_include minors, size): nodes on which
# greedy growth from every start scores below the best set, found by a search over random nodes.
GREEDY_BREAKERS = [
    (
        [0, 0, 1, 1, 1],
        [0, 1, 2, 1, 2],
        {(0, 3): 2, (1, 3): 1, (0, 4): 12, (2, 3): 12, (0, 1): 6, (1, 2): 4},
        [0, 1, 2, 3, 4],
        [],
        4,
    ),
    (
        [0, 0, 0, 1, 1, 1],
        [0, 0, 1, 1, 4, 5],
        {(1, 2): 1, (3, 5): 4, (3, 4): 1, (2, 5): 12, (0, 4): 4},
        [0, 1, 2, 4, 5],
        [],
        4,
    ),
    (
        [0, 0, 0, 0, 0, 1, 1],
        [0, 0, 2, 3, 2, 2, 3],
        {(0, 6): 2, (2, 4): 4, (3, 4): 4, (0, 5): 6, (1, 6): 2, (1, 4): 6, (3, 6): 12, (0, 2): 12},
        [0, 1, 2, 3, 4, 5, 6],
        [],
        5,
    ),
    (
        [0, 0, 0, 0, 1, 1, 1],
        [0, 1, 1, 3, 4, 2, 6],
        {(5, 6): 2, (3, 5): 6, (1, 3): 1, (2, 5): 2, (3, 6): 4, (0, 6): 2, (1, 4): 12, (0, 2): 2},
        [0, 1, 2, 3, 4, 5, 6],
        [2],
        6,
    ),
]


@pytest.mark.kata_gate(
    "GetPreferredAllocation scores below the best set on nodes where greedy growth from every"
    " start GPU does (4 to 6 GPUs of 5 to 7)"
)
@pytest.mark.parametrize("case", range(len(GREEDY_BREAKERS)))
def test_preferred_optimal_where_greedy_fails(case: int, nodes: Any, make_rig: Any) -> None:
    numa, switches, links, avail, must_minors, size = GREEDY_BREAKERS[case]
    node = nodes.custom_node(numa, switches, links)
    g = [x.uuid for x in node.gpus]
    available, must = [g[i] for i in avail], [g[i] for i in must_minors]
    best = _best(node, available, must, size)
    heur = _greedy_every_start(node, available, must, size)
    assert heur < best, (
        f"test data: greedy scores {heur}, the best {best}: the case no longer separates them"
    )
    ep = make_rig(node).start()
    ids = ep.preferred(available, must, size)
    assert len(ids) == len(set(ids)) == size, (
        f"GetPreferredAllocation: asked for {size} distinct GPUs, got {ids}"
    )
    assert set(must) <= set(ids) <= set(available), (
        f"GetPreferredAllocation: {ids} is not within available {avail} with must_include"
        f" {must_minors}"
    )
    assert _score(node, ids) == best, (
        f"GetPreferredAllocation: minors {[node.gpu(u).minor for u in ids]} score"
        f" {_score(node, ids)}; the best set of {size} from minors {avail} with {must_minors}"
        f" scores {best}"
    )


@pytest.mark.kata_gate(
    "preferred() scores below the best set on random nodes of 4 to 8 GPUs drawn at this run"
)
def test_preferred_fresh_random_nodes_against_search(nodes: Any, dp: Any) -> None:
    # A seeded uniform draw (hypothesis picks the seed): greedy heuristics fail on about one
    # request in a hundred, so every example asks eight.
    @given(st.integers(0, 2**63 - 1))
    @hidden_settings(max_examples=40)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        n = rng.randrange(4, 9)
        numa = sorted(rng.randrange(2) for _ in range(n))
        switches = [i // rng.choice([1, 2, 3]) for i in range(n)]
        links: dict[tuple[int, int], int] = {}
        for _ in range(rng.randrange(1, 2 * n)):
            a, b = rng.sample(range(n), 2)
            links[(min(a, b), max(a, b))] = rng.choice([1, 2, 4, 6, 12])
        node = nodes.custom_node(numa, switches, links)
        g = [x.uuid for x in node.gpus]
        for _ in range(8):
            # in no particular order: the tie rule is by minor number, never by list order
            available = rng.sample(g, rng.randrange(2, n + 1))
            size = rng.randrange(1, len(available) + 1)
            must = rng.sample(available, rng.randrange(0, min(size, 2) + 1))
            ids = list(dp.preferred(node, available, must, size))
            where = (
                f"preferred() on numa={numa}, switches={switches}, nvlinks={links}, available"
                f" {[g.index(u) for u in available]}, must {[g.index(u) for u in must]},"
                f" size {size}"
            )
            assert len(ids) == len(set(ids)) == size, f"{where}: got {ids}, not {size} distinct"
            assert set(must) <= set(ids) <= set(available), f"{where}: got {ids}"
            best = _best(node, available, must, size)
            assert _score(node, ids) == best, (
                f"{where}: minors {[g.index(u) for u in ids]} score {_score(node, ids)}, the"
                f" best set {best}"
            )
            lowest = _lowest_best(node, available, must, size)
            got = sorted(node.gpu(u).minor for u in ids)
            assert got == lowest, (
                f"{where}: minors {got} tie with minors {lowest} at score {best}; ties go to the"
                " lowest minor numbers"
            )
            with raises(
                ValueError,
                f"preferred() must refuse {len(available) + 1} GPUs from {len(available)} available",
            ):
                dp.preferred(node, available, [], len(available) + 1)  # more than available
            if len(must) == 2:
                with raises(ValueError, "preferred() must refuse a size smaller than must_include"):
                    dp.preferred(node, available, must, 1)  # fewer than must_include

    run()


# --------------------------------------------------------------------------- health: before start
@pytest.mark.kata_gate(
    "a GPU that is unhealthy before the plugin starts is advertised Healthy or allocated"
)
@pytest.mark.parametrize(("bad_minors", "replicas"), [((3,), 1), ((0, 7), 1), ((5,), 2)])
def test_health_gpus_that_failed_before_start(
    bad_minors: tuple[int, ...], replicas: int, rig: Any
) -> None:
    bad = [rig.node.gpus[m].uuid for m in bad_minors]
    for u in bad:
        rig.node.set_health(u, False, xid=79)
    ep = rig.start(replicas=replicas)
    n = 8 * replicas
    ds = ep.wait_devices(lambda ds: len(ds) == n, what=f"{n} devices")
    sick = sorted(d.ID.split("::")[0] for d in ds if d.health == UNHEALTHY)
    want = sorted(u for u in bad for _ in range(replicas))
    assert sick == want, (
        f"ListAndWatch's first list: GPUs {list(bad_minors)} failed before start(); Unhealthy"
        f" devices are {sick}"
    )
    first = bad[0] if replicas == 1 else f"{bad[0]}::0"
    with raises(
        AssertionError, "Allocate must refuse a GPU that failed before start", match=bad[0]
    ):
        ep.allocate([first])
    rig.node.set_health(bad[0], True)
    ep.wait_devices(
        lambda ds: sum(d.health == UNHEALTHY for d in ds) == (len(bad) - 1) * replicas,
        what=f"GPU {bad_minors[0]} Healthy again after recovering",
    )
    (c,) = ep.allocate([first]).container_responses
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == bad[0], (
        f"Allocate of a recovered GPU: NVIDIA_VISIBLE_DEVICES={c.envs['NVIDIA_VISIBLE_DEVICES']}"
    )


def _greedy_then_swaps(node: Any, available: list[str], must: list[str], size: int) -> int:
    """The stronger heuristic the cases below are chosen against: greedy growth from every
    start GPU, then 1-swap hill climbing (swap one chosen GPU for one left out while the score
    rises); the best score over the starts."""
    rest = [u for u in available if u not in must]
    best = -1
    # one greedy run when must_include already fills the set
    for start in rest or [None]:
        chosen = list(must) + ([start] if start is not None and len(must) < size else [])
        pool = [u for u in rest if u not in chosen]
        while len(chosen) < size:
            u = max(pool, key=lambda u: _score(node, [*chosen, u]))
            chosen.append(u)
            pool.remove(u)
        improved = True
        while improved:
            improved = False
            for i in range(len(must), len(chosen)):
                for u in list(pool):
                    swapped = chosen[:i] + [u] + chosen[i + 1 :]
                    if _score(node, swapped) > _score(node, chosen):
                        pool.remove(u)
                        pool.append(chosen[i])
                        chosen = swapped
                        improved = True
        best = max(best, _score(node, chosen))
    return best


# (numa, switches, nvlinks, available minors, must_include minors, size) on which greedy growth
# from every start followed by 1-swap hill climbing ends below the best set: found by a
# search over random nodes of 5 to 8 GPUs (the climb sticks in a local optimum).
HILL_CLIMB_BREAKERS = [
    (
        [0, 0, 0, 0, 1, 1, 1],
        [0, 1, 0, 1, 4, 5, 6],
        {(0, 6): 12, (1, 5): 4, (2, 3): 1},
        [0, 1, 2, 3, 4, 5, 6],
        [],
        4,
    ),
    (
        [0, 1, 1, 1, 1, 1, 1, 1],
        [0, 0, 1, 1, 4, 1, 3, 3],
        {(3, 7): 2, (0, 1): 12, (2, 6): 1},
        [0, 1, 2, 3, 4, 5, 6, 7],
        [],
        4,
    ),
    (
        [0, 0, 0, 0, 0, 1, 1],
        [0, 1, 0, 3, 2, 2, 3],
        {(3, 6): 2, (1, 5): 12, (0, 5): 2, (4, 6): 12, (2, 5): 6},
        [0, 2, 3, 4, 5, 6],
        [],
        4,
    ),
    (
        [0, 0, 0, 0, 0, 1, 1, 1],
        [0, 1, 2, 3, 2, 2, 3, 3],
        {(3, 4): 1, (1, 4): 4, (0, 7): 4, (5, 6): 1},
        [0, 1, 2, 3, 4, 5, 6, 7],
        [],
        4,
    ),
    (
        [0, 0, 0, 0, 1, 1, 1, 1],
        [0, 1, 1, 3, 2, 1, 6, 7],
        {(4, 5): 6},
        [0, 1, 2, 3, 4, 5, 6, 7],
        [],
        4,
    ),
    (
        [0, 0, 0, 1, 1, 1, 1],
        [0, 0, 0, 1, 2, 2, 3],
        {(2, 6): 6, (2, 5): 4, (0, 6): 12, (1, 4): 12, (1, 5): 4, (1, 6): 2},
        [0, 1, 2, 3, 4, 5, 6],
        [],
        4,
    ),
]


@pytest.mark.kata_gate(
    "preferred() scores below the best set on nodes where greedy growth from every start GPU"
    " followed by 1-swap hill climbing does (4 GPUs of 6 to 8)"
)
def test_preferred_optimal_where_hill_climbing_fails(nodes: Any, dp: Any) -> None:
    for numa, switches, links, avail, must_minors, size in HILL_CLIMB_BREAKERS:
        node = nodes.custom_node(numa, switches, links)
        g = [x.uuid for x in node.gpus]
        available, must = [g[i] for i in avail], [g[i] for i in must_minors]
        best = _best(node, available, must, size)
        heur = _greedy_then_swaps(node, available, must, size)
        where = f"numa={numa}, switches={switches}, nvlinks={links}, available {avail}, size {size}"
        assert heur < best, (
            f"test data: hill climbing scores {heur} on {where}, the best {best}: the case no"
            " longer separates them"
        )
        ids = list(dp.preferred(node, available, must, size))
        assert len(ids) == len(set(ids)) == size and set(ids) <= set(available), (
            f"preferred() on {where}: got {ids}, not {size} distinct available GPUs"
        )
        assert _score(node, ids) == best, (
            f"preferred() on {where}: minors {[g.index(u) for u in ids]} score"
            f" {_score(node, ids)}, the best set {best}"
        )


# --------------------------------------------------------------------------- health: every event
def _record_lists(kata: Any, path: Any) -> tuple[list[list[Any]], Any, Any]:
    """A second ListAndWatch stream of the test's own: every list it receives, in order."""
    import threading

    import grpc

    api = kata.module("deviceplugin")
    channel = grpc.insecure_channel(f"unix://{path}")
    stream = api.pb2_grpc.DevicePluginStub(channel).ListAndWatch(api.pb2.Empty())
    lists: list[list[Any]] = []

    def pump() -> None:
        try:
            for resp in stream:
                lists.append(list(resp.devices))
        except grpc.RpcError:
            pass

    threading.Thread(target=pump, daemon=True).start()
    return lists, stream, channel


def _wait_for(cond: Any, timeout: float = 1.5) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(cond())


@pytest.mark.kata_gate(
    "ListAndWatch does not send one list per health event, in order, each with every device's"
    " health and NUMA node (random bursts of XIDs and recoveries on random nodes, back to back)"
)
def test_health_one_list_per_event_with_topology(
    kata: Any, nodes: Any, make_rig: Any, kata_random: random.Random
) -> None:
    rng = kata_random
    replicas = rng.choice([1, 2, 3])
    n = rng.randrange(3, 9)
    node = nodes.custom_node(
        [rng.randrange(2) for _ in range(n)], [rng.randrange(3) for _ in range(n)], {}
    )
    rig = make_rig(node)
    rig.start(replicas=replicas) if replicas > 1 else rig.start()
    lists, stream, channel = _record_lists(kata, rig.dir / "nvidia-gpu.sock")
    try:
        assert _wait_for(lambda: len(lists) >= 1), "ListAndWatch sent no first list within 1.5 s"
        state = {g.uuid: True for g in node.gpus}
        want = []
        for _ in range(rng.randrange(4, 11)):
            u = rng.choice(node.gpus).uuid  # each event flips its GPU: every one is a change
            state[u] = not state[u]
            node.set_health(u, state[u], xid=rng.choice([48, 79, 94, 95]))
            want.append(dict(state))
        assert _wait_for(lambda: len(lists) >= 1 + len(want)), (
            f"ListAndWatch after {len(want)} health events sent back to back: {len(lists) - 1}"
            " lists within 1.5 s; every event gets a list of its own"
        )
        for k, (got, health) in enumerate(zip(lists[1:], want, strict=False), start=1):
            seen = [(d.ID.split("::")[0], d.health, [x.ID for x in d.topology.nodes]) for d in got]
            expect = [
                (g.uuid, "Healthy" if health[g.uuid] else UNHEALTHY, [g.numa])
                for g in node.gpus
                for _ in range(replicas)
            ]
            assert seen == expect, (
                f"ListAndWatch's list {k} (after health event {k} of {len(want)}, replicas="
                f"{replicas}): (GPU, health, NUMA nodes) is {seen}; after that event it is"
                f" {expect}"
            )
    finally:
        stream.cancel()
        channel.close()


# --------------------------------------------------------------------------- restart: not ready
@pytest.mark.kata_gate(
    "the plugin does not register again after a kubelet restart when the new kubelet refuses its"
    " first Register calls (not ready yet)"
)
def test_restart_kubelet_refuses_the_first_registers(rig: Any, kata_random: random.Random) -> None:
    rig.start()
    refusals = kata_random.randrange(1, 4)
    accept = rig.kubelet._accept
    refused: list[str] = []

    def not_ready_at_first(r: Any) -> str:
        if len(refused) < refusals:
            refused.append(r.endpoint)
            return "the kubelet's device manager is not ready yet"
        return accept(r)

    rig.kubelet._accept = not_ready_at_first
    rig.kubelet.restart()
    ep = rig.kubelet.wait_registered("nvidia.com/gpu", timeout=2.0, after=1)
    assert len(refused) == refusals, (
        f"test data: the new kubelet refused {len(refused)} Register calls, not {refusals}"
    )
    ep.wait_devices(lambda ds: len(ds) == 8, what=f"8 devices after {refusals} refused Registers")


# --------------------------------------------------------------------------- sharing: spreading
def _distributed_model(available: list[str], size: int) -> list[str]:
    """The README's rule: each next replica from the GPU with the most available replicas left
    (ties: the GPU that comes first in `available`), its next replica in `available` order."""
    free: dict[str, list[str]] = {}
    for rid in available:
        free.setdefault(rid.split("::")[0], []).append(rid)
    chosen: list[str] = []
    while len(chosen) < size:
        most = max(len(v) for v in free.values())
        gpu = next(g for g, v in free.items() if len(v) == most)
        chosen.append(free[gpu].pop(0))
        if not free[gpu]:
            del free[gpu]
    return chosen


@pytest.mark.kata_gate(
    "distributed() does not take each next replica from the GPU with the most replicas left"
    " (random uneven sets of replicas in random order)"
)
def test_sharing_distributed_fresh_random_sets(dp: Any) -> None:
    @given(st.integers(0, 2**63 - 1))
    @hidden_settings(max_examples=60)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        gpus = [f"GPU-{i:04x}" for i in range(rng.randrange(2, 7))]
        r = rng.randrange(2, 6)
        available = [f"{g}::{k}" for g in gpus for k in range(r) if rng.random() < 0.7]
        if not available:
            return
        rng.shuffle(available)
        size = rng.randrange(1, len(available) + 1)
        want = _distributed_model(available, size)
        got = list(dp.distributed(list(available), [], size))
        assert sorted(got) == sorted(want), (
            f"distributed(available={available}, must_include=[], size={size}) = {got}; taking"
            f" each next replica from the GPU with the most left gives {want}"
        )

    run()
