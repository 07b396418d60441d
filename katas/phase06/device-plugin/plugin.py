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

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc  # noqa: F401  (you will need it: grpc.server, grpc.StatusCode, ...)

from harness import todo

from .deviceplugin import HEALTHY, KUBELET_SOCKET, UNHEALTHY, VERSION, pb2, pb2_grpc  # noqa: F401
from .node import Node

REPLICA_SEP = "::"  # a time-sliced replica's ID: "<GPU UUID>::<k>", as NVIDIA's plugin names them

# Points for a pair of GPUs in one allocation, by their link (README.md, "Preferred allocation").
LINK_SCORE = {"PIX": 50, "NODE": 10, "SYS": 1}
NVLINK_SCORE = 100  # per NVLink link: "NV4" scores 400


def physical(device_id: str) -> str:
    """Task "sharing": the GPU UUID behind an advertised ID ("GPU-x::2" -> "GPU-x")."""
    todo("physical")


def pair_score(node: Node, a: str, b: str) -> int:
    """Task "preferred": the score of two GPUs (UUIDs) in one allocation, by their link."""
    todo("pair_score")


def set_score(node: Node, uuids: list[str]) -> int:
    """Task "preferred": the sum of pair_score over every pair of the set."""
    todo("set_score")


def preferred(node: Node, available: list[str], must_include: list[str], size: int) -> list[str]:
    """Task "preferred": `size` GPUs (UUIDs) from `available`, including every one of
    `must_include`, with the highest set_score; ties go to the lowest minor numbers."""
    todo("preferred")


def distributed(available: list[str], must_include: list[str], size: int) -> list[str]:
    """Task "sharing": `size` replica IDs, spread over GPUs: each next replica comes from the
    GPU with the most available replicas left (ties: the earliest GPU in `available`)."""
    todo("distributed")


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
        # Yours to add: the gRPC server, a lock, what ListAndWatch waits on, the health you
        # have seen (subscribe with node.watch_health() before reading node.healthy()).

    def device_ids(self) -> list[str]:
        """Tasks "serve" and "sharing": the IDs advertised, in minor order; with replicas > 1
        each GPU appears as <uuid>::0 .. <uuid>::<replicas - 1>."""
        todo("GpuDevicePlugin.device_ids")

    def start(self) -> None:
        """Task "serve": serve, then register; task "restart": watch kubelet.sock."""
        todo("GpuDevicePlugin.start")

    def stop(self) -> None:
        """Task "serve": stop serving (open streams end) and remove the socket."""
        todo("GpuDevicePlugin.stop")

    def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:  # noqa: N802
        todo("GetDevicePluginOptions")

    def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802
        """Task "health": the full list at once, then again after every health change: one
        list per health event, in order, each device with its health and NUMA node."""
        todo("ListAndWatch")

    def Allocate(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Task "allocate": one ContainerAllocateResponse per container request."""
        todo("Allocate")

    def GetPreferredAllocation(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Task "preferred" (whole GPUs) and "sharing" (replicas)."""
        todo("GetPreferredAllocation")

    def PreStartContainer(self, request: Any, context: Any) -> Any:  # noqa: N802
        todo("PreStartContainer")
