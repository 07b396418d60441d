"""Public tests of device-plugin: your plugin against a kubelet stand-in, over real gRPC.

Each test gets a fresh device-plugin directory, a simulated 8-GPU node and a kubelet serving
kubelet.sock there; `rig.start()` starts your plugin and returns the kubelet's connection to
it (`ep`): ep.allocate(...), ep.preferred(...), ep.wait_devices(...). Every call has a deadline.
"""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest

HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"


def uuids(rig: Any, *minors: int) -> list[str]:
    return [rig.node.gpus[m].uuid for m in minors]


def health(devices: list[Any]) -> dict[str, str]:
    return {d.ID: d.health for d in devices}


# --------------------------------------------------------------------------- serve
def test_serve_registers_with_the_kubelet(rig: Any) -> None:
    ep = rig.start()
    r = ep.request
    assert r.version == "v1beta1", f"RegisterRequest.version is {r.version!r}"
    assert r.endpoint == "nvidia-gpu.sock", (
        f"RegisterRequest.endpoint is {r.endpoint!r}: the socket's file name, relative to the "
        "device-plugin directory"
    )
    assert r.options.get_preferred_allocation_available, (
        "register with options.get_preferred_allocation_available = True (you implement it)"
    )
    assert ep.options.get_preferred_allocation_available and not ep.options.pre_start_required, (
        f"GetDevicePluginOptions answered {ep.options}: it must agree with the registration"
    )
    assert not rig.kubelet.refused, rig.kubelet.refused


def test_serve_another_resource_and_endpoint(rig: Any) -> None:
    ep = rig.start("example.com/kgpu", endpoint="kgpu.sock")
    assert (ep.request.resource_name, ep.request.endpoint) == ("example.com/kgpu", "kgpu.sock")
    assert (rig.dir / "kgpu.sock").is_socket()


def test_serve_device_ids_in_minor_order(rig: Any) -> None:
    rig.start()
    assert rig.plugin.device_ids() == [g.uuid for g in rig.node.gpus]


def test_serve_stop_ends_streams_and_removes_the_socket(rig: Any) -> None:
    ep = rig.start()
    ep.wait_devices(lambda ds: len(ds) == 8, what="8 devices")
    rig.plugin.stop()
    assert not (rig.dir / "nvidia-gpu.sock").exists(), "stop() must remove the plugin's socket"
    deadline = time.monotonic() + 3
    while not ep.stream_error and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ep.stream_error, "after stop() the kubelet's ListAndWatch stream must end"


# --------------------------------------------------------------------------- health
def test_health_first_list_has_every_gpu_healthy_with_its_numa_node(rig: Any) -> None:
    ep = rig.start()
    devices = ep.wait_devices(lambda ds: len(ds) == 8, what="8 devices")
    assert [d.ID for d in devices] == [g.uuid for g in rig.node.gpus]
    assert all(d.health == HEALTHY for d in devices), health(devices)
    assert [[n.ID for n in d.topology.nodes] for d in devices] == [[g.numa] for g in rig.node.gpus]


def test_health_xid_makes_a_gpu_unhealthy_and_recovery_healthy(rig: Any) -> None:
    ep = rig.start()
    ep.wait_devices(lambda ds: len(ds) == 8, what="8 devices")
    bad = rig.node.gpus[3].uuid
    rig.node.set_health(bad, False, xid=79)  # "GPU has fallen off the bus"
    ds = ep.wait_devices(lambda ds: health(ds).get(bad) == UNHEALTHY, what=f"{bad} Unhealthy")
    assert [d.ID for d in ds if d.health == UNHEALTHY] == [bad], health(ds)
    assert len(ds) == 8, "send the whole list every time, not only the device that changed"
    rig.node.set_health(bad, True)
    ds = ep.wait_devices(lambda ds: health(ds).get(bad) == HEALTHY, what=f"{bad} Healthy again")
    assert all(d.health == HEALTHY for d in ds)


def test_health_two_quick_failures_both_reach_the_kubelet(rig: Any) -> None:
    ep = rig.start()
    ep.wait_devices(lambda ds: len(ds) == 8, what="8 devices")
    a, b = uuids(rig, 0, 6)
    rig.node.set_health(a, False, xid=48)  # double-bit ECC error
    rig.node.set_health(b, False, xid=79)
    ep.wait_devices(
        lambda ds: health(ds).get(a) == UNHEALTHY and health(ds).get(b) == UNHEALTHY,
        what="GPUs 0 and 6 Unhealthy",
    )


# --------------------------------------------------------------------------- allocate
def test_allocate_env_device_nodes_and_read_only_driver_mounts(rig: Any) -> None:
    ep = rig.start()
    ids = uuids(rig, 2, 3)
    (c,) = ep.allocate(ids).container_responses
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(ids), dict(c.envs)
    paths = [(d.container_path, d.host_path, d.permissions) for d in c.devices]
    want = ["/dev/nvidia2", "/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm",
            "/dev/nvidia-uvm-tools"]  # fmt: skip
    assert sorted(p for p, _, _ in paths) == sorted(want), paths
    assert all(p == h and perm == "rw" for p, h, perm in paths), paths
    mounts = {m.host_path: (m.container_path, m.read_only) for m in c.mounts}
    assert mounts == {lib: (lib, True) for lib in rig.node.driver_libraries}, mounts


def test_allocate_one_response_per_container_in_order(rig: Any) -> None:
    ep = rig.start()
    a, b, c = uuids(rig, 0, 5, 7)
    resp = ep.allocate([a], [b, c])
    got = [r.envs["NVIDIA_VISIBLE_DEVICES"] for r in resp.container_responses]
    assert got == [a, f"{b},{c}"], got


