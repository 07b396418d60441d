"""YOUR FILE. A Kubernetes device plugin for the GPUs of one node, in Python.

The kubelet finds GPUs through this plugin (README.md walks through the protocol):

  start()                 serve the DevicePlugin service on <plugin_dir>/<endpoint>, then
                          register with the kubelet on <plugin_dir>/kubelet.sock; keep watching
                          kubelet.sock and register again when the kubelet restarts
  ListAndWatch            stream the device list; send it again whenever a GPU's health changes
  Allocate                what a container needs for its devices: env, device nodes, mounts
  GetPreferredAllocation  which devices to give a pod, topology-aware
  stop()                  stop serving and remove the socket

The generated API is in deviceplugin.py (given): pb2 (messages), pb2_grpc (service base
classes), VERSION, HEALTHY, UNHEALTHY, KUBELET_SOCKET.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from .deviceplugin import HEALTHY, KUBELET_SOCKET, UNHEALTHY, VERSION, pb2, pb2_grpc
from .node import Node

REPLICA_SEP = "::"  # a time-sliced replica's ID: "<GPU UUID>::<k>", as NVIDIA's plugin names them

# Points for a pair of GPUs in one allocation, by their link (README.md, "Preferred allocation").
LINK_SCORE = {"PIX": 50, "NODE": 10, "SYS": 1}
NVLINK_SCORE = 100  # per NVLink link: "NV4" scores 400


def physical(device_id: str) -> str:
    """Task "sharing": the GPU UUID behind an advertised ID ("GPU-x::2" -> "GPU-x")."""
    return device_id.split(REPLICA_SEP, 1)[0]


def pair_score(node: Node, a: str, b: str) -> int:
    """Task "preferred": the score of two GPUs (UUIDs) in one allocation, by their link."""
    link = node.link(a, b)
    if link.startswith("NV"):
        return NVLINK_SCORE * int(link[2:])
    return LINK_SCORE[link]


def set_score(node: Node, uuids: list[str]) -> int:
    """Task "preferred": the sum of pair_score over every pair of the set."""
    return sum(pair_score(node, a, b) for a, b in itertools.combinations(uuids, 2))


def preferred(node: Node, available: list[str], must_include: list[str], size: int) -> list[str]:
    """Task "preferred": `size` GPUs (UUIDs) from `available`, including every one of
    `must_include`, with the highest set_score; ties go to the lowest minor numbers."""
    must = list(dict.fromkeys(must_include))
    if size < len(must) or size > len(set(available) | set(must)):
        raise ValueError(f"cannot choose {size} devices from {len(available)} including {must}")
    rest = sorted(
        (u for u in dict.fromkeys(available) if u not in must), key=lambda u: node.gpu(u).minor
    )
    best: tuple[int, list[str]] | None = None
    for combo in itertools.combinations(rest, size - len(must)):
        chosen = must + list(combo)
        score = set_score(node, chosen)
        if best is None or score > best[0]:
            best = (score, chosen)
    assert best is not None
    return best[1]


def distributed(available: list[str], must_include: list[str], size: int) -> list[str]:
    """Task "sharing": `size` replica IDs, spread over GPUs: each next replica comes from the
    GPU with the most available replicas left (ties: the earliest GPU in `available`)."""
    chosen = list(dict.fromkeys(must_include))
    if size < len(chosen) or size > len(set(available) | set(chosen)):
        raise ValueError(f"cannot choose {size} replicas from {len(available)}")
    free: dict[str, list[str]] = {}
    for rid in available:
        if rid not in chosen:
            free.setdefault(physical(rid), []).append(rid)
    while len(chosen) < size:
        gpu = max(free, key=lambda g: len(free[g]))  # max keeps the first of equals
        chosen.append(free[gpu].pop(0))
        if not free[gpu]:
            del free[gpu]
    return chosen


class GpuDevicePlugin(pb2_grpc.DevicePluginServicer):
    """Advertises `node`'s GPUs (or `replicas` time-sliced replicas of each) as `resource_name`."""

    def __init__(
        self,
        node: Node,
        plugin_dir: str | os.PathLike[str],
        *,
        resource_name: str = "nvidia.com/gpu",
        endpoint: str = "nvidia-gpu.sock",
        replicas: int = 1,
    ):
        self.node = node
        self.dir = Path(plugin_dir)
        self.resource_name = resource_name
        self.endpoint = endpoint
        self.replicas = replicas
        self._server: grpc.Server | None = None
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._watcher: threading.Thread | None = None
        self._health_watch = node.watch_health()
        self._health = {g.uuid: node.healthy(g.uuid) for g in node.gpus}
        # every health state in order, one per event: each ListAndWatch stream sends each one
        self._states: list[dict[str, bool]] = [dict(self._health)]
        threading.Thread(target=self._follow_health, daemon=True).start()

    # ------------------------------------------------------------------ devices
    def device_ids(self) -> list[str]:
        """Tasks "serve" and "sharing": the IDs advertised, in minor order; with replicas > 1
        each GPU appears as <uuid>::0 .. <uuid>::<replicas - 1>."""
        if self.replicas <= 1:
            return [g.uuid for g in self.node.gpus]
        return [f"{g.uuid}{REPLICA_SEP}{k}" for g in self.node.gpus for k in range(self.replicas)]

    def _devices(self, health: dict[str, bool]) -> list[Any]:
        return [
            pb2.Device(
                ID=i,
                health=HEALTHY if health[physical(i)] else UNHEALTHY,
                topology=pb2.TopologyInfo(nodes=[pb2.NUMANode(ID=self.node.gpu(physical(i)).numa)]),
            )
            for i in self.device_ids()
        ]

    def _follow_health(self) -> None:
        while not self._stop.is_set():
            event = self._health_watch.get(timeout=0.05)
            if event is None:
                continue
            with self._changed:
                self._health[event.uuid] = event.healthy
                self._states.append(dict(self._health))
                self._changed.notify_all()

    # ------------------------------------------------------------------ lifecycle
    @property
    def socket(self) -> Path:
        return self.dir / self.endpoint

    def start(self) -> None:
        """Task "serve": serve, then register; task "restart": watch kubelet.sock."""
        self._serve()
        self._register()
        self._watcher = threading.Thread(target=self._watch_kubelet, daemon=True)
        self._watcher.start()

    def _serve(self) -> None:
        self.socket.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb2_grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server

    def _register(self) -> None:
        with grpc.insecure_channel(f"unix://{self.dir / KUBELET_SOCKET}") as channel:
            pb2_grpc.RegistrationStub(channel).Register(
                pb2.RegisterRequest(
                    version=VERSION,
                    endpoint=self.endpoint,
                    resource_name=self.resource_name,
                    options=pb2.DevicePluginOptions(get_preferred_allocation_available=True),
                ),
                timeout=5,
            )

    def _kubelet_id(self) -> tuple[int, int] | None:
        try:
            st = (self.dir / KUBELET_SOCKET).stat()
        except OSError:
            return None
        return (st.st_ino, st.st_ctime_ns)

    def _watch_kubelet(self) -> None:
        # NVIDIA's plugin watches the directory with fsnotify; polling the socket's identity
        # does the same without a dependency: a new kubelet.sock means a restarted kubelet.
        seen = self._kubelet_id()
        while not self._stop.wait(0.05):
            now = self._kubelet_id()
            if now is None or now == seen:
                continue
            seen = now
            try:
                if self._server is not None:
                    self._server.stop(grace=None)
                self._serve()  # the kubelet removed our socket when it started
                self._register()
            except grpc.RpcError:
                seen = None  # the kubelet is not ready yet: try again on the next tick

    def stop(self) -> None:
        """Task "serve": stop serving (open streams end) and remove the socket."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._server is not None:
            self._server.stop(grace=None).wait(2)
            self._server = None
        self._health_watch.close()
        self.socket.unlink(missing_ok=True)

    # ------------------------------------------------------------------ the service
    def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:  # noqa: N802
        return pb2.DevicePluginOptions(
            pre_start_required=False, get_preferred_allocation_available=True
        )

    def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802
        """Task "health": the full list at once, then again after every health change: one
        list per health event, in order, each device with its health and NUMA node."""
        with self._changed:
            sent = len(self._states) - 1
            devices = self._devices(self._states[sent])
        yield pb2.ListAndWatchResponse(devices=devices)
        while not self._stop.is_set() and context.is_active():
            with self._changed:
                if sent + 1 == len(self._states) and not self._stop.is_set():
                    self._changed.wait(timeout=0.1)
                if sent + 1 == len(self._states):
                    continue
                sent += 1  # one list per event, in order: a GPU that fails and recovers at
                devices = self._devices(self._states[sent])  # once is sent Unhealthy first
            yield pb2.ListAndWatchResponse(devices=devices)

    def Allocate(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Task "allocate": one ContainerAllocateResponse per container request."""
        known = set(self.device_ids())
        responses = []
        for creq in request.container_requests:
            ids = list(creq.devices_ids)
            for i in ids:
                if i not in known:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown device {i!r}")
                if not self._health[physical(i)]:
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"device {i!r} is unhealthy")
            uuids = list(dict.fromkeys(physical(i) for i in ids))
            gpus = [self.node.gpu(u) for u in uuids]
            devices = [
                pb2.DeviceSpec(container_path=p, host_path=p, permissions="rw")
                for p in [f"/dev/nvidia{g.minor}" for g in gpus] + list(self.node.control_devices)
            ]
            mounts = [
                pb2.Mount(container_path=lib, host_path=lib, read_only=True)
                for lib in self.node.driver_libraries
            ]
            responses.append(
                pb2.ContainerAllocateResponse(
                    envs={"NVIDIA_VISIBLE_DEVICES": ",".join(uuids)},
                    devices=devices,
                    mounts=mounts,
                )
            )
        return pb2.AllocateResponse(container_responses=responses)

    def GetPreferredAllocation(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Task "preferred" (whole GPUs) and "sharing" (replicas)."""
        out = []
        for creq in request.container_requests:
            available, must = list(creq.available_deviceIDs), list(creq.must_include_deviceIDs)
            try:
                if self.replicas > 1:
                    ids = distributed(available, must, creq.allocation_size)
                else:
                    ids = preferred(self.node, available, must, creq.allocation_size)
            except (ValueError, KeyError) as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            out.append(pb2.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return pb2.PreferredAllocationResponse(container_responses=out)

    def PreStartContainer(self, request: Any, context: Any) -> Any:  # noqa: N802
        return pb2.PreStartContainerResponse()