def test_allocate_unknown_device_is_refused(rig: Any) -> None:
    ep = rig.start()
    with pytest.raises(AssertionError, match="INVALID_ARGUMENT.*GPU-does-not-exist"):
        ep.allocate(["GPU-does-not-exist"])


def test_allocate_prestart_answers(rig: Any) -> None:
    ep = rig.start()
    ep.prestart(uuids(rig, 0))


# --------------------------------------------------------------------------- preferred
def test_preferred_scores(rig: Any, dp: Any) -> None:
    n = rig.node
    g = [x.uuid for x in n.gpus]
    assert dp.pair_score(n, g[0], g[1]) == 400, "NV4: 100 per NVLink link"
    assert dp.pair_score(n, g[0], g[2]) == 10, "NODE: same socket, different PCIe switch"
    assert dp.pair_score(n, g[0], g[5]) == 1, "SYS: across sockets"
    assert dp.set_score(n, g[:4]) == 400 + 400 + 4 * 10
    assert dp.set_score(n, g[:1]) == 0


def test_preferred_two_gpus_are_an_nvlink_pair(rig: Any) -> None:
    ep = rig.start()
    ids = ep.preferred(uuids(rig, 1, 2, 4, 5, 6), [], 2)
    assert sorted(ids) == sorted(uuids(rig, 4, 5)), "1-2 are on different bridges; 4-5 are NV4"


def test_preferred_must_include_is_kept(rig: Any) -> None:
    ep = rig.start()
    ids = ep.preferred(uuids(rig, *range(8)), uuids(rig, 2), 2)
    assert sorted(ids) == sorted(uuids(rig, 2, 3)), ids


def test_preferred_four_gpus_stay_on_one_socket(rig: Any) -> None:
    ep = rig.start()
    ids = set(ep.preferred(uuids(rig, 0, 1, 3, 4, 5, 6, 7), [], 4))
    assert ids == set(uuids(rig, 4, 5, 6, 7)), "two NVLink pairs on socket 1 beat one + strays"


def test_preferred_picture(rig: Any, picture: Any, kata_metrics: Any) -> None:
    ep = rig.start()
    free = uuids(rig, *range(8))
    allocations = []
    for label, size in [("pod a (2 GPUs)", 2), ("pod b (4 GPUs)", 4), ("pod c (1 GPU)", 1)]:
        ids = ep.preferred(free, [], size)
        assert len(ids) == size and set(ids) <= set(free), ids
        allocations.append((label, ids))
        free = [u for u in free if u not in ids]
    svg = picture.draw(rig.node, allocations, "your preferred allocations, one pod after another")
    kata_metrics["svg"] = svg
    kata_metrics["label"] = "your plugin's preferred allocations on an 8-GPU PCIe node"
    assert sorted(allocations[0][1]) == sorted(uuids(rig, 0, 1))


# --------------------------------------------------------------------------- sharing
def test_sharing_replicas_are_advertised(rig: Any) -> None:
    ep = rig.start(replicas=4)
    ds = ep.wait_devices(lambda ds: len(ds) == 32, what="32 replicas")
    assert [d.ID for d in ds[:5]] == [f"{rig.node.gpus[0].uuid}::{k}" for k in range(4)] + [
        f"{rig.node.gpus[1].uuid}::0"
    ]


def test_sharing_allocate_gives_the_physical_gpu_once(rig: Any) -> None:
    ep = rig.start(replicas=4)
    g0 = rig.node.gpus[0]
    (c,) = ep.allocate([f"{g0.uuid}::1", f"{g0.uuid}::3"]).container_responses
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == g0.uuid, dict(c.envs)
    assert sorted(d.host_path for d in c.devices).count("/dev/nvidia0") == 1


def test_sharing_an_unhealthy_gpu_takes_its_replicas_with_it(rig: Any) -> None:
    ep = rig.start(replicas=2)
    ep.wait_devices(lambda ds: len(ds) == 16, what="16 replicas")
    bad = rig.node.gpus[5].uuid
    rig.node.set_health(bad, False, xid=79)
    ds = ep.wait_devices(
        lambda ds: sum(d.health == UNHEALTHY for d in ds) == 2, what="2 Unhealthy replicas"
    )
    assert {d.ID for d in ds if d.health == UNHEALTHY} == {f"{bad}::0", f"{bad}::1"}


def test_sharing_preferred_spreads_replicas_over_gpus(rig: Any) -> None:
    ep = rig.start(replicas=2)
    g = [x.uuid for x in rig.node.gpus]
    available = [f"{g[0]}::0", f"{g[0]}::1", f"{g[1]}::1", f"{g[2]}::0", f"{g[2]}::1"]
    ids = ep.preferred(available, [], 2)
    assert ids == [f"{g[0]}::0", f"{g[2]}::0"], ids


# --------------------------------------------------------------------------- restart
def test_restart_registers_again_after_the_kubelet_restarts(rig: Any) -> None:
    rig.start()
    rig.kubelet.restart()  # removes every socket in the directory, serves a new kubelet.sock
    ep = rig.kubelet.wait_registered("nvidia.com/gpu", timeout=5, after=1)
    ep.wait_devices(lambda ds: len(ds) == 8, what="8 devices on the new connection")
    (c,) = ep.allocate([rig.node.gpus[0].uuid]).container_responses
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == rig.node.gpus[0].uuid


def test_serve_socket_is_a_grpc_server(rig: Any) -> None:
    """The kubelet's connection is a real gRPC channel on your unix socket."""
    ep = rig.start()
    with grpc.insecure_channel(f"unix://{rig.dir / 'nvidia-gpu.sock'}") as ch:
        grpc.channel_ready_future(ch).result(timeout=2)
    assert ep.path == rig.dir / "nvidia-gpu.sock"
